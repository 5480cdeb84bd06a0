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

/**
 * A client's date-time as stored: UTC with milliseconds, so text order is time order in both
 * databases (`+02:00` offsets or missing fractions would not compare).
 */
export function normaliseInstant(text: string | null): string | null {
  return text === null ? null : isoAt(Date.parse(text));
}
