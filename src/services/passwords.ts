import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
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
  readonly #waiting: (() => void)[] = [];
  /**
   * What a sign-in of an unknown user is checked against: a hash no password matches, with the current
   * parameters, so that it takes as long as a known user's and the answer's time does not tell them apart.
   */
  readonly #nobody = formatPasswordHash({
    params: SCRYPT_PARAMS,
    salt: randomBytes(SALT_BYTES),
    key: randomBytes(KEY_BYTES),
  });

  async hash(password: string): Promise<string> {
    const salt = randomBytes(SALT_BYTES);
    const key = await this.#limited(() => derive(password, salt, SCRYPT_PARAMS, KEY_BYTES));
    return formatPasswordHash({ params: SCRYPT_PARAMS, salt, key });
  }

  /** True when `password` is the one `stored` was made from; `stored` undefined (no such user) is never matched. */
  async verify(password: string, stored: string | undefined): Promise<boolean> {
    const hash = parsePasswordHash(stored ?? this.#nobody);
    if (hash === undefined) throw new Error('a console user has a password hash this version cannot read');
    const key = await this.#limited(() => derive(password, hash.salt, hash.params, hash.key.length));
    return timingSafeEqual(key, hash.key) && stored !== undefined;
  }

  async #limited<T>(work: () => Promise<T>): Promise<T> {
    while (this.#running >= CONCURRENT_HASHES) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    this.#running++;
    try {
      return await work();
    } finally {
      this.#running--;
      this.#waiting.shift()?.();
    }
  }
}
