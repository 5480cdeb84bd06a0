import { AppError } from './errors.ts';

/** Time as the rules see it: the real one in the service, a manual one in tests. */
export interface Clock {
  nowMs(): number;
}

export const systemClock: Clock = { nowMs: () => Date.now() };

export class ManualClock implements Clock {
  #ms: number;
  constructor(startMs: number) {
    this.#ms = startMs;
  }
  nowMs(): number {
    return this.#ms;
  }
  advance(ms: number): void {
    this.#ms += ms;
  }
}

export function isoAt(ms: number): string {
  return new Date(ms).toISOString();
}

/**
 * RFC 3339 `date-time` (section 5.6): `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`, `T` and `Z` in either case.
 * Refused although RFC 3339's grammar has them: leap seconds (`:60`, no JavaScript instant names one) and
 * instants outside years 0001-9999 in UTC (year 0000; `9999-12-31T23:59:59-01:00`), which would not
 * print back as the same 24-character UTC text. Fractions beyond milliseconds are cut.
 */
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,32}))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const FIRST_MS = Date.parse('0001-01-01T00:00:00.000Z');
const LAST_MS = Date.parse('9999-12-31T23:59:59.999Z');

function isLeapYear(year: number): boolean {
  return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
}

/** The instant a date-time names, in ms since the epoch; undefined when it names none (see DATE_TIME). */
export function instantMs(text: string): number | undefined {
  const m = DATE_TIME.exec(text);
  if (m === null) return undefined;
  const [year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0] = m.slice(1, 7).map(Number);
  const offsetHours = Number(m[9] ?? 0);
  const offsetMinutes = Number(m[10] ?? 0);
  const monthDays = month === 2 && isLeapYear(year) ? 29 : DAYS_IN_MONTH[month - 1];
  if (year < 1 || monthDays === undefined || day < 1 || day > monthDays) return undefined;
  if (hour > 23 || minute > 59 || second > 59 || offsetHours > 23 || offsetMinutes > 59) return undefined;
  const local = new Date(0);
  // setUTCFullYear, not Date.UTC: Date.UTC maps years 0-99 to 1900-1999.
  local.setUTCFullYear(year, month - 1, day);
  local.setUTCHours(hour, minute, second, Number((m[7] ?? '0').slice(0, 3).padEnd(3, '0')));
  const sign = m[8] === '-' ? -1 : 1;
  const ms = local.getTime() - sign * (offsetHours * 60 + offsetMinutes) * 60_000;
  return ms >= FIRST_MS && ms <= LAST_MS ? ms : undefined;
}

/**
 * A client's date-time as stored: UTC with milliseconds, so text order is time order in both
 * databases (`+02:00` offsets or missing fractions would not compare). The schema's `date-time`
 * format lets only real instants through; one that is not is refused naming `field`.
 */
export function normaliseInstant(text: string | null, field: string): string | null {
  if (text === null) return null;
  const ms = instantMs(text);
  if (ms === undefined) {
    throw new AppError('validation_failed', `${field} is not a real instant: ${JSON.stringify(text)}`, {
      [field]: 'not a real instant',
    });
  }
  return isoAt(ms);
}
