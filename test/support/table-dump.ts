import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import type { TestDatabase } from './databases.ts';

/** Every row of every table, as plain objects sorted by their JSON: equal dumps mean equal databases. */
export type TableDump = Record<string, Record<string, unknown>[]>;

// int8 columns (counters, bytes) compare as numbers, as on SQLite.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

function sorted(rows: Record<string, unknown>[]): Record<string, unknown>[] {
  return rows
    .map((row) => ({
      json: JSON.stringify(
        Object.keys(row)
          .sort()
          .map((k) => [k, row[k]]),
      ),
      row,
    }))
    .sort((a, b) => (a.json < b.json ? -1 : a.json > b.json ? 1 : 0))
    .map((r) => r.row);
}

const isBookkeeping = (name: string) => name.startsWith('kysely_') || name.startsWith('sqlite_');

/**
 * Reads the test database with its own client (not the code under test), every table but the
 * migration bookkeeping.
 */
export async function dumpTables(database: TestDatabase): Promise<TableDump> {
  const dump: TableDump = {};
  if (database.env.DATABASE_URL === undefined) {
    const file = new SQLite(join(database.dataDir, 'vpn-panel.db'), { readonly: true });
    try {
      const names = file
        .prepare<[], { name: string }>("select name from sqlite_master where type = 'table'")
        .all()
        .map((r) => r.name);
      for (const name of names.filter((n) => !isBookkeeping(n))) {
        dump[name] = sorted(file.prepare<[], Record<string, unknown>>(`select * from "${name}"`).all());
      }
    } finally {
      file.close();
    }
    return dump;
  }
  const client = new pg.Client({ connectionString: database.env.DATABASE_URL });
  await client.connect();
  try {
    const names = await client.query<{ name: string }>(
      "select table_name as name from information_schema.tables where table_schema = current_schema() and table_type = 'BASE TABLE'",
    );
    for (const { name } of names.rows.filter((r) => !isBookkeeping(r.name))) {
      dump[name] = sorted((await client.query<Record<string, unknown>>(`select * from "${name}"`)).rows);
    }
  } finally {
    await client.end();
  }
  return dump;
}

export interface BackupContent {
  header: { migrations: string[]; secret_fingerprint: string | null; tables: { name: string; columns: string[] }[] };
  rows: TableDump;
}

/** A backup file read with gunzip and JSON alone, as any other tool would read it. */
export function readBackup(path: string): BackupContent {
  const lines = gunzipSync(readFileSync(path))
    .toString('utf8')
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l));
  const header = lines[0];
  const rows: TableDump = {};
  for (const table of header.tables) rows[table.name] = [];
  for (const line of lines.slice(1, -1)) {
    const [table, values] = line;
    const columns: string[] = header.tables.find((t: { name: string }) => t.name === table).columns;
    rows[table]?.push(Object.fromEntries(columns.map((c, i) => [c, values[i]])));
  }
  for (const name of Object.keys(rows)) rows[name] = sorted(rows[name] ?? []);
  return { header, rows };
}
