import type { FastifyBaseLogger } from 'fastify';
import { type Clock, isoAt } from '../domain/clock.ts';
import { IDEMPOTENCY_TTL_MS } from '../http/idempotency.ts';
import type { Db } from '../store/db.ts';
import { pruneIdempotencyKeys } from '../store/idempotency.ts';
import { pruneEvents } from '../store/events.ts';
import { EVENT_RETENTION_MS } from '../domain/events.ts';

const INTERVAL_MS = 10 * 60 * 1000;

/** Periodic clean-up of rows past their retention: idempotency keys after 24 hours, events after 90 days. */
export class Housekeeping {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #log: FastifyBaseLogger;
  #timer: NodeJS.Timeout | undefined;

  constructor(db: Db, clock: Clock, log: FastifyBaseLogger) {
    this.#db = db;
    this.#clock = clock;
    this.#log = log;
  }

  async runOnce(): Promise<void> {
    const nowMs = this.#clock.nowMs();
    await pruneIdempotencyKeys(this.#db, isoAt(nowMs - IDEMPOTENCY_TTL_MS));
    await pruneEvents(this.#db, isoAt(nowMs - EVENT_RETENTION_MS));
  }

  start(): void {
    this.#timer = setInterval(() => {
      this.runOnce().catch((err: unknown) => this.#log.error({ err }, 'housekeeping failed'));
    }, INTERVAL_MS);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
