import { sql } from 'kysely';
import type { Queryable } from './db.ts';
import { type Column, rowSet, runSql } from './raw-sql.ts';
import type { DeviceRow } from './devices.ts';

/** One device's bytes of one batch, from the device's side. */
export interface UsageDelta {
  deviceId: number;
  rx: number;
  tx: number;
  /** The node meter of the device after these bytes. */
  meter: number;
}

/** Ids a kysely `in` list binds at once: well under both databases' parameter limits. */
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

const DELTA_COLUMNS: readonly Column<UsageDelta>[] = [
  { name: 'device_id', type: 'bigint', of: (d) => d.deviceId },
  { name: 'rx', type: 'bigint', of: (d) => d.rx },
  { name: 'tx', type: 'bigint', of: (d) => d.tx },
  { name: 'meter', type: 'bigint', of: (d) => d.meter },
];

const ID_COLUMNS: readonly Column<number>[] = [{ name: 'device_id', type: 'bigint', of: (id) => id }];

/** What a batch's deltas belong to, as parameters of the statement that adds them. */
export interface BatchPeriod {
  /** `YYYY-MM`, panel time zone: the batch's month. */
  month: string;
  /** `YYYY-MM-DD`, panel time zone: the batch's day. */
  day: string;
  journalId: string;
  /** The panel's month now, for the limit check of the rows as they come out. */
  currentMonth: string;
}

/**
 * The new counts of a device row `d` given a delta `rx`, `tx`, `meter` of month `$m`, day `$d`, from journal `$j`:
 * a batch of a later month than the counts hold starts them again (for `monthly` limits, the period
 * too); one of an earlier month (stored late) adds only to a `total` period. A batch of a later day than the row's
 * moves the row's day to `rolled_*` (see migration 021) and starts the day again; one of an earlier day leaves the
 * row's day alone (its bytes go to usage_daily).
 */
function countAssignments(rx: string, tx: string, meter: string, m: string, d: string, j: string): string {
  const rolls = `d.usage_month < ${m}`;
  const monthly = "d.limit_period = 'monthly'";
  const dayRolls = `d.usage_day < ${d}`;
  const files = `${dayRolls} and d.usage_day <> ''`;
  return `month_rx = case when d.usage_month = ${m} then d.month_rx + ${rx} when ${rolls} then ${rx}
      else d.month_rx end,
    month_tx = case when d.usage_month = ${m} then d.month_tx + ${tx} when ${rolls} then ${tx} else d.month_tx end,
    period_rx = case when ${monthly} and ${rolls} then ${rx} when ${monthly} and d.usage_month > ${m} then d.period_rx
      else d.period_rx + ${rx} end,
    period_tx = case when ${monthly} and ${rolls} then ${tx} when ${monthly} and d.usage_month > ${m} then d.period_tx
      else d.period_tx + ${tx} end,
    limit_reached_at = case when ${monthly} and ${rolls} then null else d.limit_reached_at end,
    usage_month = case when ${rolls} then ${m} else d.usage_month end,
    day_rx = case when d.usage_day = ${d} then d.day_rx + ${rx} when ${dayRolls} then ${rx} else d.day_rx end,
    day_tx = case when d.usage_day = ${d} then d.day_tx + ${tx} when ${dayRolls} then ${tx} else d.day_tx end,
    rolled_day = case when ${files} then d.usage_day else d.rolled_day end,
    rolled_rx = case when ${files} then d.day_rx else d.rolled_rx end,
    rolled_tx = case when ${files} then d.day_tx else d.rolled_tx end,
    usage_day = case when ${dayRolls} then ${d} else d.usage_day end,
    meter = ${meter},
    meter_journal = ${j}`;
}

/**
 * Whether a device row (its columns unqualified) has reached its limit in the current period `month`
 * and is not marked yet: the one rule of markLimitReached, also asked of the rows a batch changed. A month
 * later than `month` is current too (the clock stepped back: `isOver` in src/domain/usage.ts).
 */
