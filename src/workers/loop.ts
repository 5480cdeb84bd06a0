/** What a loop needs of a lease (src/workers/lease.ts): whether this panel holds it, and word when it gains it. */
export interface Lease {
  readonly held: boolean;
  /** Calls `listener` each time this panel gains the lease; returns what unsubscribes it. */
  onGained(listener: () => void): () => void;
}

export interface WorkerLoopOptions {
  /** Time between ticks. */
  intervalMs: number;
  /** A round that failed with no caller to tell: one started by a tick or a nudge. */
  onError: (error: unknown) => void;
  /** What a tick does; by default a round starts unless one is in flight. */
  onTick?: () => void;
  /**
   * The lease of a duty that must run on one panel at a time: ticks and nudges do nothing unless it is
   * held, and a round starts as soon as it is gained. runOnce() is the caller's and runs regardless.
   * Without one, the loop runs on every panel.
   */
  lease?: Lease;
}

/**
 * The loop of a background worker: a round of work every interval, never two at once. Timers start
 * in start() and are unref'd, so a worker never keeps the process alive; stop() waits for the round
 * in flight, so a drain leaves no half-done round behind.
 */
export class WorkerLoop<T> {
  readonly #round: () => Promise<T>;
  readonly #options: WorkerLoopOptions;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<T> | undefined;
  /** A nudge came while a round ran: that round is followed by one more. */
  #again = false;
  #scheduled = false;
  #unsubscribe: (() => void) | undefined;

  constructor(round: () => Promise<T>, options: WorkerLoopOptions) {
    this.#round = round;
    this.#options = options;
  }

  start(): void {
    clearInterval(this.#timer);
    const tick = (): void => {
      if (!this.#running) this.#run().catch(this.#options.onError);
    };
    const onTick = this.#options.onTick ?? tick;
    this.#timer = setInterval(() => {
      if (this.#leaseHeld) onTick();
    }, this.#options.intervalMs);
    this.#timer.unref();
    this.#unsubscribe?.();
    this.#unsubscribe = this.#options.lease?.onGained(() => this.nudge());
  }

  /** Stops the ticks and waits for the round in flight or scheduled by a nudge; its failure was reported. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    await this.idle();
  }

  /** Runs a round now; a call while one runs shares it (single flight) and gets its result or failure. */
  runOnce(): Promise<T> {
    return this.#running ?? this.#run();
  }

  /**
   * Asks for a round soon (on the next turn of the event loop, so nudges of one turn share it). If a
   * round is in flight then, one more follows it, so work announced during a round is not missed.
   */
  nudge(): void {
    if (this.#scheduled || !this.#leaseHeld) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      if (this.#running) this.#again = true;
      else this.#run().catch(this.#options.onError);
    });
  }

  get #leaseHeld(): boolean {
    return this.#options.lease?.held ?? true;
  }

  /** True while a round runs or a nudge's round waits to start. */
  get busy(): boolean {
    return this.#running !== undefined || this.#scheduled;
  }

  /** Resolves once no round runs or waits to start. */
  async idle(): Promise<void> {
    while (this.busy) {
      if (this.#running) await this.#running.catch(() => undefined);
      else await new Promise((resolve) => setImmediate(resolve));
    }
  }

  #run(): Promise<T> {
    const rounds = async (): Promise<T> => {
      let result: T;
      do {
        this.#again = false;
        result = await this.#round();
      } while (this.#again);
      return result;
    };
    const running = rounds().finally(() => {
      this.#running = undefined;
    });
    this.#running = running;
    return running;
  }
}
