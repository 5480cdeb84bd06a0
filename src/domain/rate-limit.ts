/**
 * The request rate of spec §8 (10 a second per key, bursts up to 60) as a GCRA: each key has a
 * theoretical arrival time (TAT); a request is let through while it stays within the burst window.
 * Unlike a fixed window, no two adjacent windows can together pass twice the limit.
 * The Redis script in src/http/rate-limiter.ts is this same function in Lua; change both together.
 */
export interface RatePolicy {
  /** Requests that may arrive at once after a quiet period. */
  burst: number;
  /** Sustained requests a second. */
  perSecond: number;
}

export const REQUEST_RATE: RatePolicy = { burst: 60, perSecond: 10 };

/**
 * Requests from one client address that carry no key this panel knows to be valid (none, malformed,
 * unknown, revoked, or a valid key's first use since keys last changed): 30 at once, then one a
 * second. Beyond that they are refused before any lookup, so a flood of bad keys costs nothing.
 */
export const UNAUTHENTICATED_RATE: RatePolicy = { burst: 30, perSecond: 1 };

export interface RateDecision {
  allowed: boolean;
  /** Requests still allowed right now. */
  remaining: number;
  /** Whole seconds until the full burst is available again. */
  resetSeconds: number;
  /** Whole seconds, rounded up, until a refused request would pass; 0 when allowed. */
  retryAfterSeconds: number;
}

export function gcra(
  tatMs: number | undefined,
  nowMs: number,
  policy: RatePolicy,
): { decision: RateDecision; tatMs: number } {
  const intervalMs = 1000 / policy.perSecond;
  const windowMs = policy.burst * intervalMs;
  const tat = Math.max(tatMs ?? nowMs, nowMs);
  const next = tat + intervalMs;
  if (next - nowMs > windowMs) {
    return {
      tatMs: tat,
      decision: {
        allowed: false,
        remaining: 0,
        resetSeconds: Math.ceil((tat - nowMs) / 1000),
        retryAfterSeconds: Math.max(1, Math.ceil((next - nowMs - windowMs) / 1000)),
      },
    };
  }
  return {
    tatMs: next,
    decision: {
      allowed: true,
      remaining: Math.floor((windowMs - (next - nowMs)) / intervalMs),
      resetSeconds: Math.ceil((next - nowMs) / 1000),
      retryAfterSeconds: 0,
    },
  };
}

/** The IETF `RateLimit-Policy` field for a policy: quota `q` per window `w` seconds. */
export function rateLimitPolicyField(policy: RatePolicy): string {
  return `"default";q=${policy.burst};w=${policy.burst / policy.perSecond}`;
}

export function rateLimitField(decision: RateDecision): string {
  return `"default";r=${decision.remaining};t=${decision.resetSeconds}`;
}

const IPV4_MAPPED = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i;

/**
 * The part of a client address that per-address limits count: an IPv4 address (also when written as
 * IPv6-mapped), or the /64 of an IPv6 address, since one IPv6 host usually holds a whole /64.
 */
export function addressBucket(address: string): string {
  const mapped = IPV4_MAPPED.exec(address);
  if (mapped?.[1] !== undefined) return mapped[1];
  if (!address.includes(':')) return address;
  const [head = '', tail] = address.split('::');
  const groups = head === '' ? [] : head.split(':');
  if (tail !== undefined) {
    const tailGroups = tail === '' ? [] : tail.split(':');
    groups.push(...Array<string>(Math.max(0, 8 - groups.length - tailGroups.length)).fill('0'), ...tailGroups);
  }
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}
