import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Clock } from '../domain/clock.ts';
import {
  type RateDecision,
  REQUEST_RATE,
  type RatePolicy,
  SIGN_IN_ADDRESS_RATE,
  SIGN_IN_NAME_RATE,
  SIGN_IN_NETWORK_RATE,
  SIGN_IN_USER_RATE,
  UNAUTHENTICATED_RATE,
} from '../domain/rate-limit.ts';
import {
  connectRateLimitRedis,
  InProcessRateLimiter,
  type RateLimiter,
  RedisRateLimiter,
} from '../http/rate-limiter.ts';
import type { SignInLimiters } from '../http/sign-in-gate.ts';
import type { PanelConfig } from './config.ts';

export interface RateLimiters {
  requests: RateLimiter;
  unauthenticated: RateLimiter;
  signIn: Omit<SignInLimiters, 'refusals'>;
  close(): Promise<void>;
}

/**
 * Redis's shared limit while Redis answers, and this process's own (the same policy) while it does not: a
 * Redis that went away costs the panels their one budget across them, never an answer (docs/operating.md
 * "Several panels"). Redis back, its shared count applies again.
 */
class FallbackRateLimiter implements RateLimiter {
  readonly #redis: Redis;
  readonly #shared: RedisRateLimiter;
  readonly #local: InProcessRateLimiter;
  readonly #fellBack: (error: unknown) => void;

  constructor(redis: Redis, policy: RatePolicy, clock: Clock, fellBack: (error: unknown) => void) {
    this.#redis = redis;
    this.#shared = new RedisRateLimiter(redis, policy);
    this.#local = new InProcessRateLimiter(policy, clock);
    this.#fellBack = fellBack;
  }

  async take(callerId: string): Promise<RateDecision> {
    // Not connected: a command would wait in ioredis's queue for a reconnection; count here at once instead.
    if (this.#redis.status !== 'ready') return this.#local.take(callerId);
    try {
      return await this.#shared.take(callerId);
    } catch (error) {
      this.#fellBack(error);
      return this.#local.take(callerId);
    }
  }

  async reset(callerId: string): Promise<void> {
    this.#local.reset(callerId);
    if (this.#redis.status !== 'ready') return;
    await this.#shared.reset(callerId).catch((error: unknown) => this.#fellBack(error));
  }
}

/** In process, or in the Redis that several panels share (one connection for every policy). */
export async function makeRateLimiters(config: PanelConfig, clock: Clock, log: Logger): Promise<RateLimiters> {
  const redisUrl = config.redisUrl;
  const redis = redisUrl === undefined ? undefined : await connectRateLimitRedis(redisUrl);
  if (redis !== undefined) reportRedis(redis, log);
  const fellBack = (error: unknown) => log.warn({ err: error }, 'redis failed: a request counted by this panel alone');
  const limiter = (policy: RatePolicy): RateLimiter =>
    redis === undefined
      ? new InProcessRateLimiter(policy, clock)
      : new FallbackRateLimiter(redis, policy, clock, fellBack);
  return {
    requests: limiter(REQUEST_RATE),
    unauthenticated: limiter(UNAUTHENTICATED_RATE),
    signIn: {
      perAddress: limiter(SIGN_IN_ADDRESS_RATE),
      perNetwork: limiter(SIGN_IN_NETWORK_RATE),
      perUserFrom: limiter(SIGN_IN_USER_RATE),
      perUser: limiter(SIGN_IN_NAME_RATE),
    },
    close: async () => {
      await redis?.quit();
    },
  };
}

/** One log line when the shared limits are lost and one when they are back, however often ioredis retries. */
function reportRedis(redis: Redis, log: Logger): void {
  let shared = true;
  redis.on('error', (error: unknown) => {
    if (!shared) return;
    shared = false;
    log.warn({ err: error }, 'redis lost: rate limits are counted by each panel alone until it is back');
  });
  redis.on('ready', () => {
    if (shared) return;
    shared = true;
    log.warn('redis back: rate limits are shared again');
  });
}
