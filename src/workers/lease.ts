import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../domain/clock.ts';
import { messageOf } from '../domain/errors.ts';
import type { Db } from '../store/db.ts';
import { claimLease, releaseLease } from '../store/leases.ts';
import { type Lease, WorkerLoop } from './loop.ts';

export interface LeaseOptions {
  /** The lease's row in `duty_leases`. */
  name: string;
  /** How long a claim holds without renewal: a holder killed is replaced at most ttlMs + renewMs later. */
  ttlMs: number;
  /** How often the holder renews and every other panel tries to take it. */
  renewMs: number;
}

/**
 * The once-only duties of the panels sharing one PostgreSQL (docs/architecture.md, "Several panels"):
 * a holder killed is replaced within 12 s (the lease lapses within 10 s of its last renewal, the next
 * try is at most 2 s later); the holder tolerates four renewals in a row that fail or are late.
 */
export const DUTY_LEASE: LeaseOptions = { name: 'duties', ttlMs: 10_000, renewMs: 2_000 };

/** Elapsed time that no change of the wall clock moves: how long a claim is good for, as this process counts. */
const monotonicClock: Clock = { nowMs: () => performance.now() };

/**
 * A lease row in the database, held by one panel process at a time and renewed by it every renewMs; the
 * other panels try to take it as often. The holder counts its hold from before it sent its claim, and the
 * database from when it ran it, so the holder stops believing it holds the lease before the database
 * lets anyone else take it (a holder cut off from the database stops on its own). A round already
 * running when the lease is lost finishes; the duties are safe to repeat (batches stored once by id,
 * events posted once by a conditional update, outbox rows claimed), the lease keeps them from running twice.
 */
export class DatabaseLease implements Lease {
  /** Who holds it in `duty_leases.holder`: host, process id, and a random part for a restarted process. */
  readonly holder = `${hostname()}/${process.pid}/${randomBytes(4).toString('hex')}`;
  readonly #db: Db;
  readonly #log: FastifyBaseLogger;
  readonly #options: LeaseOptions;
  readonly #clock: Clock;
  readonly #listeners = new Set<() => void>();
  readonly #loop: WorkerLoop<void>;
  #heldUntilMs = Number.NEGATIVE_INFINITY;
  /** What the log last said: held or not. */
  #reportedHeld = false;

  constructor(db: Db, log: FastifyBaseLogger, options: LeaseOptions, clock: Clock = monotonicClock) {
    this.#db = db;
    this.#log = log;
    this.#options = options;
    this.#clock = clock;
    this.#loop = new WorkerLoop(() => this.#claim(), {
      intervalMs: options.renewMs,
      onError: (err) => this.#failed(err),
    });
  }

  get held(): boolean {
    return this.#clock.nowMs() < this.#heldUntilMs;
  }

  onGained(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Makes the first claim (so `held` answers at once), then keeps claiming every renewMs. */
  async start(): Promise<void> {
    await this.#loop.runOnce().catch((err: unknown) => this.#failed(err));
    this.#loop.start();
  }

  /** Stops claiming and gives the lease up, so another panel takes it at its next try, not after the TTL. */
  async stop(): Promise<void> {
    await this.#loop.stop();
    if (!this.held) return;
    this.#heldUntilMs = Number.NEGATIVE_INFINITY;
    await releaseLease(this.#db, this.#options.name, this.holder).catch((err: unknown) => {
      this.#log.warn({ err: messageOf(err), lease: this.#options.name }, 'lease not released; it lapses by itself');
    });
  }

  async #claim(): Promise<void> {
    const sentMs = this.#clock.nowMs();
    try {
      const taken = await claimLease(this.#db, this.#options.name, this.holder, this.#options.ttlMs);
      this.#heldUntilMs = taken ? sentMs + this.#options.ttlMs : Number.NEGATIVE_INFINITY;
    } finally {
      this.#report();
    }
  }

  #failed(err: unknown): void {
    this.#log.warn({ err: messageOf(err), lease: this.#options.name }, 'lease claim failed');
  }

  /** Logs a change of hands, and tells the listeners when this panel has just gained the lease. */
  #report(): void {
    const held = this.held;
    if (held === this.#reportedHeld) return;
    this.#reportedHeld = held;
    const fields = { lease: this.#options.name, holder: this.holder };
    if (!held) {
      this.#log.warn(fields, 'lease lost: this panel no longer runs its duties');
      return;
    }
    this.#log.info(fields, 'lease taken: this panel runs its duties');
    for (const listener of this.#listeners) listener();
  }
}
