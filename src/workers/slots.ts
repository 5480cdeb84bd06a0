/**
 * At most `size` tasks at a time; the others wait their turn, first come first served. The resync and the drift
 * check each hold a node's desired state (up to a server's peers) and its answer while they work: run a few nodes
 * at a time, a fleet of 100 nodes costs the memory of a few, not of all of them at once.
 */
export class Slots {
  readonly #size: number;
  #running = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(size: number) {
    this.#size = size;
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#running >= this.#size) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else this.#running++;
    try {
      return await task();
    } finally {
      // The slot passes straight to the next waiting task, so none can take it in between.
      const next = this.#waiting.shift();
      if (next === undefined) this.#running--;
      else next();
    }
  }
}

/** Nodes resynced or drift-checked at once. */
export const NODE_WORK_SLOTS = 4;
