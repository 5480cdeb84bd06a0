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
 * When each server is metered: every tick, one turn per server in the server's queue, so a metering never runs
 * beside another change of the same server. Per server, not per round: a server whose queue is busy (a drift check,
 * an apply) delays only its own turn, and the ticks go on for the others. A tick skips only a server whose turn is
 * still waiting in its queue: that turn reads the counters when it runs, later than the tick would. A turn running
 * when the tick comes gets another after it, so a slow reading never drops the tick after it.
 */
export class MeteringTicks {
  readonly #serial: KeyedQueue<number>;
  readonly #servers: MeteredServers;
  readonly #intervalMs: number;
  /** Each server's metering turn that is queued and has not started. */
  readonly #waiting = new Map<number, Promise<void>>();
  /** Every round not yet finished, so stop() waits for them. */
  readonly #rounds = new Set<Promise<void>>();
  /** The servers whose early re-check is pending. */
  readonly #rechecks = new Set<number>();
  #timer: NodeJS.Timeout | undefined;

  constructor(serial: KeyedQueue<number>, servers: MeteredServers, intervalMs = METER_INTERVAL_MS) {
    this.#serial = serial;
    this.#servers = servers;
    this.#intervalMs = intervalMs;
  }

  /** One round: every server metered (a turn already waiting serves), then what they booked is saved. */
  round(): Promise<void> {
    const round = Promise.all([...this.#servers.ids()].map((serverId) => this.#turn(serverId))).then(() =>
      this.#servers.flush(),
    );
    this.#rounds.add(round);
    const forget = () => this.#rounds.delete(round);
    round.then(forget, forget);
    return round;
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
    await Promise.allSettled([...this.#rounds]);
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

  /** The server's waiting metering turn, or a new one queued; it never rejects (a failed read waits for the next). */
  #turn(serverId: number): Promise<void> {
    const waiting = this.#waiting.get(serverId);
    if (waiting !== undefined) return waiting;
    const turn = this.#serial
      .run(serverId, () => {
        this.#waiting.delete(serverId);
        return this.#servers.meter(serverId);
      })
      .catch(() => undefined);
    this.#waiting.set(serverId, turn);
    return turn;
  }
}
