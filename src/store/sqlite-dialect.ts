import { closeSync, openSync, readSync } from 'node:fs';
import type SQLite from 'better-sqlite3';
import {
  type DatabaseConnection,
  type DialectAdapter,
  type Driver,
  SqliteAdapter,
  SqliteDialect,
  type SqliteDialectConfig,
  type SqliteDatabase,
} from 'kysely';

/**
 * Reads run at once, without kysely's chain of promises (several microseconds a query, more than
 * SQLite takes for an indexed one). A read runs only while no query or transaction holds the
 * connection, so it sees exactly what the same read queued behind them would see.
 */
export interface ImmediateReads {
  /** A prepared read; it answers undefined, having run nothing, while the connection is busy. */
  prepare<R>(sql: string): (parameters: readonly unknown[]) => readonly R[] | undefined;
  /**
   * `prepare`, answering its previous rows (the same array) again for the same parameters while nothing has been
   * committed since: no change by this connection (nothing held it since: ConnectionLock.releases) nor by any
   * other (the database's data_version, read once per request and turn of the event loop: see
   * Store.requestBegins). A request that arrives after a commit never gets the rows before it. The rows are
   * shared by every caller, so nobody may change them (ReusedRows says so).
   */
  prepareReused<R>(sql: string): (parameters: readonly unknown[]) => readonly R[] | undefined;
}

/**
 * Kysely's SQLite dialect with two changes that matter under concurrent requests:
 * - its connection mutex wakes every waiter on each release (`while (lock) await lock`), so N
 *   concurrent queries cost O(N²) wake-ups (measured: 40 µs a query alone, 650 µs with 20,000
 *   waiting). Here a FIFO queue hands the one connection to the next waiter only;
 * - it prepares every statement anew, which costs more than running a typical indexed query.
 *   The SQL text of a query shape is fixed (values are bound), so statements are kept and reused.
 * A transaction holds the connection from acquire to release, so transactions stay exclusive.
 */
export function sqliteDialect(file: SQLite.Database): {
  dialect: SqliteDialect;
  reads: ImmediateReads;
  /** See Store.requestBegins. */
  requestBegins: () => void;
  /** SQLite's data_version as of the current request (or turn of the event loop): see SharedDataVersion. */
  dataVersion: () => unknown;
} {
  const lock = new ConnectionLock();
  const dataVersion = new SharedDataVersion(file, WalIndexHeader.of(file));
  const prepare = <R>(sql: string) => {
    const statement = file.prepare<unknown[], R>(sql);
    // `readonly` too: a write with RETURNING is a reader, and run here it would change rows outside the lock.
    if (!statement.reader || !statement.readonly) throw new Error(`not a read: ${sql}`);
    return statement;
  };
  const reads: ImmediateReads = {
    prepare<R>(sql: string) {
      const statement = prepare<R>(sql);
      return (parameters: readonly unknown[]) => (lock.held ? undefined : statement.all(...parameters));
    },
    prepareReused<R>(sql: string) {
      const statement = prepare<R>(sql);
      let last: { parameters: readonly unknown[]; version: unknown; changes: number; rows: readonly R[] } | undefined;
      return (parameters: readonly unknown[]) => {
        if (lock.held) return undefined;
        // Read before the query: a commit in between then only makes the next read run the query again.
        const version = dataVersion.read();
        const changes = lock.releases;
        if (
          last !== undefined &&
          last.version === version &&
          last.changes === changes &&
          sameValues(last.parameters, parameters)
        )
          return last.rows;
        const rows = statement.all(...parameters);
        last = { parameters, version, changes, rows };
        return rows;
      };
    },
  };
  const database = withStatementCache(file, () => dataVersion.close());
  const dialect = new FairSqliteDialect({ database }, lock, () => file.inTransaction);
  return { dialect, reads, requestBegins: () => dataVersion.expire(), dataVersion: () => dataVersion.read() };
}

/**
 * SQLite's data_version, which changes when another connection commits, read at most once between two
 * requests' arrivals (Store.requestBegins) and within one turn of the event loop. A reading is never older
 * than the request it serves; work that is not a request (a timer) reads it anew in each turn.
 * The pragma starts a read transaction (three fcntl locks), which cost more than a small indexed query; so
 * it runs only when the WAL-index header changed since the last run, which one pread tells.
 */
class SharedDataVersion {
  readonly #statement: SQLite.Statement;
  #header: WalIndexHeader | undefined;
  #value: unknown;
  #valid = false;
  #expiryScheduled = false;

  constructor(file: SQLite.Database, header: WalIndexHeader | undefined) {
    this.#statement = file.prepare('PRAGMA data_version').pluck();
    this.#header = header;
  }

  read(): unknown {
    if (!this.#valid) {
      // The header first: a commit between the two readings then only makes the next one run the pragma.
      if (!this.#sameHeader()) this.#value = this.#statement.get();
      this.#valid = true;
      if (!this.#expiryScheduled) {
        this.#expiryScheduled = true;
        setImmediate(this.#endOfTurn);
      }
    }
    return this.#value;
  }

  expire(): void {
    this.#valid = false;
  }

  close(): void {
    this.#header?.close();
    this.#header = undefined;
  }

  #sameHeader(): boolean {
    if (this.#header === undefined) return false;
    try {
      return this.#header.same();
    } catch {
      // Never expected (the descriptor is kept open); the pragma alone stays exact, so it serves from now on.
      this.close();
      return false;
    }
  }

  readonly #endOfTurn = (): void => {
    this.#expiryScheduled = false;
    this.#valid = false;
  };
}

/**
 * The WAL-index header at the start of the -shm file (SQLite's wal.c, WalIndexHdr: 48 bytes, a change counter
 * bumped by every commit, the WAL's last frame, salts and checksums). A writer rewrites it before its commit
 * ends; a connection's data_version moves only when it finds this header different from the one it saw
 * last (walIndexReadHdr). So while the header is the same bytes, no connection committed and data_version
 * is what it was. The -shm file is SQLite's shared memory, mapped by every connection; a pread through a
 * kept descriptor reads the same pages. SQLite removes or replaces it only when the last connection closes,
 * and this one stays open as long as the descriptor.
 */
class WalIndexHeader {
  static readonly BYTES = 48;
  readonly #fd: number;
  #last = Buffer.alloc(WalIndexHeader.BYTES);
  #next = Buffer.alloc(WalIndexHeader.BYTES);
  #known = false;

