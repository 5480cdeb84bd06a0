import type { Insertable } from 'kysely';
import { type ActivityEntry, type FieldValues, isActivityResource } from '../domain/activity.ts';
import type { PageRequest } from '../domain/paging.ts';
import type { Queryable } from './db.ts';
import { INSERT_CHUNK_ROWS } from './events.ts';
import { rowLimit } from './query-shapes.ts';
import type { ActivityTable } from './schema.ts';

/** Inserts the entries in order, a few hundred per statement. */
export async function insertActivities(db: Queryable, entries: readonly Insertable<ActivityTable>[]): Promise<void> {
  for (let i = 0; i < entries.length; i += INSERT_CHUNK_ROWS) {
    await db
      .insertInto('activity')
      .values(entries.slice(i, i + INSERT_CHUNK_ROWS))
      .execute();
  }
}

export interface ActivityFilter {
  actor?: string;
  resource?: string;
  resourceId?: string;
  /** Only entries made at or after this instant (ISO, UTC). */
  sinceIso?: string;
}

function fields(text: string | null): FieldValues | null {
  if (text === null) return null;
  const value: unknown = JSON.parse(text);
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? Object.fromEntries(Object.entries(value))
    : null;
}

/** Oldest first, `limit + 1` rows (see toPage). */
export async function listActivity(db: Queryable, filter: ActivityFilter, page: PageRequest): Promise<ActivityEntry[]> {
  let query = db.selectFrom('activity').selectAll().where('id', '>', page.afterId);
  if (filter.actor !== undefined) query = query.where('actor', '=', filter.actor);
  if (filter.resource !== undefined) query = query.where('resource', '=', filter.resource);
  if (filter.resourceId !== undefined) query = query.where('resource_id', '=', filter.resourceId);
  if (filter.sinceIso !== undefined) query = query.where('created_at', '>=', filter.sinceIso);
  const rows = await query
    .orderBy('id')
    .limit(rowLimit(page.limit + 1))
    .execute();
  return rows.flatMap((row) =>
    isActivityResource(row.resource)
      ? [{ ...row, resource: row.resource, before: fields(row.before), after: fields(row.after) }]
      : [],
  );
}

export async function pruneActivity(db: Queryable, before: string): Promise<number> {
  const result = await db.deleteFrom('activity').where('created_at', '<', before).executeTakeFirst();
  return Number(result.numDeletedRows);
}
