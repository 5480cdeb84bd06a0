import { sql } from 'kysely';
import type { DestinationStream, Logger } from 'pino';
import { LocalNodeConnection } from '../agent/connection.ts';
import { type Clock, systemClock } from '../domain/clock.ts';
import type { Api } from '../http/api.ts';
import { buildApp } from '../http/app.ts';
import { SignInRefusals } from '../http/sign-in-refusals.ts';
import { ApiKeyService } from '../services/api-keys.ts';
import { ChangePublisher } from '../services/changes.ts';
import { ActivityLog } from '../services/activity.ts';
import { ConsoleSessionService } from '../services/console-sessions.ts';
import { ConsoleUserService } from '../services/console-users.ts';
import { DeviceService } from '../services/devices.ts';
import { EventService } from '../services/events.ts';
import { GroupService } from '../services/groups.ts';
import { IdempotencyService } from '../services/idempotency.ts';
import { ShareLinkService } from '../services/share-links.ts';
import { WebhookService } from '../services/webhooks.ts';
import { PlanService } from '../services/plans.ts';
import { RETRY_SCHEDULE_MS } from '../domain/webhooks.ts';
import { WebhookSender } from '../workers/webhook-sender.ts';
import { MAIL_RETRY_SCHEDULE_MS } from '../domain/notifications.ts';
import { MailSender } from '../workers/mail-sender.ts';
import { MmdbCountryLookup } from '../services/geo.ts';
import { NodeConnections, NodeService } from '../services/nodes.ts';
import { PasswordHasher } from '../services/passwords.ts';
import { ServerService } from '../services/servers.ts';
import type { Store } from '../store/open.ts';
import { holdPanelLock } from '../store/panel-lock.ts';
import { Housekeeping } from '../workers/housekeeping.ts';
import { NODE_MONITOR_DEFAULTS, NodeMonitor } from '../workers/node-monitor.ts';
import { DriftRepair } from '../workers/drift-repair.ts';
import { NODE_WORK_SLOTS, Slots } from '../workers/slots.ts';
import type { PanelConfig } from './config.ts';
import { createLogger } from './logging.ts';
import { openMigratedStore } from './store.ts';
import { makeAgent } from './node-driver.ts';
import { Calendar } from '../domain/usage.ts';
import { UsageService } from '../services/usage.ts';
import { VERSION } from './version.ts';
import { ExpiryWatch } from '../workers/expiry-watch.ts';
import { ExpiryReminders } from '../workers/expiry-reminders.ts';
import { UsageThresholds } from '../workers/usage-thresholds.ts';
import { DatabaseLease, DUTY_LEASE } from '../workers/lease.ts';
import { type PanelMetrics, panelMetrics } from './panel-metrics.ts';
import { makeRateLimiters, type RateLimiters } from './rate-limiters.ts';

/**
 * docs/decisions.md "Webhooks: delivery, signing and retries": an attempt may take 15 s; a dead receiver holds
 * one slot that long, never the API.
 */
const WEBHOOK_TIMEOUT_MS = 15_000;
const WEBHOOK_CONCURRENCY = 64;
/** Deliveries recorded by this panel start at once (nudge); others' within this. */
const WEBHOOK_POLL_MS = 500;
/** Notification mail is looked for this often; nothing waits on it. */
const MAIL_POLL_MS = 1_000;
/** Connecting to the SMTP server and its greeting, each. */
const MAIL_TIMEOUT_MS = 10_000;

export interface Panel {
  readonly app: Api;
  readonly store: Store;
  /** Undefined with METRICS_PORT=0. */
  readonly metrics: PanelMetrics | undefined;
  /** Resyncs the nodes, listens, and starts the background workers. */
  start(): Promise<void>;
  /** Stops taking requests, lets the running ones finish, stops the workers, closes the database. */
  stop(): Promise<void>;
}

export interface PanelOptions {
  clock?: Clock;
  /** Where the log lines go; stdout when not given. */
  logDestination?: DestinationStream;
}