  private constructor(fd: number) {
    this.#fd = fd;
  }

  /** The header of a database in WAL mode on a file; undefined for any other (the pragma alone serves). */
  static of(file: SQLite.Database): WalIndexHeader | undefined {
    if (file.memory || file.pragma('journal_mode', { simple: true }) !== 'wal') return undefined;
    // A read makes the connection map the -shm file (creating it if needed) before it is opened here.
    file.prepare('PRAGMA data_version').get();
    return new WalIndexHeader(openSync(`${file.name}-shm`, 'r'));
  }

  /** True when the header holds the same bytes as at the previous call (false at the first). */
  same(): boolean {
    const read = readSync(this.#fd, this.#next, 0, WalIndexHeader.BYTES, 0);
    const same = this.#known && read === WalIndexHeader.BYTES && this.#next.equals(this.#last);
    [this.#last, this.#next] = [this.#next, this.#last];
    this.#known = read === WalIndexHeader.BYTES;
    return same;
  }

  close(): void {
    closeSync(this.#fd);
  }
}

function sameValues(a: readonly unknown[], b: readonly unknown[]): boolean {
  return a.length === b.length && a.every((value, i) => value === b[i]);
}

/** The one connection's owner: a FIFO queue that hands it to the next waiter only. */
class ConnectionLock {
  readonly #waiters: (() => void)[] = [];
  #held = false;
  #releases = 0;

  get held(): boolean {
    return this.#held;
  }

  /**
   * How many times the connection was given back. Only a holder changes rows (reads run at once are read-only),
   * so while this stays the same the connection changed nothing: what SQLite's total_changes() would tell,
   * which is a query on every reused read.
   */
  get releases(): number {
    return this.#releases;
  }

  /** Takes the lock if it is free; else the caller waits for it with `handedOver`. */
  tryAcquire(): boolean {
    if (this.#held) return false;
    this.#held = true;
    return true;
  }

  handedOver(): Promise<void> {
    return new Promise<void>((resolve) => this.#waiters.push(resolve));
  }

  release(): void {
    this.#releases++;
    const next = this.#waiters.shift();
    // The lock passes straight to the next waiter, so nobody can slip in between.
    if (next) next();
    else this.#held = false;
  }
}

class FairSqliteDialect extends SqliteDialect {
  readonly #lock: ConnectionLock;
  readonly #inTransaction: () => boolean;

  constructor(config: SqliteDialectConfig, lock: ConnectionLock, inTransaction: () => boolean) {
    super(config);
    this.#lock = lock;
    this.#inTransaction = inTransaction;
  }

  override createDriver(): Driver {
    return new FairSqliteDriver(super.createDriver(), this.#lock, this.#inTransaction);
  }
  override createAdapter(): DialectAdapter {
    return new ExclusiveConnectionAdapter();
  }
}

/** Tells kysely the driver does its own connection exclusion, so its mutex is not used. */
class ExclusiveConnectionAdapter extends SqliteAdapter {
  override get supportsMultipleConnections(): boolean {
    return true;
  }
}

class FairSqliteDriver implements Driver {
  readonly #inner: Driver;
  readonly #lock: ConnectionLock;
  readonly #inTransaction: () => boolean;

  constructor(inner: Driver, lock: ConnectionLock, inTransaction: () => boolean) {
    this.#inner = inner;
    this.#lock = lock;
    this.#inTransaction = inTransaction;
  }

  init(): Promise<void> {
    return this.#inner.init();
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    if (!this.#lock.tryAcquire()) await this.#lock.handedOver();
    return this.#inner.acquireConnection();
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    await this.#inner.releaseConnection(connection);
    this.#lock.release();
  }

  beginTransaction(connection: DatabaseConnection, settings: Parameters<Driver['beginTransaction']>[1]): Promise<void> {
    return this.#inner.beginTransaction(connection, settings);
  }
  commitTransaction(connection: DatabaseConnection): Promise<void> {
    return this.#inner.commitTransaction(connection);
  }
  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    // SQLite rolls a transaction back by itself on some errors (SQLITE_FULL, SQLITE_IOERR): a ROLLBACK then fails
    // with "no transaction is active", and kysely would throw that instead of the error that explains it.
    if (this.#inTransaction()) await this.#inner.rollbackTransaction(connection);
  }
  destroy(): Promise<void> {
    return this.#inner.destroy();
  }
}

const STATEMENT_CACHE_SIZE = 500;

function withStatementCache(file: SQLite.Database, onClose: () => void): SqliteDatabase {
  const statements = new Map<string, SQLite.Statement>();
  return {
    close: () => {
      onClose();
      file.close();
    },
    prepare(sql: string) {
      let statement = statements.get(sql);
      if (statement === undefined) {
        statement = file.prepare(sql);
        if (statements.size >= STATEMENT_CACHE_SIZE) statements.delete(statements.keys().next().value ?? '');
        statements.set(sql, statement);
      }
      return statement;
    },
  };
}
