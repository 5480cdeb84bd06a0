import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { preparePrivateDir, preparePrivateFile, tightenIfPresent } from '../platform/private-files.ts';
import {
  announceOnPostgres,
  type ChangeTopic,
  type ChangeWatch,
  PostgresChangeWatch,
  sqliteChangeWatch,
} from './change-watch.ts';
import type { Db, Dialect, Queryable } from './db.ts';
import { useImmediateReads } from './query-shapes.ts';
import type { Database } from './schema.ts';
import { sqliteDialect } from './sqlite-dialect.ts';

/** An open database of either dialect. */
export interface Store {
  readonly db: Db;
  readonly dialect: Dialect;
  /**
   * Watches for changes that other processes (the CLI, other panels) make to what `topic` covers,
   * so a process may cache it. On SQLite any commit by another connection counts; on PostgreSQL the
   * writers' `announce`, delivered by LISTEN/NOTIFY (and, while the listener is down, everything).
   */
  watch(topic: ChangeTopic): ChangeWatch;
  /** Tells the other processes' watches that `topic` changed; call inside the writing transaction. */
  announce(db: Queryable, topic: ChangeTopic): Promise<void>;
  /**
   * Requests have arrived: reads from now on see every commit made before them. Reads that give their rows
   * again while nothing was committed (SQLite) check for other connections' commits once between two calls
   * and within one turn of the event loop, so a page with its totals, server and node checks once, and so do
   * the requests the API admits together (src/http/app.ts).
   */
  requestBegins(): void;
  close(): Promise<void>;
}

export interface StoreOptions {
  /** `postgres://…` selects PostgreSQL; otherwise SQLite in `dataDir`. */
  databaseUrl: string | undefined;
  dataDir: string;
}

/** The SQLite database in DATA_DIR. */
const DATABASE_FILE = 'vpn-panel.db';

// int8 (counts, bytes) and numeric arrive as strings by default; every such value here fits a double.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

export function openStore(options: StoreOptions): Store {
  return options.databaseUrl ? openPostgres(options.databaseUrl) : openSqlite(options.dataDir);
}

function openPostgres(url: string): Store {
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  // An idle connection the server ends (a restart, an administrator) leaves the pool, and the next
  // query opens another; unhandled, pg's 'error' event would end the whole process.
  pool.on('error', () => undefined);
  // pg-pool listens for that only while a connection is idle: one lost while a request holds it (in a
  // transaction, between two queries) would emit 'error' unheard and end the process too. Its queries fail
  // all the same, and the pool drops it on release.
  pool.on('connect', (client) => client.on('error', () => undefined));
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  const watches: PostgresChangeWatch[] = [];
  return {
    db,
    dialect: 'postgres',
    watch(topic) {
      const watch = new PostgresChangeWatch(url, topic);
      watches.push(watch);
      return watch;
    },
    announce: announceOnPostgres,
    requestBegins: () => {},
    async close() {
      for (const watch of watches) await watch.close();
      await db.destroy();
    },
  };
}

function openSqlite(dataDir: string): Store {
  preparePrivateDir(dataDir);
  const path = join(dataDir, DATABASE_FILE);
  // SQLite makes its -wal and -shm files with the database file's mode: a 0600 file keeps all three private.
  preparePrivateFile(path);
  for (const suffix of ['-wal', '-shm']) tightenIfPresent(path + suffix);
  const file = new SQLite(path);
  file.pragma('journal_mode = WAL');
  file.pragma('synchronous = NORMAL');
  file.pragma('foreign_keys = ON');
  // The CLI and the panel may write at the same moment; wait instead of failing with SQLITE_BUSY.
  file.pragma('busy_timeout = 5000');
  // SQLite's own page cache size (2 MB): better-sqlite3 builds with 16 MB, which a walk of a large panel fills and the
  // process then keeps; the file's pages stay in the OS page cache anyway (docs/benchmarks.md, "Memory").
  file.pragma('cache_size = -2000');
  const { dialect, reads, requestBegins, dataVersion } = sqliteDialect(file);
  const db = new Kysely<Database>({ dialect });
  useImmediateReads(db, reads);
  return {
    db,
    dialect: 'sqlite',
    watch: () => sqliteChangeWatch(dataVersion),
    announce: async () => {},
    requestBegins,
    close: () => db.destroy(),
  };
}
