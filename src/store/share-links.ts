import type { Selectable } from 'kysely';
import type { Queryable } from './db.ts';
import type { ShareLinkTable } from './schema.ts';

export type ShareLinkRow = Selectable<ShareLinkTable>;

/** Makes the device's link, replacing any earlier one (whose token then stops working). */
export async function replaceShareLink(db: Queryable, link: ShareLinkRow): Promise<void> {
  await db.deleteFrom('share_links').where('device_id', '=', link.device_id).execute();
  await db.insertInto('share_links').values(link).execute();
}

export function findShareLinkOfDevice(db: Queryable, deviceId: number): Promise<ShareLinkRow | undefined> {
  return db.selectFrom('share_links').selectAll().where('device_id', '=', deviceId).executeTakeFirst();
}

/** The link whose token has this SHA-256 (hashShareToken); the token itself is never compared. */
export function findShareLinkByTokenHash(db: Queryable, tokenHash: string): Promise<ShareLinkRow | undefined> {
  return db.selectFrom('share_links').selectAll().where('token_hash', '=', tokenHash).executeTakeFirst();
}

/** True when a link was there to delete. */
export async function deleteShareLink(db: Queryable, deviceId: number): Promise<boolean> {
  const result = await db.deleteFrom('share_links').where('device_id', '=', deviceId).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}
