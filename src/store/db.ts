import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, Transaction } from 'kysely';
import pg from 'pg';
import type { Database } from './schema.ts';

export type Dialect = 'sqlite' | 'postgres';

/** The query layer over either database; store functions take `Db` (or a transaction) so they compose. */
export type Db = Kysely<Database>;
export type Tx = Transaction<Database>;
export type Queryable = Db | Tx;

export interface Store {
  readonly db: Db;
  readonly dialect: Dialect;
  close(): Promise<void>;
}

export interface StoreOptions {
  /** `postgres://…` selects PostgreSQL; otherwise SQLite in `dataDir`. */
  databaseUrl: string | undefined;
  dataDir: string;
}

// int8 (counts, bytes) and numeric arrive as strings by default; every such value here fits a double.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

export function openStore(options: StoreOptions): Store {
  if (options.databaseUrl) {
    const pool = new pg.Pool({ connectionString: options.databaseUrl, max: 10 });
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    return { db, dialect: 'postgres', close: () => db.destroy() };
  }
  mkdirSync(options.dataDir, { recursive: true });
  const file = new SQLite(join(options.dataDir, 'vpn-panel.db'));
  file.pragma('journal_mode = WAL');
  file.pragma('synchronous = NORMAL');
  file.pragma('foreign_keys = ON');
  // The CLI and the panel may write at the same moment; wait instead of failing with SQLITE_BUSY.
  file.pragma('busy_timeout = 5000');
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: file }) });
  return { db, dialect: 'sqlite', close: () => db.destroy() };
}

/** Runs `work` in one transaction: all of its writes land, or none do. */
export function write<T>(db: Queryable, work: (tx: Tx) => Promise<T>): Promise<T> {
  if (db instanceof Transaction) return work(db);
  return db.transaction().execute(work);
}

/** True for a unique-constraint violation on either database. */
export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null || !('code' in error)) return false;
  return error.code === 'SQLITE_CONSTRAINT_UNIQUE' || error.code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || error.code === '23505';
}
