import { type Clock, isoAt } from '../domain/clock.ts';
import { idempotencyKeyInUse, idempotencyKeyReused } from '../domain/error-cases.ts';
import { AppError } from '../domain/errors.ts';
import { IDEMPOTENCY_TTL_MS } from '../domain/idempotency.ts';
import type { Db, Queryable } from '../store/db.ts';
import {
  type IdempotencyId,
  type IdempotencyOwner,
  claimIdempotencyKey,
  completeIdempotencyKey,
  deleteIdempotencyKeyIfOlder,
  findIdempotencyKey,
  releaseIdempotencyKey,
} from '../store/idempotency.ts';

const MAX_KEY_LENGTH = 255;
/** A request still `running` after this long died with its process; its key may be claimed again. */
const ABANDONED_AFTER_MS = 10 * 60 * 1000;

/** The request holds its Idempotency-Key; its reply is stored once, with the change or after it. */
export class IdempotencyClaim {
  readonly id: IdempotencyId;
  #stored = false;

  constructor(id: IdempotencyId) {
    this.id = id;
  }

  get stored(): boolean {
    return this.#stored;
  }

  /**
   * Stores the reply inside the transaction that makes the change, so a crash can never leave a
   * change without its reply (which would run it again on retry) or a reply without its change.
   */
  async storeReply(tx: Queryable, statusCode: number, body: unknown): Promise<void> {
    await completeIdempotencyKey(tx, this.id, statusCode, JSON.stringify(body));
    this.#stored = true;
  }
}

export type Begin =
  | { kind: 'claimed'; claim: IdempotencyClaim }
  | { kind: 'replay'; statusCode: number; body: unknown };

/**
 * docs/api.md "Idempotency": a request under an Idempotency-Key runs once; a retry with the same request gets
 * the stored reply, one with another request is refused. `fingerprint` identifies the request (src/http makes it).
 */
export class IdempotencyService {
  readonly #db: Db;
  readonly #clock: Clock;

  constructor(db: Db, clock: Clock) {
    this.#db = db;
    this.#clock = clock;
  }

  /** `owner`'s keys only: another API key's or console user's same key is another request. */
  async begin(owner: IdempotencyOwner, key: string, fingerprint: string): Promise<Begin> {
    if (key.length === 0 || key.length > MAX_KEY_LENGTH) {
      throw new AppError('bad_request', `Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} characters`, {
        'Idempotency-Key': `1 to ${MAX_KEY_LENGTH} characters`,
      });
    }
    const id: IdempotencyId = { ...owner, key };
    // Two rounds at most: the second follows the removal of an expired or abandoned row.
    for (let round = 0; round < 2; round++) {
      const nowMs = this.#clock.nowMs();
      if (await claimIdempotencyKey(this.#db, id, fingerprint, isoAt(nowMs))) {
        return { kind: 'claimed', claim: new IdempotencyClaim(id) };
      }
      const row = await findIdempotencyKey(this.#db, id);
      if (!row) continue;
      const ageMs = nowMs - Date.parse(row.created_at);
      if (ageMs >= IDEMPOTENCY_TTL_MS || (row.state === 'running' && ageMs >= ABANDONED_AFTER_MS)) {
        await deleteIdempotencyKeyIfOlder(this.#db, id, isoAt(Date.parse(row.created_at) + 1));
        continue;
      }
      if (row.fingerprint !== fingerprint) {
        throw idempotencyKeyReused();
      }
      if (row.state === 'running' || row.status_code === null || row.response_body === null) {
        throw idempotencyKeyInUse();
      }
      return { kind: 'replay', statusCode: row.status_code, body: JSON.parse(row.response_body) };
    }
    throw idempotencyKeyInUse();
  }

  /** After the reply: keep it for replays, or forget the key when the server failed (5xx). */
  async finish(claim: IdempotencyClaim, statusCode: number, payload: string): Promise<void> {
    if (statusCode >= 500) await releaseIdempotencyKey(this.#db, claim.id);
    else if (!claim.stored) await completeIdempotencyKey(this.#db, claim.id, statusCode, payload);
  }
}