function reachedAndUnmarked(month: string): string {
  return `data_limit > 0 and limit_reached_at is null
    and period_rx + period_tx >= data_limit
      + case when limit_period = 'total' or top_up_month >= ${month} then top_up_bytes else 0 end
    and (limit_period = 'total' or usage_month >= ${month})`;
}

/** What a batch did to the device rows. */
export interface CountsAdded {
  /** The devices that still exist. */
  stored: number[];
  /** Those of them now over their limit in the current period and not marked yet (see markLimitReached). */
  overLimit: number[];
  /** Those whose row holds a later day than the batch's: their bytes of the batch go to usage_daily. */
  late: number[];
  /** Those whose row's day the batch moved out (to `rolled_*`): it goes to usage_daily (fileRolledDays). */
  rolled: number[];
}

/** Adds a batch to the devices' running counts and days (see countAssignments), in one statement. */
export async function addToDeviceCounts(
  db: Queryable,
  deltas: readonly UsageDelta[],
  period: BatchPeriod,
): Promise<CountsAdded> {
  const added: CountsAdded = { stored: [], overLimit: [], late: [], rolled: [] };
  if (deltas.length === 0) return added;
  const v = rowSet(db, deltas, DELTA_COLUMNS, 5);
  const day = 'cast($2 as text)';
  const counts = countAssignments('v.rx', 'v.tx', 'v.meter', 'cast($1 as text)', day, 'cast($3 as text)');
  const text = `update devices as d set ${counts} from ${v.from} where d.id = v.device_id
    returning id, case when ${reachedAndUnmarked('cast($4 as text)')} then 1 else 0 end as over_limit,
      case when usage_day > ${day} then 1 else 0 end as late, case when rolled_day <> '' then 1 else 0 end as rolled`;
  const rows = await runSql<{ id: number; over_limit: number; late: number; rolled: number }>(db, text, [
    period.month,
    period.day,
    period.journalId,
    period.currentMonth,
    ...v.params,
  ]);
  for (const row of rows) {
    const id = Number(row.id);
    added.stored.push(id);
    if (Number(row.over_limit) === 1) added.overLimit.push(id);
    if (Number(row.late) === 1) added.late.push(id);
    if (Number(row.rolled) === 1) added.rolled.push(id);
  }
  return added;
}

const DAY_SUM = `set rx_bytes = usage_daily.rx_bytes + excluded.rx_bytes,
  tx_bytes = usage_daily.tx_bytes + excluded.tx_bytes`;

/** Adds the deltas to the devices' day buckets in usage_daily, in one statement: a batch's late bytes. */
export async function addToDayBuckets(db: Queryable, day: string, deltas: readonly UsageDelta[]): Promise<void> {
  if (deltas.length === 0) return;
  const v = rowSet(db, deltas, DELTA_COLUMNS, 2);
  // `where true`: without it SQLite would read `on conflict` as the join's `on`.
  const text = `insert into usage_daily (device_id, start, rx_bytes, tx_bytes)
    select v.device_id, cast($1 as text), v.rx, v.tx from ${v.from} where true
    on conflict (device_id, start) do update ${DAY_SUM}`;
  await runSql(db, text, [day, ...v.params]);
}

/** Moves the days a batch rolled out of the rows of `ids` into usage_daily, in the batch's transaction. */
export async function fileRolledDays(db: Queryable, ids: readonly number[]): Promise<void> {
  if (ids.length === 0) return;
  const v = rowSet(db, ids, ID_COLUMNS, 1);
  await runSql(
    db,
    `insert into usage_daily (device_id, start, rx_bytes, tx_bytes)
    select d.id, d.rolled_day, d.rolled_rx, d.rolled_tx from devices as d, ${v.from}
    where d.id = v.device_id and d.rolled_day <> ''
    on conflict (device_id, start) do update ${DAY_SUM}`,
    v.params,
  );
  await runSql(
    db,
    `update devices as d set rolled_day = '', rolled_rx = 0, rolled_tx = 0 from ${v.from} where d.id = v.device_id`,
    v.params,
  );
}

/**
 * Adds a batch's bytes (those of devices that still exist, as added to their buckets) to the fleet's day
 * or month row: one row written per batch, whatever its size, in the batch's transaction.
 */
