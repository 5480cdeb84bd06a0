import { type RawBuilder, sql, type UnknownRow } from 'kysely';
import {
  BACKUP_FORMAT,
  BACKUP_VERSION,
  BackupError,
  type BackupHeader,
  backupLines,
  type PortableValue,
  parseRow,
  parseTrailer,
  writeBackupFile,
} from './backup-file.ts';
import type { Queryable } from './db.ts';
import type { Store } from './open.ts';
import { describeTables, executedMigrations, readSequences, type TableShape, writeSequences } from './introspect.ts';
import { MIGRATION_NAMES } from './migrate.ts';
import { sealedWith } from './panel-secret.ts';

/** Rows read per query while dumping a table. */
const READ_PAGE_ROWS = 1_000;
/** Bound values per insert while restoring (below SQLite's and PostgreSQL's parameter limits). */
const INSERT_PARAMETERS = 5_000;

export interface BackupSummary {
  tables: number;
  rows: number;
  migration: string;
  sha256: string;
}

/**
 * A value as both databases take it back: booleans as 0/1, times as ISO text, JSON as text,
 * binary as base64, so SQLite → PostgreSQL → SQLite gives back what it started with.
 */
function portable(value: unknown, where: string): PortableValue {
  if (value === null || typeof value === 'string') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new BackupError(`${where} holds ${value}, which a backup cannot carry`);
    return value;
  }
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (typeof value === 'bigint') return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
  if (value instanceof Date) return value.toISOString();
  if (value instanceof Uint8Array) return { base64: Buffer.from(value).toString('base64') };
  if (typeof value === 'object') return JSON.stringify(value);
  throw new BackupError(`${where} holds a value of type ${typeof value}, which a backup cannot carry`);
}

function bindable(value: PortableValue): string | number | null | Buffer {
  return value !== null && typeof value === 'object' ? Buffer.from(value.base64, 'base64') : value;
}

const refs = (columns: readonly string[]) => sql.join(columns.map((c) => sql.ref(c)));

/** One page of a table in key order: after `after` (the previous page's last key) when given. */
function readPage(
  db: Queryable,
  table: TableShape,
  after: unknown[] | undefined,
  offset: number,
): Promise<{ rows: UnknownRow[] }> {
  const columns = refs(table.columns);
  const limit = sql.lit(READ_PAGE_ROWS);
  if (table.primaryKey.length === 0) {
    // No key to continue from: the whole row orders it, and the snapshot keeps offsets stable.
    return sql<UnknownRow>`select ${columns} from ${sql.table(table.name)} order by ${columns} limit ${limit} offset ${sql.lit(offset)}`.execute(
      db,
    );
  }
  const key = refs(table.primaryKey);
  const where: RawBuilder<unknown> = after === undefined ? sql`` : sql`where (${key}) > (${sql.join(after)})`;
  return sql<UnknownRow>`select ${columns} from ${sql.table(table.name)} ${where} order by ${key} limit ${limit}`.execute(
    db,
  );
}

/** Every row of the table as a backup line, page by page. */
async function* tableLines(db: Queryable, table: TableShape, counts: Map<string, number>): AsyncGenerator<string> {
  let after: unknown[] | undefined;
  for (let offset = 0; ; offset += READ_PAGE_ROWS) {
    const { rows } = await readPage(db, table, after, offset);
    let text = '';
    for (const row of rows) {
      const values = table.columns.map((c) => portable(row[c], `${table.name}.${c}`));
      text += `${JSON.stringify([table.name, values])}\n`;
    }
    counts.set(table.name, (counts.get(table.name) ?? 0) + rows.length);
    if (text !== '') yield text;
    const last = rows.at(-1);
    if (last === undefined || rows.length < READ_PAGE_ROWS) return;
    after = table.primaryKey.map((c) => last[c]);
  }
}

/**
 * A consistent snapshot of the whole state while panels go on writing: one read transaction
 * (SQLite in WAL mode reads one snapshot; PostgreSQL REPEATABLE READ, READ ONLY).
 */
