import type { FastifyBaseLogger } from 'fastify';
import { deviceUsageThreshold } from '../services/change-kinds.ts';
import { type ChangePublisher, change, mergeChanges } from '../services/changes.ts';
import type { UsageService } from '../services/usage.ts';
import type { Db } from '../store/db.ts';
import { findDevice } from '../store/devices.ts';
import { findNode } from '../store/nodes.ts';
import { findServer } from '../store/servers.ts';
import { listThresholdsCrossed, markThreshold } from '../store/usage.ts';
import { type Lease, WorkerLoop } from './loop.ts';

/** Usage is collected every 5 s; a round every 15 s posts a crossing well before the next threshold. */
const INTERVAL_MS = 15_000;
const BATCH = 200;

/**
 * Posts device.usage_threshold when a device's count crosses each of the panel's USAGE_THRESHOLDS (percents of its
 * data limit and the period's top-ups), once per threshold per period (docs/api.md "Reminders"): the row keeps the
 * highest percent posted and the period it was in, so a reset or a new month re-arms them.
 */
export class UsageThresholds {
  readonly #db: Db;
  readonly #usage: UsageService;
  readonly #changes: ChangePublisher;
  readonly #percents: readonly number[];
  readonly #loop: WorkerLoop<number>;

  constructor(
    db: Db,
    usage: UsageService,
    changes: ChangePublisher,
    options: { percents: readonly number[]; log: FastifyBaseLogger; lease?: Lease },
  ) {
    this.#db = db;
    this.#usage = usage;
    this.#changes = changes;
    this.#percents = options.percents;
    this.#loop = new WorkerLoop(() => this.#postCrossed(), {
      intervalMs: INTERVAL_MS,
      onError: (err) => options.log.error({ err }, 'usage thresholds failed'),
      lease: options.lease,
    });
  }

  /** Posts every crossing there is now; returns how many events. Concurrent calls share the round. */
  runOnce(): Promise<number> {
    return this.#loop.runOnce();
  }

  async #postCrossed(): Promise<number> {
    let posted = 0;
    for (;;) {
      const crossed = await listThresholdsCrossed(this.#db, this.#usage.currentMonth(), this.#percents, BATCH);
      for (const { id, crossed: percent, notified, period } of crossed) {
        const passed = this.#percents.filter((p) => p > notified && p <= percent);
        posted += await this.#changes.commit(async (tx) => {
          const none = { result: 0, change: change({}) };
          if (!(await markThreshold(tx, id, period, percent))) return none;
          const row = await findDevice(tx, id);
          const server = row && (await findServer(tx, row.server_id));
          const node = server && (await findNode(tx, server.node_id));
          if (!row || !server || !node) return none;
          const events = passed.map((p) => deviceUsageThreshold({ row, server, node }, p));
          return { result: events.length, change: mergeChanges(events) };
        });
      }
      if (crossed.length < BATCH) return posted;
    }
  }

  start(): void {
    this.#loop.start();
  }

  stop(): Promise<void> {
    return this.#loop.stop();
  }
}
