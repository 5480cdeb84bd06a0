import { CompiledQuery } from 'kysely';
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
