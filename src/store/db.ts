import { type Kysely, PostgresAdapter, Transaction } from 'kysely';
import type { Database } from './schema.ts';

export type Dialect = 'sqlite' | 'postgres';

/** The query layer over either database; store functions take `Db` (or a transaction) so they compose. */
export type Db = Kysely<Database>;
export type Tx = Transaction<Database>;
export type Queryable = Db | Tx;

/** Runs `work` in one transaction: all of its writes land, or none do. */
export function write<T>(db: Queryable, work: (tx: Tx) => Promise<T>): Promise<T> {
  if (db instanceof Transaction) return work(db);
  return db.transaction().execute(work);
}

export function isPostgres(db: Queryable): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}