export async function addToFleet(
  db: Queryable,
  table: 'usage_fleet_daily' | 'usage_fleet_monthly',
  start: string,
  rx: number,
  tx: number,
): Promise<void> {
  if (rx + tx === 0) return;
  await db
    .insertInto(table)
    .values({ start, rx_bytes: rx, tx_bytes: tx })
    .onConflict((oc) =>
      oc.column('start').doUpdateSet((eb) => ({
        rx_bytes: eb(`${table}.rx_bytes`, '+', eb.ref('excluded.rx_bytes')),
        tx_bytes: eb(`${table}.tx_bytes`, '+', eb.ref('excluded.tx_bytes')),
      })),
    )
    .execute();
}

/** The fleet's day or month rows from `since` on, oldest first. */
export function listFleetBuckets(
  db: Queryable,
  table: 'usage_fleet_daily' | 'usage_fleet_monthly',
  since: string,
): Promise<UsageBucket[]> {
  return db
    .selectFrom(table)
    .select(['start', 'rx_bytes', 'tx_bytes'])
    .where('start', '>=', since)
    .orderBy('start')
    .execute();
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
  if (ids.length === 0) return [];
  const v = rowSet(db, ids, ID_COLUMNS, 3);
  const text = `update devices as d set limit_reached_at = $1 from ${v.from}
    where d.id = v.device_id and ${reachedAndUnmarked('$2')} returning id`;
  const marked = await runSql<{ id: number }>(db, text, [nowIso, currentMonth, ...v.params]);
  const rows: DeviceRow[] = [];
  for (const part of chunks(marked.map((row) => Number(row.id)))) {
    rows.push(...(await db.selectFrom('devices').selectAll().where('id', 'in', part).orderBy('id').execute()));
  }
  return rows;
}

const HANDSHAKE_COLUMNS: readonly Column<{ deviceId: number; at: string }>[] = [
  { name: 'device_id', type: 'bigint', of: (h) => h.deviceId },
  { name: 'at', type: 'text', of: (h) => h.at },
];

/** Sets the devices' latest handshakes in one statement; a row that holds its handshake already is not written. */
export async function recordHandshakes(
  db: Queryable,
  handshakes: readonly { deviceId: number; at: string }[],
): Promise<void> {
  if (handshakes.length === 0) return;
  const v = rowSet(db, handshakes, HANDSHAKE_COLUMNS, 1);
  const text = `update devices as d set last_handshake = v.at from ${v.from}
    where d.id = v.device_id and d.last_handshake is distinct from v.at`;
  await runSql(db, text, v.params);
}

export interface UsageBucket {
  start: string;
  rx_bytes: number;
  tx_bytes: number;
}

/** The columns that hold a device's current day of usage (migration 021). */
export type DeviceDay = Pick<DeviceRow, 'id' | 'usage_day' | 'day_rx' | 'day_tx'>;

/** `buckets` (oldest first) with `rx` and `tx` added to the bucket `start`, made if missing. */
function plus(buckets: UsageBucket[], start: string, rx: number, tx: number): UsageBucket[] {
  const at = buckets.findIndex((b) => b.start >= start);
  const same = buckets[at];
  if (same?.start === start) {
    buckets[at] = { start, rx_bytes: same.rx_bytes + rx, tx_bytes: same.tx_bytes + tx };
  } else {
    buckets.splice(at === -1 ? buckets.length : at, 0, { start, rx_bytes: rx, tx_bytes: tx });
  }
  return buckets;
}

/** Whether the row's own day has bytes and is `since` or later. */
function rowDay(device: DeviceDay, since: string): boolean {
  return device.usage_day !== '' && device.usage_day >= since && device.day_rx + device.day_tx > 0;
}

/** A device's day buckets from `since` (`YYYY-MM-DD`) on, oldest first: usage_daily's and its row's day. */
export async function listDayBuckets(db: Queryable, device: DeviceDay, since: string): Promise<UsageBucket[]> {
  const filed = await db
    .selectFrom('usage_daily')
    .select(['start', 'rx_bytes', 'tx_bytes'])
    .where('device_id', '=', device.id)
    .where('start', '>=', since)
    .orderBy('start')
    .execute();
  if (!rowDay(device, since)) return filed;
  return plus(filed, device.usage_day, device.day_rx, device.day_tx);
}

