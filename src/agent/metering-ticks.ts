import type { KeyedQueue } from './keyed-queue.ts';

/** Counters are read this often: a device over its limit or past its expiry is off within about this. */
export const METER_INTERVAL_MS = 1000;
/** A server with a peer likely to use up its allowance before the next tick is metered again after this share. */
const LAST_STEP_RECHECK_SHARE = 10;

/** What the ticks drive: the servers to meter and how one is metered (inside its queue turn). */
export interface MeteredServers {
  /** The servers metered at a tick. */
  ids(): Iterable<number>;
  /** Reads one server's counters into the ledger and enforces its limits; runs inside the server's queue turn. */
  meter(serverId: number): Promise<void>;
  /** Saves what the turns of a round booked. */
  flush(): void;
}

/**
 * When each server is metered: every tick a round, one turn per server in the server's queue, so a metering never
 * runs beside another change of the same server. A new round starts only when the last finished.
 */
export class MeteringTicks {
  readonly #serial: KeyedQueue<number>;
  readonly #servers: MeteredServers;
  readonly #intervalMs: number;
  #round: Promise<void> | undefined;
  /** The servers whose early re-check is pending. */
  readonly #rechecks = new Set<number>();
  #timer: NodeJS.Timeout | undefined;

  constructor(serial: KeyedQueue<number>, servers: MeteredServers, intervalMs = METER_INTERVAL_MS) {
    this.#serial = serial;
    this.#servers = servers;
    this.#intervalMs = intervalMs;
  }

  /** One round: every server metered, then what they booked is saved; the round under way, if any. */
  round(): Promise<void> {
    this.#round ??= (async () => {
      try {
        await Promise.all([...this.#servers.ids()].map((serverId) => this.#turn(serverId)));
        this.#servers.flush();
      } finally {
        this.#round = undefined;
      }
    })();
    return this.#round;
  }

  /** A round every interval; a round that fails (the journal cannot be saved) is reported and retried next time. */
  start(onError: (error: unknown) => void): void {
    this.#timer = setInterval(() => this.round().catch(onError), this.#intervalMs);
    this.#timer.unref();
  }

  /** No more ticks; resolves once the rounds under way have ended. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#round;
  }

  /** Meters the server again after a share of the interval, once, while the ticks run. */
  recheckSoon(serverId: number): void {
    if (this.#timer === undefined || this.#rechecks.has(serverId)) return;
    this.#rechecks.add(serverId);
    setTimeout(() => {
      this.#rechecks.delete(serverId);
      if (this.#timer !== undefined) void this.#turn(serverId);
    }, this.#intervalMs / LAST_STEP_RECHECK_SHARE).unref();
  }

  /** A metering turn of the server; it never rejects (a failed read waits for the next). */
  #turn(serverId: number): Promise<void> {
    return this.#serial.run(serverId, () => this.#servers.meter(serverId)).catch(() => undefined);
  }
}