function inSnapshot<T>(store: Store, work: (db: Queryable) => Promise<T>): Promise<T> {
  const db = store.db.withoutPlugins();
  const transaction =
    store.dialect === 'postgres'
      ? db.transaction().setIsolationLevel('repeatable read').setAccessMode('read only')
      : db.transaction();
  return transaction.execute(work);
}

/**
 * Writes a backup of every table (sealed values stay sealed: the backup needs no secret and shows
 * none) to `path`.
 */
export async function writeBackup(store: Store, path: string, createdAt: string): Promise<BackupSummary> {
  return inSnapshot(store, async (db) => {
    const tables = await describeTables(db, store.dialect);
    const migrations = await executedMigrations(db, store.dialect);
    const migration = migrations.at(-1);
    if (migration === undefined) throw new BackupError('the database has no vpn-panel schema: nothing to back up');
    const sequences = new Map((await readSequences(db, store.dialect)).map((s) => [s.table, s.high]));
    const header: BackupHeader = {
      format: BACKUP_FORMAT,
      version: BACKUP_VERSION,
      created_at: createdAt,
      dialect: store.dialect,
      migrations,
      secret_fingerprint: tables.some((t) => t.name === 'panel_settings') ? ((await sealedWith(db)) ?? null) : null,
      tables: tables.map((t) => ({ name: t.name, columns: t.columns, sequence: sequences.get(t.name) ?? null })),
    };
    const counts = new Map<string, number>();
    const sha256 = await writeBackupFile(
      path,
      (async function* () {
        yield `${JSON.stringify(header)}\n`;
        for (const table of tables) yield* tableLines(db, table, counts);
        yield `${JSON.stringify({ rows: Object.fromEntries(counts) })}\n`;
      })(),
    );
    return { tables: tables.length, rows: [...counts.values()].reduce((a, b) => a + b, 0), migration, sha256 };
  });
}

/**
 * Whether a backup made at schema level `backup` can go into a database at level `target`: the
 * backup's migrations must be ones this code knows (else it comes from a newer vpn-panel), and the
 * target may not be past the backup. Returns the level to migrate the target to before loading.
 */
export function restoreLevel(backup: readonly string[], target: readonly string[]): string {
  const unknown = backup.filter((m) => !MIGRATION_NAMES.includes(m));
  if (unknown.length > 0)
    throw new BackupError(
      `the backup comes from a newer vpn-panel (migration ${unknown.join(', ')}); restore it with that version or a later one`,
    );
  const level = backup.at(-1);
  if (level === undefined || backup.some((m, i) => MIGRATION_NAMES[i] !== m))
    throw new BackupError('the backup lists migrations this vpn-panel does not run in that order');
  if (target.length > backup.length || target.some((m, i) => backup[i] !== m)) {
    throw new BackupError(
      `the database is at a newer schema (${target.at(-1) ?? ''}) than the backup (${level}): restore into an empty database`,
    );
  }
  return level;
}

/** The backup's tables and columns are the target's: the same schema level on either dialect. */
function checkSchema(header: BackupHeader, target: readonly TableShape[]): void {
  const problems: string[] = [];
  for (const table of header.tables) {
    const own = target.find((t) => t.name === table.name);
    if (own === undefined) problems.push(`table ${table.name} is not in the database`);
    else if (own.columns.length !== table.columns.length || !table.columns.every((c) => own.columns.includes(c))) {
      problems.push(
        `table ${table.name} has columns ${own.columns.join(',')} here, ${table.columns.join(',')} in the backup`,
      );
    }
  }
  for (const table of target)
    if (!header.tables.some((t) => t.name === table.name)) problems.push(`table ${table.name} is not in the backup`);
  if (problems.length > 0)
    throw new BackupError(`the backup does not fit this database's schema: ${problems.join('; ')}`);
}

