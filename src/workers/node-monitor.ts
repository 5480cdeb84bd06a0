import { messageOf } from '../domain/errors.ts';
import type { FastifyBaseLogger } from 'fastify';
import { errorDetail } from '../platform/error-detail.ts';
import { type Clock, isoAt } from '../domain/clock.ts';
import { nodeWentOffline, nodeWentOnline } from '../services/change-kinds.ts';
import { type ChangePublisher, change } from '../services/changes.ts';
import { desiredStateOfNode } from '../services/desired-state.ts';
import { startExpiriesAtHandshake } from '../services/handshake-expiry.ts';
import type { NodeConnections } from '../services/nodes.ts';
import { type Db, write } from '../store/db.ts';
import { listNodes, type NodeRow, updateNode } from '../store/nodes.ts';
import type { UsageAck } from '../agent/protocol.ts';
import { ipv6OfResync } from '../services/servers.ts';
import type { UsageService } from '../services/usage.ts';
import { setServerIpv6 } from '../store/servers.ts';
import { type PanelObserver, UNOBSERVED_PANEL } from '../services/metrics.ts';
import { type Lease, WorkerLoop } from './loop.ts';
import { NODE_WORK_SLOTS, Slots } from './slots.ts';

export interface NodeMonitorOptions {
  intervalMs: number;
  /** A node unheard of for this long is offline. */
  offlineAfterMs: number;
  /** Several panels on one database: the rounds run on the panel that holds this. */
  lease?: Lease;
  /** Shared with the drift repair, so resyncs and drift checks together hold a few nodes' state at a time. */
  slots?: Slots;
}

export const NODE_MONITOR_DEFAULTS: NodeMonitorOptions = { intervalMs: 5_000, offlineAfterMs: 15_000 };

/**
 * The heartbeat and reconcile loop: asks every node for its status; a node seen for the first time
 * since the panel started, or whose agent restarted (new boot id), or that comes back online, gets the
 * whole desired state again, so servers and peers return without the API being called. Each round
 * also collects the node's usage, and at the start of a month every node gets its new allowances.
 */
export class NodeMonitor {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #connections: NodeConnections;
  readonly #changes: ChangePublisher;
  readonly #log: FastifyBaseLogger;
  readonly #options: NodeMonitorOptions;
  readonly #usage: UsageService;
  readonly #syncedBootIds = new Map<number, string>();
  /** What each node is told at its next collection that the panel stored. */
  readonly #acks = new Map<number, UsageAck>();
  #month: string | undefined;
  readonly #loop: WorkerLoop<void>;
  readonly #observer: PanelObserver;
  readonly #slots: Slots;

  constructor(
    db: Db,
    clock: Clock,
    connections: NodeConnections,
    changes: ChangePublisher,
    usage: UsageService,
    log: FastifyBaseLogger,
    options: NodeMonitorOptions,
    observer: PanelObserver = UNOBSERVED_PANEL,
  ) {
    this.#db = db;
    this.#changes = changes;
    this.#observer = observer;
    this.#usage = usage;
    this.#clock = clock;
    this.#connections = connections;
    this.#log = log;
    this.#options = options;
    this.#slots = options.slots ?? new Slots(NODE_WORK_SLOTS);
    this.#loop = new WorkerLoop(() => this.#checkAll(), {
      intervalMs: options.intervalMs,
      onError: (err) => this.#log.error({ err }, 'node monitor round failed'),
      lease: options.lease,
    });
  }

  /** One round over every node; concurrent calls share the round in progress. */
  checkAll(): Promise<void> {
    return this.#loop.runOnce();
  }

  async #checkAll(): Promise<void> {
    const month = this.#usage.currentMonth();
    // A new month: monthly counts restart, so every node gets allowances that end at the next 1st.
    if (this.#month !== month) this.#syncedBootIds.clear();
    this.#month = month;
    const nodes = await listNodes(this.#db);
    await Promise.all(nodes.map((node) => this.#check(node)));
  }

  async #check(node: NodeRow): Promise<void> {
    const nowMs = this.#clock.nowMs();
    const connection = this.#connections.for(node);
    try {
      const status = await connection.status();
      if (this.#syncedBootIds.get(node.id) !== status.bootId || node.status === 'offline') {
        const report = await this.#slots.run(() =>
          connection.resync(desiredStateOfNode(this.#db, node.id, this.#usage)),
        );
        if (report.failures.length > 0)
          this.#log.warn({ node: node.name, failures: report.failures }, 'node resync left failures');
        // The mode the node runs, not the one a row was given before the node applied it (migration 017: off).
        await write(this.#db, async (tx) => {
          for (const [serverId, mode] of ipv6OfResync(report)) await setServerIpv6(tx, serverId, mode);
        });
        this.#syncedBootIds.set(node.id, status.bootId);
      }
      await this.#changes.commit(async (tx) => {
        // An agent older than AmneziaWG reports no protocols: it runs WireGuard only.
        const protocols = JSON.stringify(status.protocols ?? ['wireguard']);
        const seen = { last_seen_at: isoAt(nowMs), driver: status.driver, version: status.version, protocols };
        await updateNode(tx, node.id, { status: 'online', ...seen, last_error: null });
        return { result: undefined, change: node.status === 'offline' ? nodeWentOnline(node) : change({}) };
      });
    } catch (error) {
      const lastSeenMs = node.last_seen_at === null ? 0 : Date.parse(node.last_seen_at);
      // The detail names the URL: for the log and `nodes list`, never for API clients.
      const detail = errorDetail(error);
      this.#log.warn({ node: node.name, err: detail }, 'node check failed');
      if (node.last_error !== detail) await write(this.#db, (tx) => updateNode(tx, node.id, { last_error: detail }));
      if (node.status === 'online' && nowMs - lastSeenMs >= this.#options.offlineAfterMs) {
        await this.#changes.commit(async (tx) => {
          await updateNode(tx, node.id, { status: 'offline' });
          return { result: undefined, change: nodeWentOffline(node, messageOf(error)) };
        });
      }
      return;
    }
    await this.#collectUsage(node).catch((error: unknown) => {
      this.#log.warn({ node: node.name, err: errorDetail(error) }, 'usage collection failed');
    });
  }

  /**
   * Stores the node's usage batches and handshakes; what was stored is acknowledged next time. A
   * failure here is not the node's liveness: the node keeps its batches and they come next round.
   */
  async #collectUsage(node: NodeRow): Promise<void> {
    const startedMs = performance.now();
    const report = await this.#connections.for(node).collectUsage(this.#acks.get(node.id) ?? null);
    const ack = await this.#usage.ingest(node, report, this.#changes);
    if (ack) this.#acks.set(node.id, ack);
    if (report.handshakes.length > 0) await startExpiriesAtHandshake(this.#db, this.#changes, this.#usage);
    this.#observer.usageCollected((performance.now() - startedMs) / 1000);
  }

  start(): void {
    this.#loop.start();
  }

  stop(): Promise<void> {
    return this.#loop.stop();
  }
}
