import { randomUUID } from 'node:crypto';

/** Two hex digits of each byte value. */
const HEX_BYTES = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'));

/**
 * The ids made for requests that bring none: UUIDs of RFC 9562's version 8 (laid out to one's own rule), 74 random
 * bits drawn once per process and then a count of its requests. Unique across processes and restarts by the random
 * part, without drawing and formatting 16 random bytes on every request (a random UUID cost about three times as
 * much). A request id names a request in logs, the activity log and mails; it is no secret, and a client may send
 * its own.
 */
export class RequestIds {
  /** `xxxxxxxx-xxxx-8xxx-yxxx-`: a random UUID's first 20 digits, its version made 8. */
  readonly #prefix: string;
  #count = 0;
  /** The count's upper 8 of 12 hex digits with the prefix, made anew every 65,536 ids. */
  #upper = -1;
  #upperText = '';

  constructor() {
    const random = randomUUID();
    this.#prefix = `${random.slice(0, 14)}8${random.slice(15, 24)}`;
  }

  next(): string {
    const count = this.#count++;
    const upper = Math.floor(count / 65_536);
    if (upper !== this.#upper) {
      this.#upper = upper;
      this.#upperText = this.#prefix + upper.toString(16).padStart(8, '0');
    }
    return this.#upperText + HEX_BYTES[(count >> 8) & 255] + HEX_BYTES[count & 255];
  }
}
