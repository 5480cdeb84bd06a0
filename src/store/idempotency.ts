import type { Selectable } from 'kysely';
import type { Queryable } from './db.ts';
import type { IdempotencyKeyTable } from './schema.ts';

export type IdempotencyRow = Selectable<IdempotencyKeyTable>;

export interface IdempotencyId {
  apiKeyId: number;
  key: string;
}

/** Records a request as running under the key; false when a row for the key is already there. */
export async function claimIdempotencyKey(
  db: Queryable,
  id: IdempotencyId,
  fingerprint: string,
  now: string,
): Promise<boolean> {
  const result = await db
    .insertInto('idempotency_keys')
    .values({ api_key_id: id.apiKeyId, idempotency_key: id.key, fingerprint, state: 'running', created_at: now })
    .onConflict((oc) => oc.columns(['api_key_id', 'idempotency_key']).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
}

export function findIdempotencyKey(db: Queryable, id: IdempotencyId): Promise<IdempotencyRow | undefined> {
  return db
    .selectFrom('idempotency_keys')
    .selectAll()
    .where('api_key_id', '=', id.apiKeyId)
    .where('idempotency_key', '=', id.key)
    .executeTakeFirst();
}

export async function completeIdempotencyKey(
  db: Queryable,
  id: IdempotencyId,
  statusCode: number,
  body: string,
): Promise<void> {
  await db
    .updateTable('idempotency_keys')
    .set({ state: 'done', status_code: statusCode, response_body: body })
    .where('api_key_id', '=', id.apiKeyId)
    .where('idempotency_key', '=', id.key)
    .execute();
}

/** Forgets the key: the request it guarded failed on the server's side and may be sent again. */
export async function releaseIdempotencyKey(db: Queryable, id: IdempotencyId): Promise<void> {
  await db
    .deleteFrom('idempotency_keys')
    .where('api_key_id', '=', id.apiKeyId)
    .where('idempotency_key', '=', id.key)
    .execute();
}

/** Deletes one stale row (older than `before`), so a new request may claim its key. */
export async function deleteIdempotencyKeyIfOlder(db: Queryable, id: IdempotencyId, before: string): Promise<void> {
  await db
    .deleteFrom('idempotency_keys')
    .where('api_key_id', '=', id.apiKeyId)
    .where('idempotency_key', '=', id.key)
    .where('created_at', '<', before)
    .execute();
}

export async function pruneIdempotencyKeys(db: Queryable, before: string): Promise<number> {
  const result = await db.deleteFrom('idempotency_keys').where('created_at', '<', before).executeTakeFirst();
  return Number(result.numDeletedRows);
}
