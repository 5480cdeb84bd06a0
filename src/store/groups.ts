import type { Db, Queryable } from './db.ts';
import type { DeviceRow } from './devices.ts';
import { ReusedShape, rowLimit } from './query-shapes.ts';

/**
 * The devices of a group (docs/api.md "Groups": every device sharing the external id) after `afterId`, oldest
 * first, `limit` of them (every one when undefined); the (external_id, id) index serves it.
 */
export function listGroupDevices(
  db: Queryable,
  externalId: string,
  afterId: number,
  limit: number | undefined,
): Promise<DeviceRow[]> {
  const query = db
    .selectFrom('devices')
    .selectAll()
    .where('external_id', '=', externalId)
    .where('id', '>', afterId)
    .orderBy('id');
  return (limit === undefined ? query : query.limit(rowLimit(limit))).execute();
}

/**
 * A group's devices counted and summed per usage month, in one pass of the (external_id, id) index. Grouped
 * by month rather than summed for the current one, so the query has no month in it: its rows are reused while
 * nothing has been committed (a group page asks for its totals on every request), across a change of month too.
 */
const monthTotals = new ReusedShape(
  (db, externalId: string) =>
    db
      .selectFrom('devices')
      .where('external_id', '=', externalId)
      .groupBy('usage_month')
      .select((eb) => [
        'usage_month',
        eb.fn.countAll<number>().as('devices'),
        eb.fn.sum<number>('month_rx').as('month_rx'),
        eb.fn.sum<number>('month_tx').as('month_tx'),
      ]),
  ['\u0000external_id'],
);

/** How many devices a group has and what they moved in `currentMonth` (`YYYY-MM`). */
export async function groupTotals(
  db: Db,
  externalId: string,
  currentMonth: string,
): Promise<{ devices: number; monthRx: number; monthTx: number }> {
  const totals = { devices: 0, monthRx: 0, monthTx: 0 };
  for (const row of (await monthTotals.execute(db, externalId)).rows) {
    totals.devices += Number(row.devices);
    if (row.usage_month !== currentMonth) continue;
    totals.monthRx += Number(row.month_rx);
    totals.monthTx += Number(row.month_tx);
  }
  return totals;
}