/** What the services and workers of a panel are made of. */
interface Wiring {
  config: PanelConfig;
  clock: Clock;
  log: Logger;
  store: Store;
  /** The once-only duties' lease among panels sharing a PostgreSQL; none on SQLite (the one panel runs them). */
  duties: DatabaseLease | undefined;
  metrics: PanelMetrics | undefined;
  connections: NodeConnections;
  changes: ChangePublisher;
}

/** A loop beside the API: started after it listens, stopped before it closes. */
interface Worker {
  start(): void;
  stop(): Promise<void>;
}

function webhookSender(w: Omit<Wiring, 'changes'>, changes: ChangePublisher): WebhookSender {
  return new WebhookSender(w.store.db, w.clock, changes, w.log, {
    scheduleMs: w.config.webhookRetryScheduleMs ?? RETRY_SCHEDULE_MS,
    timeoutMs: WEBHOOK_TIMEOUT_MS,
    concurrency: WEBHOOK_CONCURRENCY,
    pollIntervalMs: WEBHOOK_POLL_MS,
    allowPrivate: w.config.webhookAllowPrivate,
    observer: w.metrics?.observer,
  });
}

/** The services the API and the workers share. */
interface CoreServices {
  nodes: NodeService;
  usage: UsageService;
  servers: ServerService;
  devices: DeviceService;
}

async function coreServices(w: Wiring): Promise<CoreServices> {
  const { store, clock, config, changes } = w;
  const nodes = new NodeService(store.db, clock, changes);
  if (config.localNode) await nodes.ensureLocal(config.publicHost);
  const usage = new UsageService(store.db, clock, new Calendar(config.timezone), w.metrics?.observer);
  const geo = await MmdbCountryLookup.open();
  const servers = new ServerService(store.db, clock, w.connections, geo, usage, changes);
  await servers.discardUnfinishedDeploys();
  const devices = new DeviceService(store, clock, usage, changes);
  return { nodes, usage, servers, devices };
}

/** The HTTP application with its services. */
function panelApp(w: Wiring, core: CoreServices, limiters: RateLimiters): Promise<Api> {
  const { store, clock, config, changes } = w;
  const signInRefusals = new SignInRefusals(w.log, clock, w.metrics?.observer);
  // One hasher for sign-ins and password changes, so its limit of hashes at once holds for both.
  const passwords = new PasswordHasher({
    onQueueFull: (retryAfter) => signInRefusals.refused('hash_queue', {}, retryAfter),
  });
  return buildApp({
    ...core,
    events: new EventService(store.db),
    apiKeys: new ApiKeyService(store, clock, changes),
    rateLimiter: limiters.requests,
    unauthenticatedLimiter: limiters.unauthenticated,
    consoleSessions: new ConsoleSessionService(store.db, clock, passwords, changes),
    consoleUsers: new ConsoleUserService(store.db, clock, passwords, changes),
    activity: new ActivityLog(store.db),
    signInLimiters: { ...limiters.signIn, refusals: signInRefusals },
    panelOrigin: config.panelOrigin,
    consoleHostNames: config.consoleHostNames,
    secureCookies: config.panelUrl.startsWith('https:'),
    idempotency: new IdempotencyService(store.db, clock),
    groups: new GroupService(core.devices),
    shareLinks: new ShareLinkService(store, clock, core.devices, config.panelUrl, changes),
    webhooks: new WebhookService(store.db, clock, config.webhookAllowPrivate, changes),
    plans: new PlanService(store.db, clock, changes),
    checkHealth: async () => {
      await sql`select 1`.execute(store.db);
    },
    version: VERSION,
    logger: w.log,
    trustProxy: config.trustProxy,
    maxConnections: config.maxConnections,
    observer: w.metrics?.observer,
    requestBegins: () => store.requestBegins(),
  });
}

