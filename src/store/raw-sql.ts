import { CompiledQuery, type RawBuilder, type SqlBool, sql } from 'kysely';
import { isPostgres, type Queryable } from './db.ts';

/**
 * Runs SQL written with PostgreSQL's numbered placeholders (`$1`, which may repeat) on either
 * database. For bulk statements of hundreds of rows, kysely's building costs several times what the
 * database takes to run them; a fixed text also hits SQLite's statement cache.
 */
export async function runSql<R>(db: Queryable, text: string, params: readonly unknown[]): Promise<R[]> {
  const placeholders = placeholdersOf(text);
  if (placeholders.highest !== params.length) {
    throw new Error(`SQL uses $1..$${placeholders.highest} but has ${params.length} values`);
  }
  // SQLite's driver binds only anonymous `?`: each use of a number gets its value in its place.
  const compiled = isPostgres(db)
    ? CompiledQuery.raw(text, [...params])
    : CompiledQuery.raw(
        placeholders.anonymous,
        placeholders.uses.map((n) => params[n - 1]),
      );
  const result = await db.executeQuery<R>(compiled);
  return [...result.rows];
}

interface Placeholders {
  highest: number;
  /** The text with `?` for every `$n`, and the n of each in order. */
  anonymous: string;
  uses: number[];
}

const parsed = new Map<string, Placeholders>();

/** Hot statements run with the same text again and again: each is parsed once. */
function placeholdersOf(text: string): Placeholders {
  let placeholders = parsed.get(text);
  if (placeholders === undefined) {
    const uses = [...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1]));
    placeholders = { highest: Math.max(0, ...uses), anonymous: text.replace(/\$\d+/g, '?'), uses };
    if (parsed.size >= 100) parsed.clear();
    parsed.set(text, placeholders);
  }
  return placeholders;
}

/** A column of a row set: its name in the statement, its type, and its value in an item (null for SQL NULL). */
export interface Column<T> {
  name: string;
  type: 'bigint' | 'text';
  of: (item: T) => number | string | null;
}

/**
 * `items` as the table `v` of one statement, bound as parameters `$first` on. On PostgreSQL, numbers only: one
 * array a column, read by unnest(); with text: one JSON array of rows, read by jsonb_array_elements() (pg quotes
 * and escapes each element of a text array in JavaScript, where JSON.stringify is native; as jsonb it is parsed
 * once, where `->>` on json parses a row again for each column: half the time of a 2,000-event insert). On
 * SQLite one JSON array of rows, read by json_each(). Either way a batch of any size is one statement with a
 * fixed text (no list of placeholders per row), and the rows drive the join, so a statement costs what its rows
 * cost, not what the table holds.
 */
export function rowSet<T>(
  db: Queryable,
  items: readonly T[],
  columns: readonly Column<T>[],
  first: number,
): { from: string; params: unknown[] } {
  const names = columns.map((c) => c.name).join(', ');
  const rows = () => [JSON.stringify(items.map((item) => columns.map((c) => c.of(item))))];
  if (!isPostgres(db)) {
    const fields = columns.map((c, i) => `value ->> ${i} as ${c.name}`).join(', ');
    return { from: `(select ${fields} from json_each($${first})) as v`, params: rows() };
  }
  if (columns.some((c) => c.type === 'text')) {
    const fields = columns.map((c, i) => `cast(value ->> ${i} as ${c.type}) as ${c.name}`).join(', ');
    return { from: `(select ${fields} from jsonb_array_elements(cast($${first} as jsonb))) as v`, params: rows() };
  }
  const arrays = columns.map((c, i) => `cast($${first + i} as ${c.type}[])`).join(', ');
  // A number needs no quoting in an array literal: joined here, where pg would quote and escape each.
  const param = (c: Column<T>) => `{${items.map((item) => c.of(item) ?? 'NULL').join(',')}}`;
  return { from: `unnest(${arrays}) as v (${names})`, params: columns.map(param) };
}

/** Rows per statement of insertRows: one statement's arrays stay a few hundred kB. */
const INSERT_ROWS = 1_000;

/**
 * Inserts the items into `table` in order, a thousand rows a statement of fixed text (see rowSet), and gives
 * their ids in the same order (ids rise in the order of a statement's rows on both databases).
 */
export async function insertRows<T>(
  db: Queryable,
  table: string,
  items: readonly T[],
  columns: readonly Column<T>[],
): Promise<number[]> {
  const ids: number[] = [];
  const names = columns.map((c) => c.name).join(', ');
  for (let i = 0; i < items.length; i += INSERT_ROWS) {
    const v = rowSet(db, items.slice(i, i + INSERT_ROWS), columns, 1);
    const rows = await runSql<{ id: number | string }>(
      db,
      `insert into ${table} (${names}) select ${names} from ${v.from} returning id`,
      v.params,
    );
    ids.push(...rows.map((r) => Number(r.id)).sort((a, b) => a - b));
  }
  return ids;
}

/**
 * `column` is one of `ids`, bound as one parameter however many they are (an array on PostgreSQL, JSON on
 * SQLite): a list of a thousand placeholders costs more to build and bind than the statement takes to run.
 */
export function oneOf(db: Queryable, column: string, ids: readonly number[]): RawBuilder<SqlBool> {
  return isPostgres(db)
    ? sql<SqlBool>`${sql.ref(column)} = any(cast(${`{${ids.join(',')}}`} as bigint[]))`
    : sql<SqlBool>`${sql.ref(column)} in (select value from json_each(${JSON.stringify(ids)}))`;
}
