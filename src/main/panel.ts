import { sql } from 'kysely';
import pkg from '../../package.json' with { type: 'json' };
import { type Clock, systemClock } from '../domain/clock.ts';
import { REQUEST_RATE } from '../domain/rate-limit.ts';
import { type Api, buildApp } from '../http/app.ts';
import { IdempotencyGuard } from '../http/idempotency.ts';
import { InProcessRateLimiter, type RateLimiter, RedisRateLimiter } from '../http/rate-limiter.ts';
import { ApiKeyService } from '../services/api-keys.ts';
import { openStore, type Store } from '../store/db.ts';
import { migrate } from '../store/migrate.ts';
import { Housekeeping } from '../workers/housekeeping.ts';
import type { PanelConfig, StoreConfig } from './config.ts';

export const VERSION: string = pkg.version;

/** Opens the database and brings its schema up to date (the panel and the CLI both start here). */
export async function openMigratedStore(config: StoreConfig): Promise<Store> {
  const store = openStore(config);
  try {
    await migrate(store);
  } catch (error) {
    await store.close();
    throw error;
  }
  return store;
}

async function makeRateLimiter(config: PanelConfig, clock: Clock): Promise<RateLimiter> {
  if (config.redisUrl === undefined) return new InProcessRateLimiter(REQUEST_RATE, clock);
  const limiter = new RedisRateLimiter(config.redisUrl, REQUEST_RATE);
  await limiter.connect();
  return limiter;
}

export interface Panel {
  readonly app: Api;
  readonly store: Store;
  /** Stops taking requests, lets the running ones finish, then closes the database. */
  stop(): Promise<void>;
}

/** Wires every object of a panel by hand and starts listening. */
export async function startPanel(config: PanelConfig, clock: Clock = systemClock): Promise<Panel> {
  const store = await openMigratedStore(config);
  const rateLimiter = await makeRateLimiter(config, clock);
  const app = await buildApp({
    apiKeys: new ApiKeyService(store.db, clock),
    rateLimiter,
    idempotency: new IdempotencyGuard(store.db, clock),
    checkHealth: async () => {
      await sql`select 1`.execute(store.db);
    },
    version: VERSION,
    logger: { level: config.logLevel },
  });
  const housekeeping = new Housekeeping(store.db, clock, app.log);
  await app.listen({ port: config.port, host: config.host });
  housekeeping.start();
  return {
    app,
    store,
    async stop() {
      housekeeping.stop();
      await app.close();
      await rateLimiter.close();
      await store.close();
    },
  };
}
