import type { Queryable } from './db.ts';
import type { DeviceRow } from './devices.ts';
import { rowLimit } from './query-shapes.ts';

/**
 * The devices of a group (spec §2.2: every device sharing the external id) after `afterId`, oldest first,
 * `limit` of them (every one when undefined); the (external_id, id) index serves it.
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

/** How many devices a group has and what they moved in `currentMonth` (`YYYY-MM`), in one pass of the index. */
export async function groupTotals(
  db: Queryable,
  externalId: string,
  currentMonth: string,
): Promise<{ devices: number; monthRx: number; monthTx: number }> {
  const row = await db
    .selectFrom('devices')
    .where('external_id', '=', externalId)
    .select((eb) => [
      eb.fn.countAll<number>().as('devices'),
      eb.fn
        .sum<number>(eb.case().when('usage_month', '=', currentMonth).then(eb.ref('month_rx')).else(0).end())
        .as('month_rx'),
      eb.fn
        .sum<number>(eb.case().when('usage_month', '=', currentMonth).then(eb.ref('month_tx')).else(0).end())
        .as('month_tx'),
    ])
    .executeTakeFirst();
  return {
    devices: Number(row?.devices ?? 0),
    monthRx: Number(row?.month_rx ?? 0),
    monthTx: Number(row?.month_tx ?? 0),
  };
}
