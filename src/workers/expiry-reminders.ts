import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../domain/clock.ts';
import { deviceExpiring } from '../services/change-kinds.ts';
import { type ChangePublisher, change } from '../services/changes.ts';
import type { Db } from '../store/db.ts';
import { listRemindersDue, markReminded } from '../store/devices.ts';
import { findNode } from '../store/nodes.ts';
import { findServer } from '../store/servers.ts';
import { type Lease, WorkerLoop } from './loop.ts';

/** Reminders are hours apart: a round a minute posts each within a minute of its time. */
const INTERVAL_MS = 60_000;
const BATCH = 200;

/**
 * Posts device.expiring at each of the panel's EXPIRY_REMINDERS before a device's expiry, once per reminder per
 * expiry (docs/api.md "Reminders"): the row keeps the expiry and window last reminded, so a renewal (a new expiry)
 * is reminded again, and a device first seen inside several windows gets the nearest one's reminder only.
 */
export class ExpiryReminders {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #changes: ChangePublisher;
  readonly #windowsMs: readonly number[];
  readonly #loop: WorkerLoop<number>;

  /** `lease`: several panels on one database, the rounds run on the panel that holds it. */
  constructor(
    db: Db,
    clock: Clock,
    changes: ChangePublisher,
    options: { windowsMs: readonly number[]; log: FastifyBaseLogger; lease?: Lease },
  ) {
    this.#db = db;
    this.#clock = clock;
    this.#changes = changes;
    this.#windowsMs = options.windowsMs;
    this.#loop = new WorkerLoop(() => this.#postDue(), {
      intervalMs: INTERVAL_MS,
      onError: (err) => options.log.error({ err }, 'expiry reminders failed'),
      lease: options.lease,
    });
  }

  /** Posts every reminder due now; returns how many. Concurrent calls share the round. */
  runOnce(): Promise<number> {
    return this.#loop.runOnce();
  }

  async #postDue(): Promise<number> {
    let posted = 0;
    for (;;) {
      const due = await listRemindersDue(this.#db, this.#clock.nowMs(), this.#windowsMs, BATCH);
      for (const row of due) {
        const expiresAt = row.expires_at;
        if (expiresAt === null) continue;
        const sent = await this.#changes.commit(async (tx) => {
          const none = { result: false, change: change({}) };
          if (!(await markReminded(tx, row.id, expiresAt, row.window_ms))) return none;
          const server = await findServer(tx, row.server_id);
          const node = server && (await findNode(tx, server.node_id));
          if (!server || !node) return none;
          return { result: true, change: deviceExpiring({ row, server, node }, row.window_ms) };
        });
        if (sent) posted++;
      }
      if (due.length < BATCH) return posted;
    }
  }

  start(): void {
    this.#loop.start();
  }

  stop(): Promise<void> {
    return this.#loop.stop();
  }
}
