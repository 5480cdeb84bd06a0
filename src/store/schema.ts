import type { Generated } from 'kysely';

/**
 * Table shapes as both databases hold them. Times are ISO-8601 UTC text (they sort as they compare),
 * booleans are integers 0/1, JSON is text: the same values on SQLite and PostgreSQL.
 */
export interface ApiKeyTable {
  id: Generated<number>;
  name: string;
  key_hash: string;
  /** Comma-separated scopes of spec §5. */
  scopes: string;
  /** 1 exempts the key from the request rate limit (benchmarks, trusted internal callers). */
  rate_limit_exempt: number;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

export interface IdempotencyKeyTable {
  api_key_id: number;
  idempotency_key: string;
  /** SHA-256 of method, route, path parameters and body: the same key with another request is refused. */
  fingerprint: string;
  state: 'running' | 'done';
  status_code: number | null;
  response_body: string | null;
  created_at: string;
}

export interface Database {
  api_keys: ApiKeyTable;
  idempotency_keys: IdempotencyKeyTable;
}
