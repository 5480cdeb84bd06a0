import { createHmac, createSecretKey, type KeyObject, randomBytes } from 'node:crypto';
import { isoAt } from './clock.ts';

/**
 * Waits before the 2nd…8th attempt (docs/decisions.md "Webhooks: delivery, signing and retries"); after the
 * 8th failure a delivery is failed.
 */
export const RETRY_SCHEDULE_MS: readonly number[] = [
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  5 * 3_600_000,
  10 * 3_600_000,
  10 * 3_600_000,
];

/** Each wait is spread ±10 % so deliveries that failed together (a receiver outage) do not return together. */
const JITTER_FRACTION = 0.1;

/**
 * How long to wait before the next attempt, or undefined when no retries are left (the delivery is
 * failed). `attemptsSoFar` counts the attempts made, the failed one just made included (≥ 1).
 * `random` returns [0, 1) as Math.random does. A receiver's `Retry-After` raises the wait, never
 * shortens it, and is applied after the jitter so the wait is never below it; it is capped at the
 * schedule's longest step so a receiver cannot park a delivery for ever.
 */
export function nextAttemptDelayMs(
  attemptsSoFar: number,
  scheduleMs: readonly number[],
  retryAfterSeconds: number | undefined,
  random: () => number,
): number | undefined {
  const baseMs = scheduleMs[attemptsSoFar - 1];
  if (baseMs === undefined) return undefined;
  const jitteredMs = Math.round(baseMs * (1 + (random() * 2 - 1) * JITTER_FRACTION));
  if (retryAfterSeconds === undefined) return jitteredMs;
  const retryAfterMs = Math.min(retryAfterSeconds * 1000, Math.max(...scheduleMs));
  return Math.max(jitteredMs, Math.ceil(retryAfterMs));
}

/** What became of one attempt's request: the receiver's status, or no answer at all (`error` says why). */
export type AttemptReply = { status: number; retryAfterSeconds: number | undefined } | { error: string };

/** A delivery's state after an attempt. */
export interface AttemptVerdict {
  state: 'delivered' | 'pending' | 'failed';
  /** When to try again (ISO 8601); null unless pending. */
  nextAttemptAt: string | null;
  responseStatus: number | null;
  error: string | null;
  /** The receiver answered 410 Gone: its webhook is turned off. */
  disablesWebhook: boolean;
}

/**
 * What an attempt's reply makes of its delivery (docs/decisions.md "Webhooks: delivery, signing and retries"):
 * any 2xx delivers it; 410 Gone fails it and disables its webhook; anything else (another status, a redirect,
 * no answer) is retried after nextAttemptDelayMs, or failed once the schedule is used up. `attemptsSoFar`
 * counts the attempt just made.
 */
export function attemptVerdict(
  reply: AttemptReply,
  attemptsSoFar: number,
  scheduleMs: readonly number[],
  nowMs: number,
  random: () => number,
): AttemptVerdict {
  const retryOrFail = (responseStatus: number | null, error: string, retryAfterSeconds?: number): AttemptVerdict => {
    const delayMs = nextAttemptDelayMs(attemptsSoFar, scheduleMs, retryAfterSeconds, random);
    const nextAttemptAt = delayMs === undefined ? null : isoAt(nowMs + delayMs);
    const state = nextAttemptAt === null ? 'failed' : 'pending';
    return { state, nextAttemptAt, responseStatus, error, disablesWebhook: false };
  };
  if ('error' in reply) return retryOrFail(null, reply.error);
  const { status } = reply;
  if (status >= 200 && status < 300) {
    return { state: 'delivered', nextAttemptAt: null, responseStatus: status, error: null, disablesWebhook: false };
  }
  if (status === 410) {
    const error = '410 Gone: webhook disabled';
    return { state: 'failed', nextAttemptAt: null, responseStatus: status, error, disablesWebhook: true };
  }
  const error = status >= 300 && status < 400 ? `redirect ${status} is not followed` : `HTTP ${status}`;
  return retryOrFail(status, error, reply.retryAfterSeconds);
}

