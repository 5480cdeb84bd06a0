import {
  type Scope,
  apiKeyActor,
  generateApiKey,
  hashApiKey,
  isScope,
  isWellFormedApiKey,
  parseScopes,
} from '../domain/api-keys.ts';
import { type Clock, isoAt } from '../domain/clock.ts';
import { apiKeyMissing, apiKeyNameTaken, apiKeyNotFound, invalidApiKey } from '../domain/error-cases.ts';
import { AppError } from '../domain/errors.ts';
import {
  type ApiKeyRow,
  findApiKeyByHash,
  findLiveApiKeyByName,
  insertApiKey,
  listApiKeys,
  revokeApiKey,
  touchApiKeys,
} from '../store/api-keys.ts';
import type { ChangeWatch } from '../store/change-watch.ts';
import type { Store } from '../store/open.ts';
import { apiKeyCreated, apiKeyRevoked } from './change-kinds.ts';
import { type ChangePublisher, change } from './changes.ts';
import type { ApiKeyPrincipal as Principal } from './principals.ts';

export interface ApiKeyInfo {
  id: number;
  name: string;
  scopes: Scope[];
  rateLimitExempt: boolean;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

export interface CreateApiKeyInput {
  name: string;
  /** `a,b` or `all`. */
  scopes: string;
  rateLimitExempt?: boolean;
}

/** Lets a request with a key not known valid go on to the lookup, or refuses it (throws or rejects). */
type AdmitUnknown<C> = (context: C) => void | Promise<void>;

const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._ -]{0,63}$/;
/** `last_used_at` is written at most this often per key, so authentication stays a read. */
const TOUCH_INTERVAL_MS = 60_000;

function toInfo(row: ApiKeyRow): ApiKeyInfo {
  return {
    id: row.id,
    name: row.name,
    scopes: row.scopes.split(',').filter(isScope),
    rateLimitExempt: row.rate_limit_exempt === 1,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
    revokedAt: row.revoked_at,
  };
}

export class ApiKeyService {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #changes: ChangePublisher;
  readonly #touchedAtMs = new Map<number, number>();
  /**
   * Principals of live keys seen before, by key; emptied whenever another process may have changed a
   * key, so a revoked key stops at the next request. Unknown keys are never kept.
   */
  readonly #known = new Map<string, Principal>();
  /**
   * Admissions and lookups under way, by key: further requests with the same key wait for that one
   * instead of spending the budget and looking the key up again (a client's first burst with a new key).
   */
  readonly #pending = new Map<string, Promise<Principal>>();
  /**
   * Keys found valid at their last lookup. When a change to the keys empties `#known`, these are looked
   * up again without spending `admitUnknown`'s budget, which is for guesses: a valid key keeps working
   * from an address that others flooded with bad keys. A lookup that fails takes a key out.
   */
  readonly #foundValid = new Set<string>();
  #watch: ChangeWatch | undefined;
  /**
   * Counts this process's own revocations, which its watch does not report (SQLite's data_version ignores
   * the connection's own commits; a NOTIFY arrives after the commit): a lookup begun before one is not kept.
   */
  #revocations = 0;

  constructor(store: Store, clock: Clock, changes: ChangePublisher) {
    this.#store = store;
    this.#clock = clock;
    this.#changes = changes;
  }