async function tablesWithRows(db: Queryable, tables: readonly TableShape[]): Promise<string[]> {
  const found: string[] = [];
  for (const table of tables) {
    const { rows } = await sql`select 1 from ${sql.table(table.name)} limit 1`.execute(db);
    if (rows.length > 0) found.push(table.name);
  }
  return found;
}

/** Rows of one table collected until an insert's worth, then written in one statement. */
class InsertBatch {
  #table = '';
  #columns: readonly string[] = [];
  #rows: PortableValue[][] = [];

  async add(db: Queryable, table: string, columns: readonly string[], values: PortableValue[]): Promise<void> {
    if (table !== this.#table || this.#rows.length * columns.length >= INSERT_PARAMETERS) await this.flush(db);
    this.#table = table;
    this.#columns = columns;
    this.#rows.push(values);
  }

  async flush(db: Queryable): Promise<void> {
    if (this.#rows.length === 0) return;
    const rows = this.#rows.map((values) => sql`(${sql.join(values.map(bindable))})`);
    await sql`insert into ${sql.table(this.#table)} (${refs(this.#columns)}) values ${sql.join(rows)}`.execute(db);
    this.#rows = [];
  }
}

export interface RestoreSummary {
  tables: number;
  rows: number;
}

/**
 * Loads a verified backup into the store's database, migrated to the backup's level, in one
 * transaction: a database that is not empty is refused unless `replace`, which deletes its rows
 * first. Every id counter ends past the backup's. Any failure leaves the database as it was.
 */
export async function loadBackup(
  store: Store,
  path: string,
  header: BackupHeader,
  options: { replace: boolean },
): Promise<RestoreSummary> {
  const db = store.db.withoutPlugins();
  return db.transaction().execute(async (tx) => {
    const target = await describeTables(tx, store.dialect);
    checkSchema(header, target);
    const filled = await tablesWithRows(tx, target);
    if (filled.length > 0 && !options.replace) {
      throw new BackupError(
        `the database is not empty (rows in ${filled.join(', ')}): restore into an empty database, or give --replace to overwrite it`,
      );
    }
    for (const table of [...target].reverse()) await sql`delete from ${sql.table(table.name)}`.execute(tx);
    const counts = await insertRows(tx, path, header);
    const high = new Map(header.tables.map((t) => [t.name, t.sequence ?? 0]));
    await writeSequences(
      tx,
      store.dialect,
      header.tables.map((t) => t.name),
      high,
    );
    return { tables: header.tables.length, rows: [...counts.values()].reduce((a, b) => a + b, 0) };
  });
}

async function insertRows(db: Queryable, path: string, header: BackupHeader): Promise<Map<string, number>> {
  const columns = new Map(header.tables.map((t) => [t.name, t.columns]));
  const counts = new Map<string, number>();
  const batch = new InsertBatch();
  let lineNumber = 0;
  let ended = false;
  for await (const line of backupLines(path)) {
    lineNumber++;
    if (lineNumber === 1) continue;
    if (ended) throw new BackupError('the backup goes on after its trailer');
    const row = parseRow(line);
    if (row === undefined) {
      await batch.flush(db);
      const trailer = parseTrailer(line);
      for (const table of header.tables) {
        if ((trailer.rows[table.name] ?? 0) !== (counts.get(table.name) ?? 0))
          throw new BackupError(
            `the backup's trailer promises ${trailer.rows[table.name] ?? 0} rows of ${table.name}, it holds ${counts.get(table.name) ?? 0}`,
          );
      }
      ended = true;
      continue;
    }
    const tableColumns = columns.get(row.table);
    if (tableColumns === undefined || tableColumns.length !== row.values.length)
      throw new BackupError(`line ${lineNumber} of the backup does not fit table ${row.table}`);
    await batch.add(db, row.table, tableColumns, row.values);
    counts.set(row.table, (counts.get(row.table) ?? 0) + 1);
  }
  if (!ended) throw new BackupError('the backup ends before its trailer');
  return counts;
}
