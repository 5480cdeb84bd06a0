import type { FastifyBaseLogger } from 'fastify';
import { type Clock, isoAt } from '../domain/clock.ts';
import { IDEMPOTENCY_TTL_MS } from '../domain/idempotency.ts';
import type { Db } from '../store/db.ts';
import { pruneIdempotencyKeys } from '../store/idempotency.ts';
import { pruneEvents } from '../store/events.ts';
import { EVENT_RETENTION_MS } from '../domain/events.ts';
import { pruneBatches } from '../store/usage.ts';
import { pruneDeliveries } from '../store/webhooks.ts';

/** A node resends an unacknowledged batch within minutes; a week covers any outage worth riding out. */
const USAGE_BATCH_MEMORY_MS = 7 * 24 * 3600 * 1000;
import { ACTIVITY_RETENTION_MS } from '../domain/activity.ts';
import { pruneActivity } from '../store/activity.ts';
import { pruneMail } from '../store/mail.ts';
import { type Lease, WorkerLoop } from './loop.ts';

const INTERVAL_MS = 10 * 60 * 1000;
/** Sent and failed notification mails are kept this long, for looking into a mail that did not arrive. */
const MAIL_RETENTION_MS = 30 * 24 * 60 * 60 * 1000;

/**
 * Periodic clean-up of rows past their retention: idempotency keys after 24 hours, events and delivered
 * or failed webhook deliveries after 90 days, the record of stored usage batches after a week, sent or
 * failed mails after 30 days, activity entries after a year.
 */
export class Housekeeping {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #log: FastifyBaseLogger;
  readonly #loop: WorkerLoop<void>;

  /** `lease`: several panels on one database, the rounds run on the panel that holds it. */
  constructor(db: Db, clock: Clock, log: FastifyBaseLogger, lease?: Lease) {
    this.#db = db;
    this.#clock = clock;
    this.#log = log;
    this.#loop = new WorkerLoop(() => this.#prune(), {
      intervalMs: INTERVAL_MS,
      onError: (err) => this.#log.error({ err }, 'housekeeping failed'),
      lease,
    });
  }

  /** Prunes everything past its retention now; concurrent calls share the round. */
  runOnce(): Promise<void> {
    return this.#loop.runOnce();
  }

  async #prune(): Promise<void> {
    const nowMs = this.#clock.nowMs();
    await pruneIdempotencyKeys(this.#db, isoAt(nowMs - IDEMPOTENCY_TTL_MS));
    await pruneEvents(this.#db, isoAt(nowMs - EVENT_RETENTION_MS));
    await pruneDeliveries(this.#db, isoAt(nowMs - EVENT_RETENTION_MS));
    await pruneBatches(this.#db, isoAt(nowMs - USAGE_BATCH_MEMORY_MS));
    await pruneMail(this.#db, isoAt(nowMs - MAIL_RETENTION_MS));
    await pruneActivity(this.#db, isoAt(nowMs - ACTIVITY_RETENTION_MS));
  }

  start(): void {
    this.#loop.start();
  }

  stop(): Promise<void> {
    return this.#loop.stop();
  }
}
