import type { Queryable } from './db.ts';
import type { ApiKeyTable } from './schema.ts';
import type { Selectable } from 'kysely';

export type ApiKeyRow = Selectable<ApiKeyTable>;

export interface NewApiKey {
  name: string;
  keyHash: string;
  scopes: string;
  rateLimitExempt: boolean;
  createdAt: string;
}

export async function insertApiKey(db: Queryable, key: NewApiKey): Promise<ApiKeyRow> {
  return db
    .insertInto('api_keys')
    .values({
      name: key.name,
      key_hash: key.keyHash,
      scopes: key.scopes,
      rate_limit_exempt: key.rateLimitExempt ? 1 : 0,
      created_at: key.createdAt,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export function findLiveApiKeyByName(db: Queryable, name: string): Promise<ApiKeyRow | undefined> {
  return db
    .selectFrom('api_keys')
    .selectAll()
    .where('name', '=', name)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
}

/** The key with this hash, revoked or not: the caller decides what a revoked key means. */
export function findApiKeyByHash(db: Queryable, keyHash: string): Promise<ApiKeyRow | undefined> {
  return db.selectFrom('api_keys').selectAll().where('key_hash', '=', keyHash).executeTakeFirst();
}

export function listApiKeys(db: Queryable): Promise<ApiKeyRow[]> {
  return db.selectFrom('api_keys').selectAll().orderBy('id').execute();
}

/** Revokes the live key with this id or name; returns it, or undefined when there is none. */
export async function revokeApiKey(db: Queryable, idOrName: string, revokedAt: string): Promise<ApiKeyRow | undefined> {
  const id = /^[1-9][0-9]*$/.test(idOrName) ? Number(idOrName) : undefined;
  return db
    .updateTable('api_keys')
    .set({ revoked_at: revokedAt })
    .where('revoked_at', 'is', null)
    .where((eb) =>
      id === undefined ? eb('name', '=', idOrName) : eb.or([eb('id', '=', id), eb('name', '=', idOrName)]),
    )
    .returningAll()
    .executeTakeFirst();
}

export async function touchApiKeys(db: Queryable, ids: number[], usedAt: string): Promise<void> {
  if (ids.length === 0) return;
  await db.updateTable('api_keys').set({ last_used_at: usedAt }).where('id', 'in', ids).execute();
}
