import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { AppError } from '../domain/errors.ts';
import {
  formatPasswordHash,
  KEY_BYTES,
  normalisedPassword,
  type PasswordHash,
  parsePasswordHash,
  SALT_BYTES,
  SCRYPT_PARAMS,
  scryptMaxmem,
} from '../domain/passwords.ts';

/**
 * Hashes more than this at once wait: each holds one of libuv's 4 threads (which file access and DNS
 * lookups share) and 32 MiB for 0.2-0.4 s, so a burst of sign-ins cannot starve the rest of the panel.
 */
const CONCURRENT_HASHES = 2;
/**
 * Hashes that may wait in each queue; more are refused at once (429). At 0.2-0.4 s a hash, two at a time,
 * the last one admitted waits at most about 5 s, where an unbounded queue let a flood of sign-ins hold a
 * real one back for half a minute and more.
 */
const WAITING_MAX = 32;
/** What a hash is taken to cost before any was timed (the parameters' cost on the 2-core test machine). */
const FIRST_ESTIMATE_MS = 300;

/**
 * Which queue a hash waits in: `first` (a sign-in from a browser known for its user, or a new password
 * set by an admin) runs before any `queued` one (every other sign-in), so a flood of sign-ins with names
 * that are unknown, or known but not theirs, never holds back the people who signed in there before.
 */
export type HashPriority = 'first' | 'queued';

/** The key derivation: scrypt of node:crypto, or in tests a stand-in that lets them hold hashes back. */
export type Derive = (
  password: string,
  salt: Buffer,
  params: PasswordHash['params'],
  keyBytes: number,
) => Promise<Buffer>;

export interface PasswordHasherOptions {
  /** Told of every hash refused because its queue was full, and the `Retry-After` it was given. */
  onQueueFull?: (retryAfterSeconds: number) => void;
  derive?: Derive;
}

function derive(password: string, salt: Buffer, params: PasswordHash['params'], keyBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const options = { ...params, maxmem: scryptMaxmem(params) };
    scrypt(normalisedPassword(password), salt, keyBytes, options, (error, key) =>
      error ? reject(error) : resolve(key),
    );
  });
}

/** Console passwords: scrypt from node:crypto, a salt per hash, compared in constant time. */
export class PasswordHasher {
  #running = 0;
  readonly #waiting: Record<HashPriority, (() => void)[]> = { first: [], queued: [] };
  /** A moving average of a hash's time, for the `Retry-After` of a refusal. */
  #hashMs = FIRST_ESTIMATE_MS;
  readonly #onQueueFull: (retryAfterSeconds: number) => void;
  readonly #derive: Derive;
  /**
   * What a sign-in of an unknown user is checked against: a hash no password matches, with the current
   * parameters, so that it takes as long as a known user's and the answer's time does not tell them apart.
   */
  readonly #nobody = formatPasswordHash({
    params: SCRYPT_PARAMS,
    salt: randomBytes(SALT_BYTES),
    key: randomBytes(KEY_BYTES),
  });

  constructor(options: PasswordHasherOptions = {}) {
    this.#onQueueFull = options.onQueueFull ?? (() => {});
    this.#derive = options.derive ?? derive;
  }

  /** A new password's hash: made for an admin or the CLI, so it waits in the `first` queue. */
  async hash(password: string): Promise<string> {
    const salt = randomBytes(SALT_BYTES);
    const key = await this.#limited('first', () => this.#derive(password, salt, SCRYPT_PARAMS, KEY_BYTES));
    return formatPasswordHash({ params: SCRYPT_PARAMS, salt, key });
  }

  /**
   * True when `password` is the one `stored` was made from; `stored` undefined (no such user) is never matched.
   * Refused with `rate_limited` (and a `Retry-After`) when WAITING_MAX hashes already wait in its queue.
   */
  async verify(password: string, stored: string | undefined, priority: HashPriority = 'queued'): Promise<boolean> {
    const hash = parsePasswordHash(stored ?? this.#nobody);
    if (hash === undefined) throw new Error('a console user has a password hash this version cannot read');
    const key = await this.#limited(priority, () => this.#derive(password, hash.salt, hash.params, hash.key.length));
    return timingSafeEqual(key, hash.key) && stored !== undefined;
  }

  async #limited<T>(priority: HashPriority, work: () => Promise<T>): Promise<T> {
    const queue = this.#waiting[priority];
    if (this.#running >= CONCURRENT_HASHES && queue.length >= WAITING_MAX) {
      const waitMs = ((queue.length + 1) * this.#hashMs) / CONCURRENT_HASHES;
      const retryAfterSeconds = Math.max(1, Math.ceil(waitMs / 1000));
      this.#onQueueFull(retryAfterSeconds);
      const message = `too many sign-ins are waiting for their password check; try again in ${retryAfterSeconds} s`;
      throw new AppError('rate_limited', message, {}, retryAfterSeconds);
    }
    while (this.#running >= CONCURRENT_HASHES) await new Promise<void>((resolve) => queue.push(resolve));
    this.#running++;
    const startedMs = performance.now();
    try {
      return await work();
    } finally {
      this.#hashMs = 0.8 * this.#hashMs + 0.2 * (performance.now() - startedMs);
      this.#running--;
      (this.#waiting.first.shift() ?? this.#waiting.queued.shift())?.();
    }
  }
}
