import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { type Compilable, CompiledQuery, Kysely, PostgresAdapter, PostgresDialect, type RawBuilder, sql, Transaction } from 'kysely';
import pg from 'pg';
import { preparePrivateDir, preparePrivateFile, tightenIfPresent } from '../agent/private-files.ts';
import type { Database } from './schema.ts';
import { type ImmediateReads, sqliteDialect } from './sqlite-dialect.ts';

export type Dialect = 'sqlite' | 'postgres';

/** The query layer over either database; store functions take `Db` (or a transaction) so they compose. */
export type Db = Kysely<Database>;
export type Tx = Transaction<Database>;
export type Queryable = Db | Tx;

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
  close(): Promise<void>;
}

export type ChangeTopic = 'api_keys';

export interface ChangeWatch {
  /** True when the topic may have changed since the previous call (and on the first call). */
  changed(): boolean;
}

export interface StoreOptions {
  /** `postgres://…` selects PostgreSQL; otherwise SQLite in `dataDir`. */
  databaseUrl: string | undefined;
  dataDir: string;
}

/** The SQLite database in DATA_DIR. */
const DATABASE_FILE = 'vpn-panel.db';

/** How long one read of SQLite's data_version answers for (see Store.watch). */
const WATCH_SHARE_MS = 1;

// int8 (counts, bytes) and numeric arrive as strings by default; every such value here fits a double.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

export function openStore(options: StoreOptions): Store {
  if (options.databaseUrl) {
    const pool = new pg.Pool({ connectionString: options.databaseUrl, max: 10 });
    // An idle connection the server ends (a restart, an administrator) leaves the pool, and the next
    // query opens another; unhandled, pg's 'error' event would end the whole process.
    pool.on('error', () => undefined);
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    const listeners: PostgresListener[] = [];
    return {
      db,
      dialect: 'postgres',
      watch(topic) {
        const listener = new PostgresListener(options.databaseUrl ?? '', `vpn_panel_${topic}`);
        listeners.push(listener);
        return listener;
      },
      async announce(tx, topic) {
        await sql`select pg_notify(${`vpn_panel_${topic}`}, '')`.execute(tx);
      },
      async close() {
        for (const listener of listeners) await listener.close();
        await db.destroy();
      },
    };
  }
  preparePrivateDir(options.dataDir);
  const path = join(options.dataDir, DATABASE_FILE);
  // SQLite makes its -wal and -shm files with the database file's mode: a 0600 file keeps all three private.
  preparePrivateFile(path);
  for (const suffix of ['-wal', '-shm']) tightenIfPresent(path + suffix);
  const file = new SQLite(path);
  file.pragma('journal_mode = WAL');
  file.pragma('synchronous = NORMAL');
  file.pragma('foreign_keys = ON');
  // The CLI and the panel may write at the same moment; wait instead of failing with SQLITE_BUSY.
  file.pragma('busy_timeout = 5000');
  const { dialect, reads } = sqliteDialect(file);
  const db = new Kysely<Database>({ dialect });
  immediateReads.set(db, reads);
  return {
    db,
    dialect: 'sqlite',
    watch() {
      // data_version changes when another connection commits; this process's own writes leave it.
      // Reading it costs more than a typical query, so requests within one millisecond share a read:
      // another process's change is seen within 1 ms of its commit.
      const dataVersion = file.prepare('PRAGMA data_version').pluck();
      let seen: unknown;
      let readAtMs = Number.NEGATIVE_INFINITY;
      return {
        changed() {
          const nowMs = performance.now();
          if (nowMs - readAtMs < WATCH_SHARE_MS) return false;
          readAtMs = nowMs;
          const version: unknown = dataVersion.get();
          const changed = version !== seen;
          seen = version;
          return changed;
        },
      };
    },
    announce: async () => {},
    close: () => db.destroy(),
  };
}

/** Runs `work` in one transaction: all of its writes land, or none do. */
export function write<T>(db: Queryable, work: (tx: Tx) => Promise<T>): Promise<T> {
  if (db instanceof Transaction) return work(db);
  return db.transaction().execute(work);
}