/**
 * Seconds a `Retry-After` header asks for (delta-seconds or an HTTP date), or undefined when it is
 * absent or unreadable.
 */
export function parseRetryAfterSeconds(header: string | undefined, nowMs: number): number | undefined {
  if (header === undefined) return undefined;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text);
  // An HTTP date names its month (Date.parse alone takes "-5" for a year).
  const dateMs = /[a-z]{3}/i.test(text) ? Date.parse(text) : Number.NaN;
  return Number.isNaN(dateMs) ? undefined : Math.max(0, (dateMs - nowMs) / 1000);
}

const SECRET_PREFIX = 'whsec_';
const SECRET_BYTES = 32;

/** A signing secret as the Standard Webhooks libraries take it: `whsec_` + base64 of 32 random bytes. */
export function generateWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(SECRET_BYTES).toString('base64');
}

/**
 * The `webhook-signature` header value of Standard Webhooks: `v1,` + base64 HMAC-SHA256 of
 * `<id>.<timestamp>.<body>`, keyed by the base64-decoded part of the secret after `whsec_`.
 */
export function signWebhook(secret: string, messageId: string, timestampSeconds: number, body: string): string {
  const mac = createHmac('sha256', signingKey(secret))
    .update(`${messageId}.${timestampSeconds}.${body}`)
    .digest('base64');
  return `v1,${mac}`;
}

/**
 * Node checks a raw key on every HMAC; a key object made once per secret skips that, which
 * measured 2 µs a signature instead of 11 µs (a fifth of the sender's time at 11,000/s).
 */
const signingKeys = new Map<string, KeyObject>();
const MAX_SIGNING_KEYS = 10_000;

function signingKey(secret: string): KeyObject {
  let key = signingKeys.get(secret);
  if (key === undefined) {
    key = createSecretKey(
      Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64'),
    );
    if (signingKeys.size >= MAX_SIGNING_KEYS) signingKeys.clear();
    signingKeys.set(secret, key);
  }
  return key;
}

// Addresses as integers: IPv4 in 32 bits, IPv6 in 128 bits.
interface Cidr {
  network: bigint;
  prefixBits: number;
}

/** IPv4 ranges that are not the public internet (IANA special-purpose registry). */
const FORBIDDEN_V4: readonly Cidr[] = [
  '0.0.0.0/8', // "this network", 0.0.0.0 included
  '10.0.0.0/8', // private; holds the panel's own VPN range 10.128.0.0/9
  '100.64.0.0/10', // CGNAT (and some clouds' metadata, e.g. 100.100.100.200)
  '127.0.0.0/8', // loopback
  '169.254.0.0/16', // link-local, cloud metadata 169.254.169.254
  '172.16.0.0/12', // private
  '192.0.0.0/24', // IETF protocol assignments
  '192.0.2.0/24', // documentation
  '192.88.99.0/24', // 6to4 relay anycast, deprecated
  '192.168.0.0/16', // private
  '198.18.0.0/15', // benchmarking
  '198.51.100.0/24', // documentation
  '203.0.113.0/24', // documentation
  '224.0.0.0/4', // multicast
  '240.0.0.0/4', // reserved, 255.255.255.255 broadcast included
].map((text) => cidr(text, parseV4));

/** Only global unicast IPv6 may be a target; these parts of it are not the public internet. */
const GLOBAL_UNICAST_V6 = cidr('2000::/3', parseV6);
const FORBIDDEN_V6: readonly Cidr[] = [
  '2001::/23', // IETF protocol assignments (Teredo, benchmarking, ORCHID…)
  '2001:db8::/32', // documentation
  '3fff::/20', // documentation
].map((text) => cidr(text, parseV6));

/** IPv6 forms that carry an IPv4 address in their last 32 bits: judged as that IPv4 address. */
const EMBEDDING_V4_LOW: readonly Cidr[] = [
  '::ffff:0:0/96', // IPv4-mapped
  '64:ff9b::/96', // NAT64
].map((text) => cidr(text, parseV6));
/** 6to4 carries its IPv4 address in bits 16–47. */
const SIX_TO_FOUR = cidr('2002::/16', parseV6);

