import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../domain/clock.ts';
import type { Calendar } from '../domain/usage.ts';
import { countFleet, type PanelObserver } from '../services/metrics.ts';
import type { Db } from '../store/db.ts';
import { WorkerLoop } from './loop.ts';

/**
 * Recounts the fleet (devices by status, online, servers, nodes, pending deliveries and mail) every interval
 * and hands the counts to the metrics, so a scrape reads numbers in memory and never the database: the
 * count of devices is one pass over the table, which at 100,000 devices is worth doing every few seconds, not
 * on every scrape of every Prometheus.
 */
export class FleetCensus {
  readonly #loop: WorkerLoop<void>;
  readonly #onError: (error: unknown) => void;

  constructor(
    db: Db,
    clock: Clock,
    calendar: Calendar,
    observer: PanelObserver,
    log: FastifyBaseLogger,
    intervalMs: number,
  ) {
    this.#onError = (err) => log.error({ err }, 'counting the fleet for the metrics failed');
    this.#loop = new WorkerLoop(async () => observer.fleetCounted(await countFleet(db, clock, calendar)), {
      intervalMs,
      onError: this.#onError,
    });
  }

  /** Counts now; concurrent calls share the count in progress. */
  runOnce(): Promise<void> {
    return this.#loop.runOnce();
  }

  /** Counts now, then every interval; a count that fails is logged, and the next one tries again. */
  async start(): Promise<void> {
    await this.#loop.runOnce().catch(this.#onError);
    this.#loop.start();
  }

  stop(): Promise<void> {
    return this.#loop.stop();
  }
}