/** The text both databases put the violated columns or index in, for telling constraints apart. */
export function violationText(error: unknown): string {
  if (typeof error !== 'object' || error === null) return '';
  const parts = ['message', 'detail', 'constraint'].map((k) => (k in error ? String(Reflect.get(error, k)) : ''));
  return parts.join(' ');
}

/** True for a unique-constraint violation on either database. */
export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null || !('code' in error)) return false;
  return error.code === 'SQLITE_CONSTRAINT_UNIQUE' || error.code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || error.code === '23505';
}

const LISTEN_RETRY_MS = 2_000;

/** A LISTEN connection; while it is not listening every call reports a change, so nothing stale is used. */
class PostgresListener implements ChangeWatch {
  readonly #url: string;
  readonly #channel: string;
  #client: pg.Client | undefined;
  #listening = false;
  #notified = true;
  #closed = false;
  #retry: NodeJS.Timeout | undefined;

  constructor(url: string, channel: string) {
    this.#url = url;
    this.#channel = channel;
    this.#connect();
  }

  changed(): boolean {
    const changed = this.#notified || !this.#listening;
    this.#notified = false;
    return changed;
  }

  #connect(): void {
    const client = new pg.Client({ connectionString: this.#url });
    this.#client = client;
    const lost = () => {
      this.#listening = false;
      client.removeAllListeners();
      client.end().catch(() => undefined);
      if (!this.#closed) this.#retry = setTimeout(() => this.#connect(), LISTEN_RETRY_MS).unref();
    };
    client.on('notification', () => {
      this.#notified = true;
    });
    client.on('error', lost);
    client.on('end', lost);
    client
      .connect()
      .then(() => client.query(`LISTEN ${this.#channel}`))
      .then(() => {
        this.#notified = true;
        this.#listening = true;
      }, lost);
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retry);
    this.#client?.removeAllListeners();
    await this.#client?.end().catch(() => undefined);
  }
}

/**
 * A page's row limit as a literal in the SQL. SQLite runs `LIMIT ?` about 5 µs slower than `LIMIT 51`
 * on every execution (measured on a cached statement); the limit is a validated small integer, so
 * inlining it is safe and makes at most a couple of hundred statement shapes.
 */
export function rowLimit(limit: number): RawBuilder<number> {
  if (!Number.isSafeInteger(limit) || limit < 1) throw new Error(`row limit must be a positive integer, got ${limit}`);
  return sql.lit(limit);
}

/** The databases whose reads may run at once (SQLite), for CompiledShape. */
const immediateReads = new WeakMap<Db, ImmediateReads>();

export interface ShapeOptions {
  /**
   * On SQLite, answer the last rows again for the same arguments while nothing has been committed
   * (exact: see ImmediateReads). The check reads two counters, one in a read transaction: more
   * than a small indexed query costs, so this pays only for queries that count or scan many rows.
   */
  reuse?: boolean;
}

interface Template<R> {
  compiled: CompiledQuery<R>;
  /** Where each argument goes among the bound parameters (-1: a constant of the query). */
  positions: number[];
  readNow: ((parameters: readonly unknown[]) => readonly Readonly<R>[] | undefined) | undefined;
}

/**
 * A query shape compiled once and run with new values. Kysely rebuilds and recompiles a query on
 * every call, which costs more than SQLite takes to run an indexed one; on hot paths the SQL of a
 * shape never changes, only its bound values. The shape is compiled once with `sample` arguments
 * (distinct values that never occur as constants in the query); where each sample lands among the
 * bound parameters is where the real arguments go on every run. An argument given as undefined
 * must leave its condition out (an optional filter): each pattern of given arguments is compiled
 * once. On SQLite the query runs at once when the connection is free (see ImmediateReads). Rows
 * are read-only, since a shape made with `reuse` gives the same rows to every caller.
 */
export class CompiledShape<A extends readonly unknown[], R> {
  readonly #build: (db: Db, ...args: A) => Compilable<R>;
  readonly #sample: A;
  readonly #reuse: boolean;
  /** Per database (the SQL differs) and pattern of given arguments (bit i: argument i given). */
  readonly #templates = new WeakMap<Db, Map<number, Template<R>>>();

  constructor(build: (db: Db, ...args: A) => Compilable<R>, sample: A, options: ShapeOptions = {}) {
    this.#build = build;
    this.#sample = sample;
    this.#reuse = options.reuse ?? false;
  }

