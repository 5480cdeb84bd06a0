import { sql } from 'kysely';
import { DEFAULT_MIGRATION_LOCK_TABLE, DEFAULT_MIGRATION_TABLE } from 'kysely/migration';
import type { Dialect, Queryable } from './db.ts';

/**
 * What the database itself says about its tables, on either dialect: for work over every table
 * (backups) that must not need changing when a migration adds one.
 */
export interface TableShape {
  name: string;
  /** In the table's own order. */
  columns: string[];
  /** The primary key's columns in key order; empty when the table has none. */
  primaryKey: string[];
  /** Tables its foreign keys point at (itself left out). */
  references: string[];
}

/** A serial or autoincrement column's counter: ids up to `high` were handed out (maybe deleted since). */
export interface SequenceShape {
  table: string;
  high: number;
}

const BOOKKEEPING: readonly string[] = [DEFAULT_MIGRATION_TABLE, DEFAULT_MIGRATION_LOCK_TABLE];

/** Every table of the database (kysely's own bookkeeping included). */
async function tableNames(db: Queryable, dialect: Dialect): Promise<string[]> {
  const rows =
    dialect === 'sqlite'
      ? await sql<{
          name: string;
        }>`select name from sqlite_master where type = 'table' and name not like 'sqlite\\_%' escape '\\'`.execute(db)
      : await sql<{ name: string }>`select table_name as name from information_schema.tables
          where table_schema = current_schema() and table_type = 'BASE TABLE'`.execute(db);
  return rows.rows.map((r) => r.name).sort();
}

export async function describeTable(db: Queryable, dialect: Dialect, name: string): Promise<TableShape> {
  if (dialect === 'sqlite') {
    const columns = await sql<{
      name: string;
      pk: number;
    }>`select name, pk from pragma_table_info(${name}) order by cid`.execute(db);
    const references = await sql<{
      ref: string;
    }>`select distinct "table" as ref from pragma_foreign_key_list(${name})`.execute(db);
    return {
      name,
      columns: columns.rows.map((c) => c.name),
      primaryKey: columns.rows
        .filter((c) => c.pk > 0)
        .sort((a, b) => a.pk - b.pk)
        .map((c) => c.name),
      references: references.rows.map((r) => r.ref).filter((r) => r !== name),
    };
  }
  const columns = await sql<{ name: string }>`select column_name as name from information_schema.columns
    where table_schema = current_schema() and table_name = ${name} order by ordinal_position`.execute(db);
  const primaryKey = await sql<{ name: string }>`select a.attname as name from pg_index i
    join pg_attribute a on a.attrelid = i.indrelid and a.attnum = any(i.indkey)
    where i.indrelid = to_regclass(quote_ident(${name})) and i.indisprimary
    order by array_position(i.indkey::int2[], a.attnum)`.execute(db);
  const references = await sql<{ ref: string }>`select distinct t.relname as ref from pg_constraint c
    join pg_class t on t.oid = c.confrelid
    where c.contype = 'f' and c.conrelid = to_regclass(quote_ident(${name}))`.execute(db);
  return {
    name,
    columns: columns.rows.map((c) => c.name),
    primaryKey: primaryKey.rows.map((c) => c.name),
    references: references.rows.map((r) => r.ref).filter((r) => r !== name),
  };
}

/** Tables ordered so each comes after the tables it references; a cycle keeps name order. */
function dependencyOrder(tables: readonly TableShape[]): TableShape[] {
  const ordered: TableShape[] = [];
  const placed = new Set<string>();
  const known = new Set(tables.map((t) => t.name));
  let pending = [...tables];
  while (pending.length > 0) {
    const ready = pending.filter((t) => t.references.every((r) => placed.has(r) || !known.has(r)));
    const next = ready.length > 0 ? ready : pending.slice(0, 1);
    for (const table of next) {
      ordered.push(table);
      placed.add(table.name);
    }
    pending = pending.filter((t) => !placed.has(t.name));
  }
  return ordered;
}