  get #db() {
    return this.#store.db;
  }

  /** Creates a key; the returned `key` is the only time the secret exists outside the caller. */
  async create(input: CreateApiKeyInput, actor: string): Promise<{ key: string; info: ApiKeyInfo }> {
    const name = input.name.trim();
    if (!NAME_PATTERN.test(name)) {
      throw new AppError(
        'validation_failed',
        'a key name is 1 to 64 letters, digits, spaces, dots, dashes or underscores',
        {
          name: 'invalid',
        },
      );
    }
    const scopes = parseScopes(input.scopes);
    if (await findLiveApiKeyByName(this.#db, name)) throw apiKeyNameTaken(name);
    const key = generateApiKey();
    const row = await this.#changes.commit(async (tx) => {
      await this.#store.announce(tx, 'api_keys');
      const created = await insertApiKey(tx, {
        name,
        keyHash: hashApiKey(key),
        scopes: scopes.join(','),
        rateLimitExempt: input.rateLimitExempt ?? false,
        createdAt: isoAt(this.#clock.nowMs()),
      });
      return { result: created, change: apiKeyCreated(created, actor) };
    });
    return { key, info: toInfo(row) };
  }

  async list(): Promise<ApiKeyInfo[]> {
    return (await listApiKeys(this.#db)).map(toInfo);
  }

  async revoke(idOrName: string, actor: string): Promise<ApiKeyInfo> {
    const row = await this.#changes.commit(async (tx) => {
      await this.#store.announce(tx, 'api_keys');
      const revoked = await revokeApiKey(tx, idOrName, isoAt(this.#clock.nowMs()));
      return { result: revoked, change: revoked ? apiKeyRevoked(revoked, actor) : change({}) };
    });
    if (!row) throw apiKeyNotFound(idOrName);
    this.#forget(row.id);
    return toInfo(row);
  }

  /**
   * The principal for an `Authorization` header value. A key seen before is served from memory until
   * the store's watch reports that another process (the CLI, another panel) changed keys; then every
   * key is looked up again, so a revoked key stops at the next request. The answer comes at once,
   * without a promise, unless the database is needed (a lookup, or last_used_at is due).
   * Anything else (no key, a malformed, unknown or revoked one, or a valid key never found valid by
   * this panel) is first shown to `admitUnknown(context)`, which may refuse it (throw or reject)
   * before any lookup; `context` is passed through rather than closed over, so a known key costs
   * nothing. A refusal is an AppError `rate_limited`.
   */
  authenticate<C>(
    authorization: string | undefined,
    admitUnknown: AdmitUnknown<C>,
    context: C,
  ): Principal | Promise<Principal> {
    if (authorization === undefined) return this.#admitAndLookUp(undefined, admitUnknown, context);
    this.#watch ??= this.#store.watch('api_keys');
    if (this.#watch.changed()) this.#known.clear();
    // The usual header, `Bearer ` and a key known valid (which has no spaces), is what the pattern would take
    // apart: found without running it.
    const usual = authorization.startsWith('Bearer ') ? this.#known.get(authorization.slice(7)) : undefined;
    if (usual !== undefined) return this.#touchDue(usual.keyId) ? this.#touched(usual) : usual;
    const key = /^Bearer +(\S+) *$/i.exec(authorization)?.[1];
    if (key !== undefined) {
      const principal = this.#known.get(key);
      if (principal !== undefined) return this.#touchDue(principal.keyId) ? this.#touched(principal) : principal;
      const pending = this.#pending.get(key);
      // A refusal was of the first request's context (its address); this one is then judged on its own.
      if (pending !== undefined) {
        return pending.catch((error: unknown) => {
          if (!(error instanceof AppError && error.code === 'rate_limited')) throw error;
          return this.#admitAndLookUp(key, admitUnknown, context);
        });
      }
    }
    return this.#admitAndLookUp(key, admitUnknown, context);
  }

  #admitAndLookUp<C>(key: string | undefined, admitUnknown: AdmitUnknown<C>, context: C): Promise<Principal> {
    const admitted = key !== undefined && this.#foundValid.has(key) ? undefined : admitUnknown(context);
    const principal = admitted instanceof Promise ? admitted.then(() => this.#lookUp(key)) : this.#lookUp(key);
    if (key === undefined) return principal;
    this.#pending.set(key, principal);
    const forget = () => {
      if (this.#pending.get(key) === principal) this.#pending.delete(key);
    };
    principal.then(forget, forget);
    return principal;
  }

  async #touched(principal: Principal): Promise<Principal> {
    await this.#touch(principal.keyId);
    return principal;
  }

  async #lookUp(key: string | undefined): Promise<Principal> {
    if (key === undefined) throw apiKeyMissing();
    const revocations = this.#revocations;
    const principal = await this.#principalOf(key).catch((error: unknown) => {
      // Only a refusal unmarks the key: a lookup the database could not answer (an outage) says nothing of it,
      // and unmarked it would be held to the unknown callers' budget (429) until the database is back.
      if (error instanceof AppError) this.#foundValid.delete(key);
      throw error;
    });
    if (revocations !== this.#revocations) {
      // A key revoked here during the lookup may be this one: looked up again at its next request.
      this.#foundValid.delete(key);
      return principal;
    }
    this.#known.set(key, principal);
    this.#foundValid.add(key);
    await this.#touch(principal.keyId);
    return principal;
  }

  /** Looks a key up in the database; only keys that exist and are live become principals (and are kept). */
  async #principalOf(key: string): Promise<Principal> {
    if (!isWellFormedApiKey(key)) throw invalidApiKey();
    const row = await findApiKeyByHash(this.#db, hashApiKey(key));
    if (!row || row.revoked_at !== null) throw invalidApiKey();
    const info = toInfo(row);
    return {
      kind: 'api_key',
      keyId: info.id,
      name: info.name,
      scopes: new Set(info.scopes),
      actor: apiKeyActor(info.name),
      rateLimitExempt: info.rateLimitExempt,
      rateLimitId: row.key_hash.slice(0, 32),
    };
  }

  /** Drops a key revoked here from memory, so its next request is refused even before any watch reports it. */
  #forget(keyId: number): void {
    this.#revocations++;
    for (const [key, principal] of this.#known) {
      if (principal.keyId !== keyId) continue;
      this.#known.delete(key);
      this.#foundValid.delete(key);
    }
  }

  #touchDue(keyId: number): boolean {
    return this.#clock.nowMs() - (this.#touchedAtMs.get(keyId) ?? 0) >= TOUCH_INTERVAL_MS;
  }

  async #touch(keyId: number): Promise<void> {
    if (!this.#touchDue(keyId)) return;
    const nowMs = this.#clock.nowMs();
    this.#touchedAtMs.set(keyId, nowMs);
    await touchApiKeys(this.#db, [keyId], isoAt(nowMs));
  }
}
