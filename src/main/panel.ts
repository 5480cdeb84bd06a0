import { sql } from 'kysely';
import { pino } from 'pino';
import pkg from '../../package.json' with { type: 'json' };
import { Agent } from '../agent/agent.ts';
import { LocalNodeConnection } from '../agent/connection.ts';
import { type Clock, systemClock } from '../domain/clock.ts';
import { REQUEST_RATE } from '../domain/rate-limit.ts';
import { type Api, buildApp } from '../http/app.ts';
import { IdempotencyGuard } from '../http/idempotency.ts';
import { InProcessRateLimiter, type RateLimiter, RedisRateLimiter } from '../http/rate-limiter.ts';
import { ApiKeyService } from '../services/api-keys.ts';
import { DeviceService } from '../services/devices.ts';
import { GroupService } from '../services/groups.ts';
import { ShareLinkService } from '../services/share-links.ts';
import { WebhookService } from '../services/webhooks.ts';
import { RETRY_SCHEDULE_MS } from '../domain/webhooks.ts';
import { WebhookSender } from '../workers/webhook-sender.ts';
import { MmdbCountryLookup } from '../services/geo.ts';
import { NodeConnections, NodeService } from '../services/nodes.ts';
import { ServerService } from '../services/servers.ts';
import { openStore, type Store } from '../store/db.ts';
import { withEncryption } from '../store/encryption.ts';
import { migrate } from '../store/migrate.ts';
import { holdPanelLock } from '../store/panel-lock.ts';
import { unlockSecrets } from '../store/panel-secret.ts';
import { Housekeeping } from '../workers/housekeeping.ts';
import { NODE_MONITOR_DEFAULTS, NodeMonitor } from '../workers/node-monitor.ts';
import type { PanelConfig, StoreConfig } from './config.ts';
import { makeDriver } from './node-driver.ts';

export const VERSION: string = pkg.version;

/** DESIGN §3: an attempt may take 15 s; a dead receiver holds one slot that long, never the API. */
const WEBHOOK_TIMEOUT_MS = 15_000;
const WEBHOOK_CONCURRENCY = 64;
/** Deliveries recorded by this panel start at once (nudge); others' within this. */
const WEBHOOK_POLL_MS = 500;

/**
 * Opens the database, brings its schema up to date and unlocks its encrypted columns with the panel
 * secret (the panel and the CLI both start here).
 */
export async function openMigratedStore(config: StoreConfig): Promise<Store> {
  const store = openStore(config);
  try {
    await migrate(store);
    return withEncryption(store, await unlockSecrets(store, config));
  } catch (error) {
    await store.close();
    throw error;
  }
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
  /** Resyncs the nodes, listens, and starts the background workers. */
  start(): Promise<void>;
  /** Stops taking requests, lets the running ones finish, stops the workers, closes the database. */
  stop(): Promise<void>;
}

/** Wires every object of a panel by hand; nothing listens or runs in the background until start(). */
export async function assemblePanel(config: PanelConfig, clock: Clock = systemClock): Promise<Panel> {
  const log = pino({ level: config.logLevel });
  const lock = await holdPanelLock(config);
  const store = await openMigratedStore(config).catch(async (error: unknown) => {
    await lock.release();
    throw error;
  });
  const rateLimiter = await makeRateLimiter(config, clock);
  const localAgent = config.localNode ? new Agent(await makeDriver(config, log), VERSION) : undefined;
  const connections = new NodeConnections(localAgent && new LocalNodeConnection(localAgent));
  const nodes = new NodeService(store.db, clock);
  if (config.localNode) await nodes.ensureLocal(config.publicHost);
  const servers = new ServerService(store.db, clock, connections, await MmdbCountryLookup.open());
  await servers.discardUnfinishedDeploys();
  const devices = new DeviceService(store, clock, connections);
  const sender = new WebhookSender(store.db, clock, log, {
    scheduleMs: config.webhookRetryScheduleMs ?? RETRY_SCHEDULE_MS,
    timeoutMs: WEBHOOK_TIMEOUT_MS,
    concurrency: WEBHOOK_CONCURRENCY,
    pollIntervalMs: WEBHOOK_POLL_MS,
    allowPrivate: config.webhookAllowPrivate,
  });

  const app = await buildApp({
    db: store.db,
    apiKeys: new ApiKeyService(store, clock),
    rateLimiter,
    idempotency: new IdempotencyGuard(store.db, clock),
    servers,
    nodes,
    devices,
    groups: new GroupService(store, clock, connections, devices),
    shareLinks: new ShareLinkService(store, clock, devices, config.panelUrl),
    webhooks: new WebhookService(store.db, clock, config.webhookAllowPrivate, () => sender.nudge()),
    checkHealth: async () => {
      await sql`select 1`.execute(store.db);
    },
    version: VERSION,
    logger: log,
  });
  const housekeeping = new Housekeeping(store.db, clock, log);
  const monitor = new NodeMonitor(store.db, clock, connections, log, NODE_MONITOR_DEFAULTS);
  return {
    app,
    store,
    async start() {
      // The first round resyncs every node, so servers come back after a restart before the API answers.
      await monitor.checkAll();
      await app.listen({ port: config.port, host: config.host });
      housekeeping.start();
      monitor.start();
      sender.start();
    },
    async stop() {
      housekeeping.stop();
      await monitor.stop();
      await sender.stop();
      await app.close();
      await rateLimiter.close();
      await store.close();
      await lock.release();
    },
  };
}
