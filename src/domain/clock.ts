/** Time as the rules see it: the real one in the service, a manual one in tests. */
export interface Clock {
  nowMs(): number;
}

export const systemClock: Clock = { nowMs: () => Date.now() };

export class ManualClock implements Clock {
  #ms: number;
  constructor(startMs: number) {
    this.#ms = startMs;
  }
  nowMs(): number {
    return this.#ms;
  }
  advance(ms: number): void {
    this.#ms += ms;
  }
}

export function isoAt(ms: number): string {
  return new Date(ms).toISOString();
}