  async execute(db: Db, ...args: A): Promise<readonly Readonly<R>[]> {
    let templates = this.#templates.get(db);
    if (templates === undefined) {
      templates = new Map();
      this.#templates.set(db, templates);
    }
    let given = 0;
    for (let i = 0; i < args.length; i++) if (args[i] !== undefined) given |= 1 << i;
    let template = templates.get(given);
    if (template === undefined) {
      template = this.#compile(db, args);
      templates.set(given, template);
    }
    const { compiled, positions, readNow } = template;
    const parameters = compiled.parameters.map((value, position) => {
      const argument = positions[position] ?? -1;
      return argument === -1 ? value : args[argument];
    });
    const rows = readNow?.(parameters);
    if (rows !== undefined) return rows;
    const query: CompiledQuery<R> = { ...compiled, parameters };
    return (await db.executeQuery(query)).rows;
  }

  #compile(db: Db, args: A): Template<R> {
    const sample: [...A] = [...this.#sample];
    args.forEach((value, i) => {
      if (value === undefined) sample[i] = undefined;
    });
    const compiled = this.#build(db, ...sample).compile();
    const positions = compiled.parameters.map((p) => (p === undefined ? -1 : sample.indexOf(p)));
    sample.forEach((value, i) => {
      if (value !== undefined && compiled.parameters.filter((p) => p === value).length !== 1) throw new Error(`query shape must bind sample argument ${i} exactly once`);
    });
    return { compiled, positions, readNow: immediateReads.get(db)?.prepare<R>(compiled.sql, this.#reuse) };
  }
}

/** A page of a query shape: one CompiledShape per row limit, given to `build` as a literal (see rowLimit). */
export class CompiledPageShape<A extends readonly unknown[], R> {
  readonly #build: (db: Db, limit: RawBuilder<number>, ...args: A) => Compilable<R>;
  readonly #sample: A;
  readonly #options: ShapeOptions;
  readonly #shapes = new Map<number, CompiledShape<A, R>>();

  constructor(build: (db: Db, limit: RawBuilder<number>, ...args: A) => Compilable<R>, sample: A, options: ShapeOptions = {}) {
    this.#build = build;
    this.#sample = sample;
    this.#options = options;
  }

  execute(db: Db, limit: number, ...args: A): Promise<readonly Readonly<R>[]> {
    let shape = this.#shapes.get(limit);
    if (shape === undefined) {
      shape = new CompiledShape((shapeDb: Db, ...shapeArgs: A) => this.#build(shapeDb, rowLimit(limit), ...shapeArgs), this.#sample, this.#options);
      this.#shapes.set(limit, shape);
    }
    return shape.execute(db, ...args);
  }
}

/**
 * Runs SQL written with PostgreSQL's numbered placeholders (`$1`, which may repeat) on either
 * database. For bulk statements of hundreds of rows, kysely's building costs several times what the
 * database takes to run them; a fixed text also hits SQLite's statement cache.
 */
export async function runSql<R>(db: Queryable, text: string, params: readonly unknown[]): Promise<R[]> {
  const shape = sqlShape(text);
  if (shape.highest !== params.length) throw new Error(`SQL uses $1..$${shape.highest} but has ${params.length} values`);
  // SQLite's driver binds only anonymous `?`: each use of a number gets its value in its place.
  const compiled = isPostgres(db) ? CompiledQuery.raw(text, [...params]) : CompiledQuery.raw(shape.anonymous, shape.uses.map((n) => params[n - 1]));
  const result = await db.executeQuery<R>(compiled);
  return [...result.rows];
}

interface SqlShape {
  highest: number;
  /** The text with `?` for every `$n`, and the n of each in order. */
  anonymous: string;
  uses: number[];
}

const shapes = new Map<string, SqlShape>();

/** Hot statements run with the same text again and again: each is parsed once. */
function sqlShape(text: string): SqlShape {
  let shape = shapes.get(text);
  if (shape === undefined) {
    const uses = [...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1]));
    shape = { highest: Math.max(0, ...uses), anonymous: text.replace(/\$\d+/g, '?'), uses };
    if (shapes.size >= 100) shapes.clear();
    shapes.set(text, shape);
  }
  return shape;
}

export function isPostgres(db: Queryable): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}
