import type { FastifyBaseLogger } from 'fastify';
import { type Clock, isoAt } from '../domain/clock.ts';
import { deviceExpired } from '../services/change-kinds.ts';
import { type ChangePublisher, change } from '../services/changes.ts';
import type { Db } from '../store/db.ts';
import { clearExpiryDue, listExpiryDue } from '../store/devices.ts';
import { findNode } from '../store/nodes.ts';
import { findServer } from '../store/servers.ts';
import { type Lease, WorkerLoop } from './loop.ts';

/** Expiries are looked for this often; nodes cut the devices off on their own clocks meanwhile. */
const INTERVAL_MS = 1000;
const BATCH = 200;

/**
 * Posts device.expired once for each expiry that passes (docs/decisions.md "Data limits and expiry"). The
 * status needs no job: it is read from expires_at and the clock. A new expires_at (a renewal) is due for its own event.
 */
export class ExpiryWatch {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #changes: ChangePublisher;
  readonly #log: FastifyBaseLogger;
  readonly #loop: WorkerLoop<number>;

  /** `lease`: several panels on one database, the rounds run on the panel that holds it. */
  constructor(db: Db, clock: Clock, changes: ChangePublisher, log: FastifyBaseLogger, lease?: Lease) {
    this.#db = db;
    this.#clock = clock;
    this.#changes = changes;
    this.#log = log;
    this.#loop = new WorkerLoop(() => this.#postDue(), {
      intervalMs: INTERVAL_MS,
      onError: (err) => this.#log.error({ err }, 'expiry watch failed'),
      lease,
    });
  }

  /** Posts the events of every expiry due now; returns how many. Concurrent calls share the round. */
  runOnce(): Promise<number> {
    return this.#loop.runOnce();
  }

  async #postDue(): Promise<number> {
    let posted = 0;
    for (;;) {
      const due = await listExpiryDue(this.#db, isoAt(this.#clock.nowMs()), BATCH);
      for (const row of due) {
        const dueAt = row.expiry_due_at;
        if (dueAt === null) continue;
        const expired = await this.#changes.commit(async (tx) => {
          const none = { result: false, change: change({}) };
          if (!(await clearExpiryDue(tx, row.id, dueAt))) return none;
          const server = await findServer(tx, row.server_id);
          const node = server && (await findNode(tx, server.node_id));
          if (!server || !node) return none;
          return { result: true, change: deviceExpired({ row, server, node }, dueAt) };
        });
        if (expired) posted++;
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
