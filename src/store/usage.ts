import { sql } from 'kysely';
import type { Queryable } from './db.ts';
import type { DeviceRow } from './devices.ts';

/** One device's bytes of one batch, from the device's side. */
export interface UsageDelta {
  deviceId: number;
  rx: number;
  tx: number;
  /** The node meter of the device after these bytes. */
  meter: number;
}

/** Rows a statement binds at once: well under both databases' parameter limits. */
const CHUNK = 500;

function chunks<T>(items: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += CHUNK) out.push(items.slice(i, i + CHUNK));
  return out;
}

/** Records that a node batch is stored; false when it was stored before (a batch sent twice). */
export async function claimBatch(db: Queryable, nodeId: number, journalId: string, seq: number, storedAt: string): Promise<boolean> {
  const result = await db
    .insertInto('usage_batches')
    .values({ node_id: nodeId, journal_id: journalId, seq, stored_at: storedAt })
    .onConflict((oc) => oc.doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
}

/**
 * Adds a batch of `month` (`YYYY-MM`) to the devices' running counts. A batch of a later month than
 * the counts hold starts them again (for `monthly` limits, the period too); one of an earlier month
 * (stored late) adds only to a `total` period. Returns the ids of the devices that still exist.
 */
export async function addToDeviceCounts(db: Queryable, deltas: readonly UsageDelta[], month: string, journalId: string): Promise<number[]> {
  const ids: number[] = [];
  for (const part of chunks(deltas)) {
    const values = sql.join(part.map((d) => sql`(cast(${d.deviceId} as bigint), cast(${d.rx} as bigint), cast(${d.tx} as bigint), cast(${d.meter} as bigint))`));
    const rolls = sql`d.usage_month < ${month}`;
    const monthly = sql`d.limit_period = 'monthly'`;
    const result = await sql<{ id: number }>`
      with v (device_id, rx, tx, meter) as (values ${values})
      update devices as d set
        month_rx = case when d.usage_month = ${month} then d.month_rx + v.rx when ${rolls} then v.rx else d.month_rx end,
        month_tx = case when d.usage_month = ${month} then d.month_tx + v.tx when ${rolls} then v.tx else d.month_tx end,
        period_rx = case when ${monthly} and ${rolls} then v.rx when ${monthly} and d.usage_month > ${month} then d.period_rx else d.period_rx + v.rx end,
        period_tx = case when ${monthly} and ${rolls} then v.tx when ${monthly} and d.usage_month > ${month} then d.period_tx else d.period_tx + v.tx end,
        limit_reached_at = case when ${monthly} and ${rolls} then null else d.limit_reached_at end,
        usage_month = case when ${rolls} then ${month} else d.usage_month end,
        meter = v.meter,
        meter_journal = ${journalId}
      from v where d.id = v.device_id
      returning id`.execute(db);
    for (const row of result.rows) ids.push(Number(row.id));
  }
  return ids;
}

/** Adds the deltas to the devices' day or month buckets. */
export async function addToBuckets(db: Queryable, table: 'usage_daily' | 'usage_monthly', start: string, deltas: readonly UsageDelta[]): Promise<void> {
  for (const part of chunks(deltas)) {
    await db
      .insertInto(table)
      .values(part.map((d) => ({ device_id: d.deviceId, start, rx_bytes: d.rx, tx_bytes: d.tx })))
      .onConflict((oc) =>
        oc.columns(['device_id', 'start']).doUpdateSet({
          rx_bytes: sql`${sql.table(table)}.rx_bytes + excluded.rx_bytes`,
          tx_bytes: sql`${sql.table(table)}.tx_bytes + excluded.tx_bytes`,
        }),
      )
      .execute();
  }
}

/**
 * Marks the devices among `ids` that reached their limit in the current period and were not marked
 * yet, and returns them: the ones device.limit_reached is posted for.
 */
export async function markLimitReached(db: Queryable, ids: readonly number[], currentMonth: string, nowIso: string): Promise<DeviceRow[]> {
  const marked: DeviceRow[] = [];
  for (const part of chunks(ids)) {
    const rows = await db
      .updateTable('devices')
      .set({ limit_reached_at: nowIso })
      .where('id', 'in', part)
      .where('data_limit', '>', 0)
      .where('limit_reached_at', 'is', null)
      .where(sql<boolean>`period_rx + period_tx >= data_limit`)
      .where((eb) => eb.or([eb('limit_period', '=', 'total'), eb('usage_month', '=', currentMonth)]))
      .returningAll()
      .execute();
    marked.push(...rows);
  }
  return marked;
}

/** Sets the devices' latest handshakes. */
export async function recordHandshakes(db: Queryable, handshakes: readonly { deviceId: number; at: string }[]): Promise<void> {
  for (const part of chunks(handshakes)) {
    const values = sql.join(part.map((h) => sql`(cast(${h.deviceId} as bigint), ${h.at})`));
    await sql`with v (id, at) as (values ${values}) update devices as d set last_handshake = v.at from v where d.id = v.id`.execute(db);
  }
}

export interface UsageBucket {
  start: string;
  rx_bytes: number;
  tx_bytes: number;
}

/** A device's buckets from `since` on, oldest first. */
export function listBuckets(db: Queryable, table: 'usage_daily' | 'usage_monthly', deviceId: number, since: string): Promise<UsageBucket[]> {
  return db.selectFrom(table).select(['start', 'rx_bytes', 'tx_bytes']).where('device_id', '=', deviceId).where('start', '>=', since).orderBy('start').execute();
}

export async function deleteDeviceUsage(db: Queryable, deviceIds: readonly number[]): Promise<void> {
  for (const part of chunks(deviceIds)) {
    await db.deleteFrom('usage_daily').where('device_id', 'in', part).execute();
    await db.deleteFrom('usage_monthly').where('device_id', 'in', part).execute();
  }
}

/** Batches stored before `beforeIso`: nodes never send a batch again that long after it was acknowledged. */
export async function pruneBatches(db: Queryable, beforeIso: string): Promise<void> {
  await db.deleteFrom('usage_batches').where('stored_at', '<', beforeIso).execute();
}
