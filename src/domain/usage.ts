/**
 * Usage rules: how node counters become deltas, which calendar day and month a byte belongs to in
 * the panel's time zone, and what counts toward a device's data limit.
 */
import type { LimitPeriod } from './devices.ts';

export interface Usage {
  rx_bytes: number;
  tx_bytes: number;
  total_bytes: number;
}

export const NO_USAGE: Usage = { rx_bytes: 0, tx_bytes: 0, total_bytes: 0 };

export function usageOf(rx: number, tx: number): Usage {
  return { rx_bytes: rx, tx_bytes: tx, total_bytes: rx + tx };
}

/**
 * Nodes close a batch at every quarter hour (UTC): every time zone's offset is a whole number of
 * quarter hours, so no batch spans a local midnight and each lands in one day of any panel.
 */
export const SLOT_MS = 15 * 60 * 1000;

export function slotStartMs(ms: number): number {
  return Math.floor(ms / SLOT_MS) * SLOT_MS;
}

/**
 * The growth of a cumulative counter since the last reading. A counter that went down was reset (the
 * interface or peer was made anew), so everything it shows now is new.
 */
export function counterDelta(previous: number, current: number): number {
  return current >= previous ? current - previous : current;
}

/** Names of UTC in the IANA database, as a system or PANEL_TIMEZONE may give it. */
const UTC_NAMES = new Set(['UTC', 'Etc/UTC', 'Etc/UCT', 'UCT', 'Etc/Universal', 'Universal', 'Etc/Zulu', 'Zulu']);

export function isUtc(timeZone: string): boolean {
  return UTC_NAMES.has(timeZone);
}

/**
 * Calendar dates of instants in one IANA time zone. Formatters are costly to make, so one per zone; UTC needs
 * none: the first Intl formatter of a process makes about 8 MB of ICU's data resident.
 */
export class Calendar {
  readonly timeZone: string;
  /** `YYYY-MM-DD` of an instant in this zone. */
  readonly #date: (ms: number) => string;
  readonly #monthStarts = new Map<string, number>();
  /** The last slot asked about and its day: a desired state asks for each of its devices. */
  #lastDay: { slot: number; day: string } | undefined;
  /** The last month asked about and the start of the next: every monthly peer of a desired state asks. */
  #lastNextMonth: { month: string; startMs: number } | undefined;

  constructor(timeZone: string) {
    this.timeZone = timeZone;
    if (isUtc(timeZone)) {
      this.#date = (ms) => new Date(ms).toISOString().slice(0, 10);
    } else {
      // en-CA formats dates as YYYY-MM-DD.
      const format = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' });
      this.#date = (ms) => format.format(ms);
    }
  }

  /** `YYYY-MM-DD` of the instant in this zone: the same for a whole slot (see SLOT_MS). */
  day(ms: number): string {
    const slot = slotStartMs(ms);
    if (this.#lastDay?.slot !== slot) this.#lastDay = { slot, day: this.#date(slot) };
    return this.#lastDay.day;
  }

  /** `YYYY-MM` of the instant in this zone. */
  month(ms: number): string {
    return this.day(ms).slice(0, 7);
  }

  /**
   * The first instant of the month `YYYY-MM` in this zone: 00:00 on the 1st, or the first moment of
   * that day where a DST change skips midnight. Found by bisection over the instants around it.
   */
  monthStartMs(month: string): number {
    const cached = this.#monthStarts.get(month);
    if (cached !== undefined) return cached;
    const [year, monthNo] = month.split('-').map(Number);
    const utcMidnight = Date.UTC(year ?? 1970, (monthNo ?? 1) - 1, 1);
    // Offsets lie within ±14 h: before `low` the zone is still in the previous month, at `high` in this one.
    let low = utcMidnight - 15 * 3_600_000;
    let high = utcMidnight + 15 * 3_600_000;
    while (high - low > 1) {
      const mid = Math.floor((low + high) / 2);
      if (this.month(mid) >= month) high = mid;
      else low = mid;
    }
    this.#monthStarts.set(month, high);
    return high;
  }

  /** The first instant of the month after the one holding `ms`. */
  nextMonthStartMs(ms: number): number {
    const month = this.month(ms);
    if (this.#lastNextMonth?.month === month) return this.#lastNextMonth.startMs;
    const [year, monthNo] = month.split('-').map(Number);
    const next = new Date(Date.UTC(year ?? 1970, monthNo ?? 1, 1)).toISOString().slice(0, 7);
    this.#lastNextMonth = { month, startMs: this.monthStartMs(next) };
    return this.#lastNextMonth.startMs;
  }
}

/** What the panel keeps of a device's usage on its row. */
export interface DeviceUsageState {
  dataLimit: number;
  limitPeriod: LimitPeriod;
  /** The month (`YYYY-MM`) the month counters hold; '' before any usage. */
  usageMonth: string;
  monthRx: number;
  monthTx: number;
  /** Bytes since the count toward the limit last started (a reset, or for `monthly` the 1st). */
  periodRx: number;
  periodTx: number;
  /** Bytes of top-ups (docs/api.md "Top-up"), added in `topUpMonth`. */
  topUpBytes: number;
  topUpMonth: string;
}

/*
 * A month is over only once the clock has passed it: a stored month later than the clock's (the clock stepped
 * back across the 1st, test/chaos/time-clock-step.test.ts) still counts, or that hour would be a second reset.
 * Months are `YYYY-MM`, so they compare as strings.
 */
function isOver(month: string, currentMonth: string): boolean {
  return month < currentMonth;
}

/** The top-up bytes that count now: a monthly count's lapse with the month they were added in. */
export function currentTopUp(state: DeviceUsageState, currentMonth: string): number {
  return state.limitPeriod === 'total' || !isOver(state.topUpMonth, currentMonth) ? state.topUpBytes : 0;
}

/** The calendar month's usage, zero once the month the counters hold is over. */
export function monthUsage(state: DeviceUsageState, currentMonth: string): Usage {
  return isOver(state.usageMonth, currentMonth) ? NO_USAGE : usageOf(state.monthRx, state.monthTx);
}

/** What counts toward the limit now: a monthly count from an earlier month has restarted. */
export function periodUsage(state: DeviceUsageState, currentMonth: string): Usage {
  if (state.limitPeriod === 'monthly' && isOver(state.usageMonth, currentMonth)) return NO_USAGE;
  return usageOf(state.periodRx, state.periodTx);
}

/**
 * docs/decisions.md "Device status and online": the limit applies when data_limit > 0 and is reached when the
 * period's usage gets to it and the period's top-ups.
 */
export function isLimitReached(state: DeviceUsageState, currentMonth: string): boolean {
  if (state.dataLimit <= 0) return false;
  return periodUsage(state, currentMonth).total_bytes >= state.dataLimit + currentTopUp(state, currentMonth);
}

/** Bytes the device may still use in this period; null when it has no limit. */
export function remainingAllowance(state: DeviceUsageState, currentMonth: string): number | null {
  if (state.dataLimit <= 0) return null;
  const allowance = state.dataLimit + currentTopUp(state, currentMonth);
  return Math.max(0, allowance - periodUsage(state, currentMonth).total_bytes);
}

/** When the count toward the limit started: the last reset, or for `monthly` the 1st if that is later. */
export function periodStartMs(
  limitPeriod: LimitPeriod,
  usageResetAtMs: number,
  calendar: Calendar,
  nowMs: number,
): number {
  if (limitPeriod === 'total') return usageResetAtMs;
  return Math.max(usageResetAtMs, calendar.monthStartMs(calendar.month(nowMs)));
}