/** Every table of the schema but the migration bookkeeping, in foreign key order. */
export async function describeTables(db: Queryable, dialect: Dialect): Promise<TableShape[]> {
  const names = (await tableNames(db, dialect)).filter((n) => !BOOKKEEPING.includes(n));
  const tables: TableShape[] = [];
  for (const name of names) tables.push(await describeTable(db, dialect, name));
  return dependencyOrder(tables);
}

/** The migrations run on the database, in the order they run (by name); none when it was never migrated. */
export async function executedMigrations(db: Queryable, dialect: Dialect): Promise<string[]> {
  if (!(await tableNames(db, dialect)).includes(DEFAULT_MIGRATION_TABLE)) return [];
  const rows = await sql<{ name: string }>`select name from ${sql.table(DEFAULT_MIGRATION_TABLE)}`.execute(db);
  return rows.rows.map((r) => r.name).sort();
}

interface SerialColumn {
  table: string;
  column: string;
  sequence: string;
}

async function serialColumns(db: Queryable): Promise<SerialColumn[]> {
  const rows = await sql<SerialColumn>`select table_name as "table", column_name as "column",
      pg_get_serial_sequence(quote_ident(table_name), column_name) as sequence
    from information_schema.columns
    where table_schema = current_schema() and pg_get_serial_sequence(quote_ident(table_name), column_name) is not null`.execute(
    db,
  );
  return rows.rows;
}

/** The id counters of the tables that have one, so a restore never hands out an id a deleted row had. */
export async function readSequences(db: Queryable, dialect: Dialect): Promise<SequenceShape[]> {
  if (dialect === 'sqlite') {
    // SQLite makes this table with the first AUTOINCREMENT table.
    const counters = await sql`select 1 from sqlite_master where type = 'table' and name = 'sqlite_sequence'`.execute(
      db,
    );
    if (counters.rows.length === 0) return [];
    const rows = await sql<{ name: string; seq: number }>`select name, seq from sqlite_sequence`.execute(db);
    return rows.rows.map((r) => ({ table: r.name, high: Number(r.seq) }));
  }
  const out: SequenceShape[] = [];
  for (const serial of await serialColumns(db)) {
    const rows = await sql<{ last: number | null }>`select last_value as last from pg_sequences
      where format('%I.%I', schemaname, sequencename)::regclass = ${serial.sequence}::regclass`.execute(db);
    out.push({ table: serial.table, high: Number(rows.rows[0]?.last ?? 0) });
  }
  return out;
}

/**
 * Sets each table's id counter to the larger of `high` (from the source) and its largest id, so the
 * next id is past both; run after a restore inserted rows with their ids.
 */
export async function writeSequences(
  db: Queryable,
  dialect: Dialect,
  tables: readonly string[],
  high: ReadonlyMap<string, number>,
): Promise<void> {
  if (dialect === 'sqlite') {
    for (const table of tables) {
      const definition = await sql<{
        sql: string;
      }>`select sql from sqlite_master where type = 'table' and name = ${table}`.execute(db);
      if (!/\bautoincrement\b/i.test(definition.rows[0]?.sql ?? '')) continue;
      const max = await sql<{ max: number | null }>`select max(rowid) as max from ${sql.table(table)}`.execute(db);
      const value = Math.max(high.get(table) ?? 0, Number(max.rows[0]?.max ?? 0));
      await sql`delete from sqlite_sequence where name = ${table}`.execute(db);
      if (value > 0) await sql`insert into sqlite_sequence (name, seq) values (${table}, ${value})`.execute(db);
    }
    return;
  }
  for (const serial of await serialColumns(db)) {
    if (!tables.includes(serial.table)) continue;
    const max = await sql<{
      max: number | null;
    }>`select max(${sql.ref(serial.column)}) as max from ${sql.table(serial.table)}`.execute(db);
    const value = Math.max(high.get(serial.table) ?? 0, Number(max.rows[0]?.max ?? 0));
    // setval(…, 1, false): nothing handed out yet, the next id is 1.
    await sql`select setval(${serial.sequence}::regclass, ${Math.max(value, 1)}, ${value > 0})`.execute(db);
  }
}
