import type { Clock } from '../domain/clock.ts';
import {
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

/** In process, or in the Redis that several panels share (one connection for every policy). */
export async function makeRateLimiters(config: PanelConfig, clock: Clock): Promise<RateLimiters> {
  const redisUrl = config.redisUrl;
  const redis = redisUrl === undefined ? undefined : await connectRateLimitRedis(redisUrl);
  const limiter = (policy: RatePolicy): RateLimiter =>
    redis === undefined ? new InProcessRateLimiter(policy, clock) : new RedisRateLimiter(redis, policy);
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
