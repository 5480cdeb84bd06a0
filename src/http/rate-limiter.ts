import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Clock } from '../domain/clock.ts';
import { type RateDecision, type RatePolicy, gcra } from '../domain/rate-limit.ts';

/** Counts one request against a caller's limit under one policy. */
export interface RateLimiter {
  /** In process the decision comes at once; through Redis, as a promise. */
  take(callerId: string): RateDecision | Promise<RateDecision>;
  /** Gives the caller its full burst again (a console sign-in that succeeded forgives the name's failed ones). */
  reset(callerId: string): void | Promise<void>;
}

/** For one panel process: the GCRA state of each caller in memory. */
export class InProcessRateLimiter implements RateLimiter {
  readonly #tatMs = new Map<string, number>();
  readonly #policy: RatePolicy;
  readonly #clock: Clock;
  /**
   * Idle callers are forgotten when the map grows past this, which then doubles: callers may be client
   * addresses, which an attacker has many of, and a scan on every request would cost the whole map.
   */
  #forgetAtSize = 10_000;

  constructor(policy: RatePolicy, clock: Clock) {
    this.#policy = policy;
    this.#clock = clock;
  }

  take(callerId: string): RateDecision {
    const nowMs = this.#clock.nowMs();
    const { decision, tatMs } = gcra(this.#tatMs.get(callerId), nowMs, this.#policy);
    this.#tatMs.set(callerId, tatMs);
    if (this.#tatMs.size > this.#forgetAtSize) {
      this.#forgetIdle(nowMs);
      this.#forgetAtSize = Math.max(10_000, 2 * this.#tatMs.size);
    }
    return decision;
  }

  reset(callerId: string): void {
    this.#tatMs.delete(callerId);
  }

  /** A key whose TAT has passed is at full burst, the same as a key never seen. */
  #forgetIdle(nowMs: number): void {
    for (const [id, tat] of this.#tatMs) if (tat <= nowMs) this.#tatMs.delete(id);
  }
}

/**
 * src/domain/rate-limit.ts `gcra` in Lua, run atomically by Redis on Redis's clock, so every panel
 * instance sharing the Redis shares one limit per key. Returns {allowed, remaining, reset, retryAfter}.
 */
const GCRA_LUA = `
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = burst * interval
local tat = tonumber(redis.call('GET', KEYS[1]))
if not tat or tat < now then tat = now end
local nxt = tat + interval
if nxt - now > window then
  return {0, 0, math.ceil((tat - now) / 1000), math.max(1, math.ceil((nxt - now - window) / 1000))}
end
redis.call('SET', KEYS[1], nxt, 'PX', math.ceil(nxt - now) + 1000)
return {1, math.floor((window - (nxt - now)) / interval), math.ceil((nxt - now) / 1000), 0}
`;
const GCRA_SHA = createHash('sha1').update(GCRA_LUA).digest('hex');

function asDecision(reply: unknown): RateDecision {
  const numbers = Array.isArray(reply) ? reply.filter((n): n is number => typeof n === 'number') : [];
  const [allowed, remaining, resetSeconds, retryAfterSeconds] = numbers;
  if (
    numbers.length !== 4 ||
    remaining === undefined ||
    resetSeconds === undefined ||
    retryAfterSeconds === undefined
  ) {
    throw new Error(`unexpected rate limit reply from Redis: ${JSON.stringify(reply)}`);
  }
  return { allowed: allowed === 1, remaining, resetSeconds, retryAfterSeconds };
}

/** Where a caller's TAT is kept. */
function redisKey(callerId: string): string {
  return `vpn-panel:rate:${callerId}`;
}

/** The one connection to the Redis that panels share their limits in; the caller quits it. */
export async function connectRateLimitRedis(url: string): Promise<Redis> {
  // Loaded only here: a panel without REDIS_URL keeps ioredis out of memory.
  const { Redis } = await import('ioredis');
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 2, enableOfflineQueue: true });
  await redis.connect();
  return redis;
}

/** One policy's limits in Redis; several of these may share one connection (the script takes the policy). */
export class RedisRateLimiter implements RateLimiter {
  readonly #redis: Redis;
  readonly #policy: RatePolicy;

  constructor(redis: Redis, policy: RatePolicy) {
    this.#redis = redis;
    this.#policy = policy;
  }

  async take(callerId: string): Promise<RateDecision> {
    const args = [redisKey(callerId), 1000 / this.#policy.perSecond, this.#policy.burst] as const;
    try {
      return asDecision(await this.#redis.evalsha(GCRA_SHA, 1, ...args));
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      return asDecision(await this.#redis.eval(GCRA_LUA, 1, ...args));
    }
  }

  async reset(callerId: string): Promise<void> {
    await this.#redis.del(redisKey(callerId));
  }
}