/** The loops beside the API, besides the webhook sender; the node monitor apart, for its first round at start. */
function backgroundWorkers(w: Wiring, usage: UsageService): { monitor: NodeMonitor; others: Worker[] } {
  const { store, clock, config, changes, log, duties } = w;
  const mailer = new MailSender(store.db, clock, log, {
    settings:
      config.smtpUrl !== undefined && config.notifyEmail !== undefined
        ? { smtpUrl: config.smtpUrl, to: config.notifyEmail }
        : undefined,
    scheduleMs: config.mailRetryScheduleMs ?? MAIL_RETRY_SCHEDULE_MS,
    pollIntervalMs: MAIL_POLL_MS,
    timeoutMs: MAIL_TIMEOUT_MS,
    lease: duties,
  });
  const thresholds = new UsageThresholds(store.db, usage, changes, {
    percents: config.usageThresholds,
    log,
    lease: duties,
  });
  // Resyncs and drift checks share a few slots: together they hold the desired state of a few nodes at a time.
  const nodeWork = new Slots(NODE_WORK_SLOTS);
  const monitorOptions = { ...NODE_MONITOR_DEFAULTS, lease: duties, slots: nodeWork };
  const monitor = new NodeMonitor(
    store.db,
    clock,
    w.connections,
    changes,
    usage,
    log,
    monitorOptions,
    w.metrics?.observer,
  );
  const expiry = new ExpiryWatch(store.db, clock, changes, log, duties);
  const reminders = new ExpiryReminders(store.db, clock, changes, {
    windowsMs: config.expiryRemindersMs,
    log,
    lease: duties,
  });
  const intervalMs = config.driftCheckIntervalMs;
  const driftOptions = intervalMs === null ? undefined : { intervalMs, lease: duties, slots: nodeWork };
  const drift = driftOptions && new DriftRepair(store.db, w.connections, changes, usage, log, driftOptions);
  const housekeeping = new Housekeeping(store.db, clock, log, duties);
  return {
    monitor,
    others: [housekeeping, ...(drift === undefined ? [] : [drift]), expiry, reminders, thresholds, mailer],
  };
}

/** Wires every object of a panel by hand; nothing listens or runs in the background until start(). */
export async function assemblePanel(config: PanelConfig, options: PanelOptions = {}): Promise<Panel> {
  const clock = options.clock ?? systemClock;
  const log = createLogger(config.logLevel, options.logDestination);
  const lock = await holdPanelLock(config);
  const store = await openMigratedStore(config).catch(async (error: unknown) => {
    await lock.release();
    throw error;
  });
  const rateLimiters = await makeRateLimiters(config, clock, log);
  const duties = store.dialect === 'postgres' ? new DatabaseLease(store.db, log, DUTY_LEASE) : undefined;
  const metrics = panelMetrics(config, store.db, clock, log);
  const localAgent = config.localNode ? await makeAgent(config, log, VERSION, metrics?.node) : undefined;
  const connections = new NodeConnections(localAgent && new LocalNodeConnection(localAgent));
  const base = { config, clock, log, store, duties, metrics, connections };
  // Every change of state lands through this, the API's and the workers' alike: recorded in its transaction, then
  // the sender nudged. The sender commits through it too (a webhook its receiver turned off), hence the late lookup.
  const changes = new ChangePublisher(store.db, clock, connections, { nudgeWebhooks: () => sender.nudge() });
  const sender = webhookSender(base, changes);
  const wiring: Wiring = { ...base, changes };
  const core = await coreServices(wiring);
  const app = await panelApp(wiring, core, rateLimiters);
  const { monitor, others } = backgroundWorkers(wiring, core.usage);
  return {
    app,
    store,
    metrics,
    async start() {
      await duties?.start();
      // The first round resyncs every node, so servers come back after a restart before the API answers
      // (the lease holder's duty: when another panel holds it, the nodes already follow the database).
      if (duties?.held ?? true) await monitor.checkAll();
      // Before the API, so a metrics port taken stops the start; after the round, so nodes are counted as seen.
      await metrics?.start();
      await app.listen({ port: config.port, host: config.host });
      localAgent?.start((err: unknown) => log.error({ err }, 'usage metering failed'));
      monitor.start();
      sender.start();
      for (const worker of others) worker.start();
    },
    async stop() {
      await monitor.stop();
      for (const worker of others) await worker.stop();
      await localAgent?.stop();
      await sender.stop();
      await duties?.stop();
      await app.close();
      await metrics?.stop();
      await rateLimiters.close();
      await store.close();
      await lock.release();
    },
  };
}
