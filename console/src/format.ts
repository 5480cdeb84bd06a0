/** Bytes, times and speeds as a person reads them. */

const BYTE_UNITS = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
const NUMBER = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });

/** Decimal units, as VPN plans are sold (1 GB = 10^9 bytes). */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1000 && unit < BYTE_UNITS.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${NUMBER.format(value)} ${BYTE_UNITS[unit]}`;
}

export function formatSpeed(kbits: number): string {
  return kbits === 0 ? 'no limit' : kbits >= 1000 ? `${NUMBER.format(kbits / 1000)} Mbit/s` : `${kbits} kbit/s`;
}

export function formatCount(value: number): string {
  return NUMBER.format(value);
}

const formats = new Map<string, Intl.DateTimeFormat>();

function dateTimeFormat(timeZone: string | undefined): Intl.DateTimeFormat {
  const key = timeZone ?? '';
  let format = formats.get(key);
  if (format === undefined) {
    format = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short', timeZone });
    formats.set(key, format);
  }
  return format;
}

/** An instant in the browser's zone. */
export function formatTime(iso: string): string {
  return dateTimeFormat(undefined).format(new Date(iso));
}

/** The same instant in another zone, named: for the title shown on hover. */
export function formatTimeIn(iso: string, timeZone: string): string {
  try {
    return `${dateTimeFormat(timeZone).format(new Date(iso))} (${timeZone})`;
  } catch {
    return new Date(iso).toISOString();
  }
}

const RELATIVE = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
const STEPS: Array<[Intl.RelativeTimeFormatUnit, number]> = [
  ['second', 60],
  ['minute', 60],
  ['hour', 24],
  ['day', 30],
  ['month', 12],
  ['year', Number.POSITIVE_INFINITY],
];

/** "3 minutes ago", "in 2 days". */
export function formatRelative(iso: string, nowMs: number = Date.now()): string {
  let value = (new Date(iso).getTime() - nowMs) / 1000;
  for (const [unit, size] of STEPS) {
    if (Math.abs(value) < size) return RELATIVE.format(Math.round(value), unit);
    value /= size;
  }
  return formatTime(iso);
}

/** An instant as the value of `<input type="datetime-local">`, in the browser's zone. */
export function toLocalInput(iso: string | null): string {
  if (iso === null) return '';
  const date = new Date(iso);
  const pad = (n: number) => String(n).padStart(2, '0');
  return (
    `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}` +
    `T${pad(date.getHours())}:${pad(date.getMinutes())}`
  );
}

/** `<input type="datetime-local">`'s value (the browser's zone) as an instant; empty gives null. */
export function fromLocalInput(value: string): string | null {
  return value === '' ? null : new Date(value).toISOString();
}

/** Gigabytes typed by a person as bytes; empty gives 0 (no limit). */
export function gigabytesToBytes(text: string): number {
  return text.trim() === '' ? 0 : Math.round(Number(text) * 1e9);
}

export function bytesToGigabytes(bytes: number): string {
  return bytes === 0 ? '' : String(bytes / 1e9);
}

/** Speeds are typed in Mbit/s; the API keeps kbit/s. 0 or none gives empty (no limit). */
export function kbitsToMegabits(kbits: number | null): string {
  return kbits === null || kbits === 0 ? '' : String(kbits / 1000);
}

/** Mbit/s typed by a person as kbit/s; empty gives 0 (no limit). */
export function megabitsToKbits(text: string): number {
  return text.trim() === '' ? 0 : Math.round(Number(text) * 1000);
}
