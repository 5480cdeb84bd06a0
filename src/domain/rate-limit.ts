/**
 * The request rate of docs/api.md "Rate limits" (10 a second per key, bursts up to 60) as a GCRA: each key
 * has a theoretical arrival time (TAT); a request is let through while it stays within the burst window.
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

/**
 * Console sign-in attempts for one user name from one client address (IPv6: its /64), or from one browser
 * that signed in as that user before (its known-device cookie), since the last success there: 10 at once,
 * then one a minute. A stranger guessing from elsewhere spends a budget of their own, never the user's.
 */
export const SIGN_IN_USER_RATE: RatePolicy = { burst: 10, perSecond: 1 / 60 };

/**
 * Console sign-in attempts for one user name from anywhere, by browsers not known for that name: 100 at
 * once, then one a minute, so guessers with many addresses get about 1,540 tries a day at a 12-character
 * password between them. A browser that signed in as the user before skips it, so guessers who spend it
 * hold back only the user's sign-ins from new browsers, never from their usual ones.
 */
export const SIGN_IN_NAME_RATE: RatePolicy = { burst: 100, perSecond: 1 / 60 };

/**
 * Console sign-in attempts from one client address (IPv6: its /64), whatever the name: 30 at once (an
 * office behind one NAT), then ten a minute. Each attempt costs a password hash (0.2-0.4 s of a thread).
 */
export const SIGN_IN_ADDRESS_RATE: RatePolicy = { burst: 30, perSecond: 1 / 6 };

/**
 * Console sign-in attempts from one IPv6 /48 (a site: one customer of a provider holds 65,536 /64s),
 * whatever the name, besides its /64's: 60 at once, then 20 a minute, so one site cannot keep the
 * password hashes busy by spreading its attempts over its /64s.
 */
export const SIGN_IN_NETWORK_RATE: RatePolicy = { burst: 60, perSecond: 1 / 3 };

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

/** An IPv6 address's first `groups` 16-bit groups and their prefix length: `2001:db8:0:0::/64`. */
function ipv6Prefix(address: string, groups: number): string {
  const [head = '', tail] = address.split('::');
  const all = head === '' ? [] : head.split(':');
  if (tail !== undefined) {
    const tailGroups = tail === '' ? [] : tail.split(':');
    all.push(...Array<string>(Math.max(0, 8 - all.length - tailGroups.length)).fill('0'), ...tailGroups);
  }
  return `${all
    .slice(0, groups)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(':')}::/${groups * 16}`;
}

/**
 * The part of a client address that per-address limits count: an IPv4 address (also when written as
 * IPv6-mapped), or the /64 of an IPv6 address, since one IPv6 host usually holds a whole /64.
 */
export function addressBucket(address: string): string {
  const mapped = IPV4_MAPPED.exec(address);
  if (mapped?.[1] !== undefined) return mapped[1];
  if (!address.includes(':')) return address;
  return ipv6Prefix(address, 4);
}

/**
 * The /48 of an IPv6 address, counted beside its /64 where one holder of many /64s must not get a budget
 * for each; undefined for IPv4 (also IPv6-mapped), whose addresses are scarce enough to count one by one.
 */
export function networkBucket(address: string): string | undefined {
  if (!address.includes(':') || IPV4_MAPPED.test(address)) return undefined;
  return ipv6Prefix(address, 3);
}
