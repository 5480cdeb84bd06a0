import type { AgentPeer, PeerLimits, UsageAck, UsageReport } from '../agent/protocol.ts';
import { type Clock, isoAt } from '../domain/clock.ts';
import type { LimitPeriod } from '../domain/devices.ts';
import type { QuotaAction } from '../domain/plans.ts';
import {
  type Calendar,
  type DeviceUsageState,
  currentTopUp,
  isLimitReached,
  monthUsage,
  periodStartMs,
  periodUsage,
  remainingAllowance,
  type Usage,
} from '../domain/usage.ts';
import { type Db, type Tx, write } from '../store/db.ts';
import type { DeviceRow, PeerRow } from '../store/devices.ts';
import { findNode, type NodeRow } from '../store/nodes.ts';
import { findServer } from '../store/servers.ts';
import {
  addToDayBuckets,
  addToDeviceCounts,
  addToFleet,
  claimBatch,
  fileRolledDays,
  listDayBuckets,
  listFleetBuckets,
  listMonthBuckets,
  markLimitReached,
  recordHandshakes,
  type UsageBucket,
  type UsageDelta,
} from '../store/usage.ts';
import { deviceLimitReached } from './change-kinds.ts';
import { type Change, type ChangePublisher, appendChange, change } from './changes.ts';
import { SYSTEM_ACTOR } from '../domain/events.ts';
import { type PanelObserver, UNOBSERVED_PANEL } from './metrics.ts';

/** docs/api.md "Usage report". */
/**
 * The quota fields of the node's PeerLimits (issue 26; the node's side adds them to PeerLimitsSchema): `throttle`
 * keeps a peer at its data limit, at throttleKbps each way, where absent (`cut`) removes it. Set only for
 * `throttle`, so every other peer's digest stays as it was.
 */
export interface QuotaLimits {
  quotaAction?: QuotaAction;
  throttleKbps?: number;
}

export interface UsageReportView {
  month_usage: Usage;
  period_usage: Usage;
  data_limit: number;
  limit_period: LimitPeriod;
  usage_reset_at: string;
  daily: { start: string; rx_bytes: number; tx_bytes: number }[];
  monthly: { start: string; rx_bytes: number; tx_bytes: number }[];
}

/** The fleet's usage (GET /usage): the panel's zone, today, this month, and the last `days` days with usage. */
export interface FleetUsageView {
  time_zone: string;
  today: Usage;
  this_month: Usage;
  daily: { start: string; rx_bytes: number; tx_bytes: number }[];
}

/** GET /usage shows 1 to this many days (about a year), 30 by default. */
export const FLEET_DAYS_MAX = 366;
export const FLEET_DAYS_DEFAULT = 30;

const usageOf = (b: UsageBucket | undefined): Usage => {
  const rx = b?.rx_bytes ?? 0;
  const tx = b?.tx_bytes ?? 0;
  return { rx_bytes: rx, tx_bytes: tx, total_bytes: rx + tx };
};

/** The usage report shows this many days and months back. */
const DAILY_DAYS = 90;
const MONTHLY_MONTHS = 24;

type UsageColumns =
  | 'data_limit'
  | 'limit_period'
  | 'usage_month'
  | 'month_rx'
  | 'month_tx'
  | 'period_rx'
  | 'period_tx'
  | 'top_up_bytes'
  | 'top_up_month';

export function usageState(row: Pick<DeviceRow, UsageColumns>): DeviceUsageState {
  return {
    dataLimit: row.data_limit,
    limitPeriod: row.limit_period,
    usageMonth: row.usage_month,
    monthRx: row.month_rx,
    monthTx: row.month_tx,
    periodRx: row.period_rx,
    periodTx: row.period_tx,
    topUpBytes: row.top_up_bytes,
    topUpMonth: row.top_up_month,
  };
}

/**
 * Usage on the panel's side: stores what nodes metered (each batch once), keeps the day and month
 * buckets in the panel's time zone, posts device.limit_reached, and tells nodes what each device
 * may still use.
 */
export class UsageService {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly calendar: Calendar;
  readonly #observer: PanelObserver;

  constructor(db: Db, clock: Clock, calendar: Calendar, observer: PanelObserver = UNOBSERVED_PANEL) {
    this.#db = db;
    this.#clock = clock;
    this.calendar = calendar;
    this.#observer = observer;
  }

