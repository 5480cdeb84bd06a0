/**
 * Runs work one at a time per key, in the order it was given; different keys run side by side. Work
 * starts once its predecessor has settled, whether that succeeded or failed, so one failed operation
 * does not stop the ones queued behind it. A key with nothing queued or running is forgotten.
 */
export class KeyedQueue<K> {
  /** Per key, a promise that settles (never rejects) when the last work given for it has settled. */
  readonly #tails = new Map<K, Promise<void>>();

  run<T>(key: K, work: () => Promise<T>): Promise<T> {
    // The tail never rejects, so `work` runs after a failed predecessor too.
    const result = (this.#tails.get(key) ?? Promise.resolve()).then(() => work());
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.#tails.set(key, tail);
    void tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return result;
  }

  /** How many keys have work queued or running. */
  get size(): number {
    return this.#tails.size;
  }
}