/**
 * True when a webhook may not connect to `ip`: loopback, unspecified, private, link-local (cloud
 * metadata), CGNAT, multicast, broadcast, reserved and documentation ranges, IPv6 ULA (fc00::/7),
 * link-local (fe80::/10) and everything outside global unicast (2000::/3); IPv4-mapped, NAT64 and
 * 6to4 addresses are judged by the IPv4 address they carry. Text that is not an IP address is
 * forbidden too, so a parse gap never lets a target through.
 */
export function isForbiddenAddress(ip: string): boolean {
  const v4 = parseV4(ip);
  if (v4 !== undefined) return isForbiddenV4(v4);
  const v6 = parseV6(ip.replace(/%.*$/, '')); // a zone id (fe80::1%eth0) names an interface, not an address
  if (v6 === undefined) return true;
  if (EMBEDDING_V4_LOW.some((range) => contains(range, v6, 128))) return isForbiddenV4(v6 & 0xffff_ffffn);
  if (contains(SIX_TO_FOUR, v6, 128)) return isForbiddenV4((v6 >> 80n) & 0xffff_ffffn);
  return !contains(GLOBAL_UNICAST_V6, v6, 128) || FORBIDDEN_V6.some((range) => contains(range, v6, 128));
}

function isForbiddenV4(address: bigint): boolean {
  return FORBIDDEN_V4.some((range) => contains(range, address, 32));
}

function contains(range: Cidr, address: bigint, widthBits: number): boolean {
  const shift = BigInt(widthBits - range.prefixBits);
  return address >> shift === range.network >> shift;
}

function cidr(text: string, parse: (ip: string) => bigint | undefined): Cidr {
  const [ip = '', bits = ''] = text.split('/');
  const network = parse(ip);
  if (network === undefined) throw new Error(`bad range ${text}`);
  return { network, prefixBits: Number(bits) };
}

/** Dotted-quad IPv4 only: URL parsing and DNS answers already normalise shorter or hex forms. */
function parseV4(text: string): bigint | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  let value = 0n;
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part) || Number(part) > 255) return undefined;
    value = (value << 8n) | BigInt(part);
  }
  return value;
}

function parseV6(text: string): bigint | undefined {
  const halves = text.toLowerCase().split('::');
  if (halves.length > 2) return undefined;
  const head = groupsOf(halves[0] ?? '');
  const tail = halves.length === 2 ? groupsOf(halves[1] ?? '') : [];
  if (head === undefined || tail === undefined) return undefined;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined;
  const groups = [...head, ...Array<bigint>(halves.length === 2 ? missing : 0).fill(0n), ...tail];
  return groups.reduce((value, group) => (value << 16n) | group, 0n);
}

/** The 16-bit groups of one side of `::`; a trailing dotted IPv4 counts as two groups. */
function groupsOf(text: string): bigint[] | undefined {
  if (text === '') return [];
  const parts = text.split(':');
  const groups: bigint[] = [];
  for (const [i, part] of parts.entries()) {
    if (i === parts.length - 1 && part.includes('.')) {
      const v4 = parseV4(part);
      if (v4 === undefined) return undefined;
      groups.push(v4 >> 16n, v4 & 0xffffn);
    } else if (/^[0-9a-f]{1,4}$/.test(part)) {
      groups.push(BigInt(`0x${part}`));
    } else {
      return undefined;
    }
  }
  return groups;
}

/**
 * A webhook as the activity log names it: its id and the host it posts to. Never the whole URL: its path,
 * query or user info often hold the receiver's secret (`/hook?token=…`, a chat service's `/services/T/B/…`).
 */
export function webhookName(id: number, url: string): string {
  const parsed = URL.parse(url);
  return parsed === null ? `webhook ${id}` : `webhook ${id} to ${parsed.host}`;
}

/** A webhook URL as the activity log keeps it: scheme, host and port, then `/…` when more was left out. */
export function webhookUrlShown(url: string): string {
  const parsed = URL.parse(url);
  if (parsed === null) return '…';
  return `${parsed.origin}${parsed.href === `${parsed.origin}/` ? '' : '/…'}`;
}