  currentMonth(): string {
    return this.calendar.month(this.#clock.nowMs());
  }

  monthUsage(row: DeviceRow): Usage {
    return monthUsage(usageState(row), this.currentMonth());
  }

  periodUsage(row: DeviceRow): Usage {
    return periodUsage(usageState(row), this.currentMonth());
  }

  /** The top-up bytes of the current period (docs/api.md "Top-up"). */
  topUp(row: DeviceRow): number {
    return currentTopUp(usageState(row), this.currentMonth());
  }

  isLimitReached(row: DeviceRow): boolean {
    return isLimitReached(usageState(row), this.currentMonth());
  }

  /** When the count toward the limit started: the last reset, or the 1st for a monthly count. */
  periodStart(row: DeviceRow): string {
    return isoAt(periodStartMs(row.limit_period, Date.parse(row.usage_reset_at), this.calendar, this.#clock.nowMs()));
  }

  /**
   * What the device's node must enforce: its remaining allowance as of the meter the panel counted, its expiry, and
   * for a throttled device its speed at the limit (absent for `cut`, as an older panel sends it).
   */
  limitsOf(row: PeerRow): PeerLimits & QuotaLimits {
    const nowMs = this.#clock.nowMs();
    const limits: PeerLimits & QuotaLimits = {
      remainingBytes: remainingAllowance(usageState(row), this.calendar.month(nowMs)),
      journalId: row.meter_journal,
      meter: row.meter,
      dataLimit: row.data_limit,
      periodEndsAtMs: row.limit_period === 'monthly' ? this.calendar.nextMonthStartMs(nowMs) : null,
      expiresAtMs: row.expires_at === null ? null : Date.parse(row.expires_at),
    };
    if (row.quota_action === 'throttle' && row.throttle_speed !== null) {
      limits.quotaAction = 'throttle';
      limits.throttleKbps = row.throttle_speed;
    }
    return limits;
  }

  /** The device as a peer of its server (its IPv6 /128 too when it has one), with its limits. */
  peerOf(row: PeerRow): AgentPeer {
    // One literal, not a spread: fields a spread adds are kept outside the object, 40 bytes more for every peer a
    // local node holds.
    const peer: AgentPeer = {
      deviceId: row.id,
      publicKey: row.public_key,
      allowedIp: `${row.address}/32`,
      speedLimitKbps: row.speed_limit,
      limits: this.limitsOf(row),
    };
    if (row.address6 !== null) peer.allowedIp6 = `${row.address6}/128`;
    return peer;
  }

  /**
   * Stores a node's report: each new batch in one transaction with its sequence number, so a batch
   * sent again is skipped, committed through `changes` (the devices it takes over their limits are its
   * change). Returns what to acknowledge at the next collection.
   */
  async ingest(node: Pick<NodeRow, 'id'>, report: UsageReport, changes: ChangePublisher): Promise<UsageAck | null> {
    let ack: UsageAck | null = null;
    for (const batch of report.batches) {
      const month = this.calendar.month(batch.slotStartMs);
      const day = this.calendar.day(batch.slotStartMs);
      const work = async (tx: Tx) => {
        const nowMs = this.#clock.nowMs();
        if (!(await claimBatch(tx, node.id, report.journalId, batch.seq, isoAt(nowMs)))) {
          return { result: [], change: change({}) };
        }
        // A device that moved no bytes has nothing to add, and its meter is the one its journal sent
        // with its last bytes: leaving its row alone keeps the counts and the meter they are counted to.
        const deltas: UsageDelta[] = batch.entries
          .filter((e) => e.rxBytes + e.txBytes > 0)
          .map((e) => ({ deviceId: e.deviceId, rx: e.rxBytes, tx: e.txBytes, meter: e.meter }));
        const currentMonth = this.calendar.month(nowMs);
        const counted = await addToDeviceCounts(tx, deltas, { month, day, journalId: report.journalId, currentMonth });
        const existing = new Set(counted.stored);
        const stored = deltas.filter((d) => existing.has(d.deviceId));
        const late = new Set(counted.late);
        await addToDayBuckets(tx, day, late.size === 0 ? [] : stored.filter((d) => late.has(d.deviceId)));
        await fileRolledDays(tx, counted.rolled);
        const marked = await markLimitReached(tx, counted.overLimit, currentMonth, isoAt(nowMs));
        return { result: stored, change: await this.#limitReached(tx, marked) };
      };
      // Last, after the change is recorded: every node's batches write these two rows, which stay locked until the
      // commit (PostgreSQL), so concurrent ingests wait on each other only for the commit, in one order (no deadlock).
      const booked = await changes.commit(work, async (tx, stored) => {
        const rx = stored.reduce((sum, d) => sum + d.rx, 0);
        const txBytes = stored.reduce((sum, d) => sum + d.tx, 0);
        await addToFleet(tx, 'usage_fleet_daily', day, rx, txBytes);
        await addToFleet(tx, 'usage_fleet_monthly', `${month}-01`, rx, txBytes);
      });
      this.#observer.usageStored(
        booked.reduce((sum, d) => sum + d.rx, 0),
        booked.reduce((sum, d) => sum + d.tx, 0),
      );
      ack = { journalId: report.journalId, seq: batch.seq };
    }
    if (report.handshakes.length > 0) {
      await write(this.#db, (tx) =>
        recordHandshakes(
          tx,
          report.handshakes.map((h) => ({ deviceId: h.deviceId, at: isoAt(h.lastHandshakeMs) })),
        ),
      );
    }
    return ack;
  }

  /**
   * After a change of limits or usage (PATCH, reset): marks a device that is now over its limit (and
   * posts the event once per period) or unmarks one that is not. Returns the row as stored.
   */
  async settleLimit(tx: Tx, row: DeviceRow, actor: string): Promise<{ row: DeviceRow; change: Change }> {
    const nowMs = this.#clock.nowMs();
    const reached = this.isLimitReached(row);
    if (!reached && row.limit_reached_at !== null) {
      const unmarked = await tx
        .updateTable('devices')
        .set({ limit_reached_at: null })
        .where('id', '=', row.id)
        .returningAll()
        .executeTakeFirstOrThrow();
      return { row: unmarked, change: change({}) };
    }
    if (reached && row.limit_reached_at === null) {
      const [marked] = await markLimitReached(tx, [row.id], this.calendar.month(nowMs), isoAt(nowMs));
      if (marked) return { row: marked, change: await this.#limitReached(tx, [marked], actor) };
    }
    return { row, change: change({}) };
  }

  /** The event and activity row of each device that just reached its limit. */
  async #limitReached(tx: Tx, rows: readonly DeviceRow[], actor: string = SYSTEM_ACTOR): Promise<Change> {
    const reached = change({});
    for (const row of rows) {
      const server = await findServer(tx, row.server_id);
      const node = server && (await findNode(tx, server.node_id));
      if (!server || !node) continue;
      const used = periodUsage(usageState(row), this.currentMonth()).total_bytes;
      appendChange(reached, deviceLimitReached({ row, server, node }, used, actor));
    }
    return reached;
  }

  /**
   * The whole fleet's bytes, deleted devices' included and untouched by usage resets (traffic that happened):
   * today, this month, and each day with usage of the `days` days that end today, in the panel's zone.
   */
  async fleetReport(days: number): Promise<FleetUsageView> {
    const today = this.calendar.day(this.#clock.nowMs());
    const [year, month, date] = today.split('-').map(Number);
    // Calendar days, not multiples of 24 h, so a DST change does not move the first one.
    const first = new Date(Date.UTC(year ?? 1970, (month ?? 1) - 1, (date ?? 1) - (days - 1)));
    const monthStart = `${today.slice(0, 7)}-01`;
    const [daily, monthly] = await Promise.all([
      listFleetBuckets(this.#db, 'usage_fleet_daily', first.toISOString().slice(0, 10)),
      listFleetBuckets(this.#db, 'usage_fleet_monthly', monthStart),
    ]);
    const bucket = (b: UsageBucket) => ({ start: b.start, rx_bytes: b.rx_bytes, tx_bytes: b.tx_bytes });
    return {
      time_zone: this.calendar.timeZone,
      today: usageOf(daily.find((b) => b.start === today)),
      this_month: usageOf(monthly.find((b) => b.start === monthStart)),
      daily: daily.map(bucket),
    };
  }

  /** docs/api.md "Usage report": the counts, and the daily and monthly history (kept across resets). */
  async report(row: DeviceRow): Promise<UsageReportView> {
    const nowMs = this.#clock.nowMs();
    const since = this.calendar.day(nowMs - DAILY_DAYS * 86_400_000);
    const [year, month] = this.calendar.month(nowMs).split('-').map(Number);
    const firstMonth = new Date(Date.UTC(year ?? 1970, (month ?? 1) - MONTHLY_MONTHS, 1)).toISOString().slice(0, 10);
    const [daily, monthly] = await Promise.all([
      listDayBuckets(this.#db, row, since),
      listMonthBuckets(this.#db, row, firstMonth),
    ]);
    const bucket = (b: UsageBucket) => ({ start: b.start, rx_bytes: b.rx_bytes, tx_bytes: b.tx_bytes });
    return {
      month_usage: this.monthUsage(row),
      period_usage: this.periodUsage(row),
      data_limit: row.data_limit,
      limit_period: row.limit_period,
      usage_reset_at: this.periodStart(row),
      daily: daily.map(bucket),
      monthly: monthly.map(bucket),
    };
  }
}
