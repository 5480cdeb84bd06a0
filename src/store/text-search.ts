import { type Expression, type SqlBool, sql } from 'kysely';
import { isPostgres, type Queryable } from './db.ts';

/** The LIKE pattern of "contains `term`": its own `%`, `_` and `\` match themselves (`\` is the escape). */
export function containsPattern(term: string): string {
  return `%${term.replace(/[\\%_]/g, '\\$&')}%`;
}

/**
 * Whether one of `columns` contains `term`, ignoring case: the one rule of the text searches. PostgreSQL's
 * ILIKE folds every letter its locale knows; SQLite's LIKE folds the ASCII letters only (its build has no ICU),
 * so there "É" and "é" differ. A null column contains nothing. On PostgreSQL a trigram index of the column
 * (migration 019) serves a term of three characters or more; otherwise the rows are read in the order the
 * query walks (docs/benchmarks.md, "Fleet usage and device search").
 */
export function containsText(db: Queryable, columns: readonly string[], term: string): Expression<SqlBool> {
  const like = isPostgres(db) ? sql.raw('ilike') : sql.raw('like');
  const pattern = containsPattern(term);
  const each = columns.map((c) => sql<SqlBool>`${sql.ref(c)} ${like} ${pattern} escape '\\'`);
  return sql<SqlBool>`(${sql.join(each, sql` or `)})`;
}
