import type { ExpressionBuilder, Selectable } from 'kysely';
import type { Queryable } from './db.ts';
import type { Database, IdempotencyKeyTable } from './schema.ts';

export type IdempotencyRow = Selectable<IdempotencyKeyTable>;

/** Whose keys: an API key's or a console user's; the two never share a namespace (migration 030). */
export type IdempotencyOwner = { apiKeyId: number } | { consoleUserId: number };

export type IdempotencyId = IdempotencyOwner & { key: string };

/** The owner's column, the other one null: each owner has a unique index on (its column, idempotency_key). */
function ownerColumn(owner: IdempotencyOwner): 'api_key_id' | 'console_user_id' {
  return 'apiKeyId' in owner ? 'api_key_id' : 'console_user_id';
}

function ownerValue(owner: IdempotencyOwner): number {
  return 'apiKeyId' in owner ? owner.apiKeyId : owner.consoleUserId;
}

/** The key's one row under its owner. */
function isKey(id: IdempotencyId) {
  return (eb: ExpressionBuilder<Database, 'idempotency_keys'>) =>
    eb.and([eb(ownerColumn(id), '=', ownerValue(id)), eb('idempotency_key', '=', id.key)]);
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
    .values({
      api_key_id: 'apiKeyId' in id ? id.apiKeyId : null,
      console_user_id: 'consoleUserId' in id ? id.consoleUserId : null,
      idempotency_key: id.key,
      fingerprint,
      state: 'running',
      created_at: now,
    })
    .onConflict((oc) => oc.columns([ownerColumn(id), 'idempotency_key']).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
}

export function findIdempotencyKey(db: Queryable, id: IdempotencyId): Promise<IdempotencyRow | undefined> {
  return db.selectFrom('idempotency_keys').selectAll().where(isKey(id)).executeTakeFirst();
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
    .where(isKey(id))
    .execute();
}

/** Forgets the key: the request it guarded failed on the server's side and may be sent again. */
export async function releaseIdempotencyKey(db: Queryable, id: IdempotencyId): Promise<void> {
  await db.deleteFrom('idempotency_keys').where(isKey(id)).execute();
}

/** Deletes one stale row (older than `before`), so a new request may claim its key. */
export async function deleteIdempotencyKeyIfOlder(db: Queryable, id: IdempotencyId, before: string): Promise<void> {
  await db.deleteFrom('idempotency_keys').where(isKey(id)).where('created_at', '<', before).execute();
}

export async function pruneIdempotencyKeys(db: Queryable, before: string): Promise<number> {
  const result = await db.deleteFrom('idempotency_keys').where('created_at', '<', before).executeTakeFirst();
  return Number(result.numDeletedRows);
}