/** A device's months from `since` (`YYYY-MM-01`) on, oldest first, each the sum of its days (`start` its 1st). */
export async function listMonthBuckets(db: Queryable, device: DeviceDay, since: string): Promise<UsageBucket[]> {
  const month = sql<string>`substr(start, 1, 7) || '-01'`;
  const rows = await db
    .selectFrom('usage_daily')
    .select((eb) => [month.as('month'), eb.fn.sum<number>('rx_bytes').as('rx'), eb.fn.sum<number>('tx_bytes').as('tx')])
    .where('device_id', '=', device.id)
    .where('start', '>=', since)
    .groupBy(month)
    .orderBy(month)
    .execute();
  // PostgreSQL sums bigints as numeric, which its driver gives as text.
  const filed = rows.map((r) => ({ start: r.month, rx_bytes: Number(r.rx), tx_bytes: Number(r.tx) }));
  if (!rowDay(device, since)) return filed;
  return plus(filed, `${device.usage_day.slice(0, 7)}-01`, device.day_rx, device.day_tx);
}

export async function deleteDeviceUsage(db: Queryable, deviceIds: readonly number[]): Promise<void> {
  for (const part of chunks(deviceIds)) {
    await db.deleteFrom('usage_daily').where('device_id', 'in', part).execute();
  }
}

/** Batches stored before `beforeIso`: nodes never send a batch again that long after it was acknowledged. */
export async function pruneBatches(db: Queryable, beforeIso: string): Promise<void> {
  await db.deleteFrom('usage_batches').where('stored_at', '<', beforeIso).execute();
}

/**
 * The key of a device row's current count toward its limit: its reset time, and for a monthly count its month, so a
 * reset or a new month starts a new one.
 */
const PERIOD_KEY = `case when limit_period = 'total' then usage_reset_at else usage_month || '|' || usage_reset_at end`;

/**
 * Devices whose count in the current `month` crossed one of `percents` (ascending) of their allowance (data limit
 * and the period's top-ups) beyond what was posted in this period: with the highest percent crossed and the
 * period's key. At most `limit` rows, oldest first.
 */
export async function listThresholdsCrossed(
  db: Queryable,
  month: string,
  percents: readonly number[],
  limit: number,
): Promise<{ id: number; crossed: number; notified: number; period: string }[]> {
  if (percents.length === 0) return [];
  const topUp = "case when limit_period = 'total' or top_up_month >= $1 then top_up_bytes else 0 end";
  const allowance = `(data_limit + ${topUp})`;
  const whens = [...percents]
    .reverse()
    .map((p) => `when (period_rx + period_tx) * 100 >= ${p} * ${allowance} then ${p}`)
    .join(' ');
  const crossed = `case ${whens} else 0 end`;
  const notified = `case when threshold_period = ${PERIOD_KEY} then threshold_notified else 0 end`;
  const text = `select id, ${crossed} as crossed, ${notified} as notified, ${PERIOD_KEY} as period from devices
    where data_limit > 0 and (limit_period = 'total' or usage_month >= $1) and ${crossed} > ${notified}
    order by id limit ${Math.trunc(limit)}`;
  const rows = await runSql<{ id: number; crossed: number; notified: number; period: string }>(db, text, [month]);
  return rows.map((r) => ({
    id: Number(r.id),
    crossed: Number(r.crossed),
    notified: Number(r.notified),
    period: r.period,
  }));
}

/** Records that `percent` was posted for the period `period`, once: false when the row moved on meanwhile. */
export async function markThreshold(db: Queryable, id: number, period: string, percent: number): Promise<boolean> {
  const text = `update devices set threshold_notified = $1, threshold_period = $2
    where id = $3 and ${PERIOD_KEY} = $2 and (threshold_period <> $2 or threshold_notified < $1) returning id`;
  return (await runSql<{ id: number }>(db, text, [percent, period, id])).length > 0;
}
