import type { Expression, ExpressionBuilder, SqlBool } from 'kysely';
import type { Queryable } from './db.ts';
import { rowLimit } from './query-shapes.ts';
import type { Database } from './schema.ts';

/**
 * The tables a sender claims rows of by holding them until `locked_until`: it takes `claimableIds`, then
 * sets its hold on those still `unheld`. Safe with several senders (panels) on one database: a row is
 * taken by whoever updates it first; the hold of a sender that stopped lapses.
 */
type Outbox = 'mail_outbox' | 'webhook_deliveries';

/** Rows no sender holds: never held, or the hold has lapsed. */
export function unheld(eb: ExpressionBuilder<Database, Outbox>, nowIso: string): Expression<SqlBool> {
  return eb.or([eb('locked_until', 'is', null), eb('locked_until', '<', nowIso)]);
}

/** Up to `limit` pending rows of `outbox` that are due and unheld, first by `order`. */
export async function claimableIds(
  db: Queryable,
  outbox: Outbox,
  order: 'id' | 'next_attempt_at',
  nowIso: string,
  limit: number,
): Promise<number[]> {
  const rows = await db
    .selectFrom(outbox)
    .select('id')
    .where('state', '=', 'pending')
    .where('next_attempt_at', '<=', nowIso)
    .where((eb) => unheld(eb, nowIso))
    .orderBy(order)
    .limit(rowLimit(limit))
    .execute();
  return rows.map((row) => row.id);
}

/** Rows of `outbox` not yet sent nor given up, counted on its index of due rows (`state`, `next_attempt_at`). */
export async function countPending(db: Queryable, outbox: Outbox): Promise<number> {
  const row = await db
    .selectFrom(outbox)
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('state', '=', 'pending')
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}
