import { sql } from 'kysely';
import { isPostgres, type Queryable } from './db.ts';
import { runSql } from './raw-sql.ts';
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
export async function claimBatch(
  db: Queryable,
  nodeId: number,
  journalId: string,
  seq: number,
  storedAt: string,
): Promise<boolean> {
  const result = await db
    .insertInto('usage_batches')
    .values({ node_id: nodeId, journal_id: journalId, seq, stored_at: storedAt })
    .onConflict((oc) => oc.doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
}

/** `($1, $2…), ($5…)`: one group of placeholders a row, from `$first` on, each cast as given. */
function valuesList(rows: number, casts: readonly string[], first = 1): string {
  const out: string[] = [];
  let n = first;
  for (let r = 0; r < rows; r++) out.push(`(${casts.map((c) => `cast($${n++} as ${c})`).join(', ')})`);
  return out.join(', ');
}

/**
 * The new counts of a device row `d` given a delta `rx`, `tx`, `meter` of month `$m` from journal `$j`:
 * a batch of a later month than the counts hold starts them again (for `monthly` limits, the period
 * too); one of an earlier month (stored late) adds only to a `total` period.
 */
function countAssignments(rx: string, tx: string, meter: string, m: string, j: string): string {
  const rolls = `d.usage_month < ${m}`;
  const monthly = "d.limit_period = 'monthly'";
  return `month_rx = case when d.usage_month = ${m} then d.month_rx + ${rx} when ${rolls} then ${rx} else d.month_rx end,
    month_tx = case when d.usage_month = ${m} then d.month_tx + ${tx} when ${rolls} then ${tx} else d.month_tx end,
    period_rx = case when ${monthly} and ${rolls} then ${rx} when ${monthly} and d.usage_month > ${m} then d.period_rx else d.period_rx + ${rx} end,
    period_tx = case when ${monthly} and ${rolls} then ${tx} when ${monthly} and d.usage_month > ${m} then d.period_tx else d.period_tx + ${tx} end,
    limit_reached_at = case when ${monthly} and ${rolls} then null else d.limit_reached_at end,
    usage_month = case when ${rolls} then ${m} else d.usage_month end,
    meter = ${meter},
    meter_journal = ${j}`;
}

/**
 * Adds a batch of `month` (`YYYY-MM`) to the devices' running counts (see countAssignments) and
 * returns the ids of the devices that still exist. A chunk of rows goes in one statement. SQLite
 * plans an UPDATE … FROM as a scan of the whole table, so there the chunk goes to a temporary
 * table keyed by device and each device row looks its delta up.
 */
export async function addToDeviceCounts(
  db: Queryable,
  deltas: readonly UsageDelta[],
  month: string,
  journalId: string,
): Promise<number[]> {
  const ids: number[] = [];
  const postgres = isPostgres(db);
  if (!postgres) {
    await runSql(
      db,
      'create temp table if not exists usage_in (device_id integer primary key, rx integer not null, tx integer not null, meter integer not null)',
      [],
    );
  }
  for (const part of chunks(deltas)) {
    const rows = part.flatMap((d) => [d.deviceId, d.rx, d.tx, d.meter]);
    let text: string;
    if (postgres) {
      text = `with v (device_id, rx, tx, meter) as (values ${valuesList(part.length, ['bigint', 'bigint', 'bigint', 'bigint'], 3)})
        update devices as d set ${countAssignments('v.rx', 'v.tx', 'v.meter', 'cast($1 as text)', 'cast($2 as text)')}
        from v where d.id = v.device_id returning id`;
    } else {
      await runSql(db, 'delete from usage_in', []);
      await runSql(
        db,
        `insert into usage_in (device_id, rx, tx, meter) values ${valuesList(part.length, ['integer', 'integer', 'integer', 'integer'])}`,
        rows,
      );
      const delta = (column: string) => `(select u.${column} from usage_in u where u.device_id = d.id)`;
      text = `update devices as d set ${countAssignments(delta('rx'), delta('tx'), delta('meter'), 'cast($1 as text)', 'cast($2 as text)')}
        where d.id in (select device_id from usage_in) returning id`;
    }
    const params = postgres ? [month, journalId, ...rows] : [month, journalId];
    for (const row of await runSql<{ id: number }>(db, text, params)) ids.push(Number(row.id));
  }
  return ids;
}

/** Adds the deltas to the devices' day or month buckets. */
export async function addToBuckets(
  db: Queryable,
  table: 'usage_daily' | 'usage_monthly',
  start: string,
  deltas: readonly UsageDelta[],
): Promise<void> {
  for (const part of chunks(deltas)) {
    const text = `insert into ${table} (device_id, start, rx_bytes, tx_bytes) values ${valuesList(part.length, ['bigint', 'text', 'bigint', 'bigint'])}
      on conflict (device_id, start) do update set rx_bytes = ${table}.rx_bytes + excluded.rx_bytes, tx_bytes = ${table}.tx_bytes + excluded.tx_bytes`;
    await runSql(
      db,
      text,
      part.flatMap((d) => [d.deviceId, start, d.rx, d.tx]),
    );
  }
}

/**
 * Marks the devices among `ids` that reached their limit in the current period and were not marked
 * yet, and returns them: the ones device.limit_reached is posted for. The rows are read back through
 * kysely, so every store plugin (decryption) applies to them.
 */
export async function markLimitReached(
  db: Queryable,
  ids: readonly number[],
  currentMonth: string,
  nowIso: string,
): Promise<DeviceRow[]> {
  const marked: number[] = [];
  for (const part of chunks(ids)) {
    const text = `update devices set limit_reached_at = $1 where id in (${part.map((_, i) => `$${i + 3}`).join(', ')})
      and data_limit > 0 and limit_reached_at is null and period_rx + period_tx >= data_limit
      and (limit_period = 'total' or usage_month = $2) returning id`;
    for (const row of await runSql<{ id: number }>(db, text, [nowIso, currentMonth, ...part]))
      marked.push(Number(row.id));
  }
  const rows: DeviceRow[] = [];
  for (const part of chunks(marked))
    rows.push(...(await db.selectFrom('devices').selectAll().where('id', 'in', part).orderBy('id').execute()));
  return rows;
}

/** Sets the devices' latest handshakes. */
export async function recordHandshakes(
  db: Queryable,
  handshakes: readonly { deviceId: number; at: string }[],
): Promise<void> {
  for (const part of chunks(handshakes)) {
    const values = sql.join(part.map((h) => sql`(cast(${h.deviceId} as bigint), ${h.at})`));
    await sql`with v (id, at) as (values ${values}) update devices as d set last_handshake = v.at from v where d.id = v.id`.execute(
      db,
    );
  }
}

export interface UsageBucket {
  start: string;
  rx_bytes: number;
  tx_bytes: number;
}

/** A device's buckets from `since` on, oldest first. */
export function listBuckets(
  db: Queryable,
  table: 'usage_daily' | 'usage_monthly',
  deviceId: number,
  since: string,
): Promise<UsageBucket[]> {
  return db
    .selectFrom(table)
    .select(['start', 'rx_bytes', 'tx_bytes'])
    .where('device_id', '=', deviceId)
    .where('start', '>=', since)
    .orderBy('start')
    .execute();
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
