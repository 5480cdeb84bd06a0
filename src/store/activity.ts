import type { Insertable } from 'kysely';
import { type ActivityEntry, type ActivityResource, type FieldValues, isActivityResource } from '../domain/activity.ts';
import type { PageRequest } from '../domain/paging.ts';
import type { Queryable } from './db.ts';
import { type Column, insertRows } from './raw-sql.ts';
import { rowLimit } from './query-shapes.ts';
import type { ActivityTable } from './schema.ts';

/** The columns of an activity row, as insertRows writes them. */
const ACTIVITY_COLUMNS: readonly Column<Insertable<ActivityTable>>[] = [
  { name: 'created_at', type: 'text', of: (a) => a.created_at },
  { name: 'actor', type: 'text', of: (a) => a.actor },
  { name: 'request_id', type: 'text', of: (a) => a.request_id ?? null },
  { name: 'action', type: 'text', of: (a) => a.action },
  { name: 'resource', type: 'text', of: (a) => a.resource },
  { name: 'resource_id', type: 'text', of: (a) => a.resource_id },
  { name: 'summary', type: 'text', of: (a) => a.summary },
  { name: 'before', type: 'text', of: (a) => a.before ?? null },
  { name: 'after', type: 'text', of: (a) => a.after ?? null },
];

/** Inserts the entries in order, a thousand per statement. */
export async function insertActivities(db: Queryable, entries: readonly Insertable<ActivityTable>[]): Promise<void> {
  await insertRows(db, 'activity', entries, ACTIVITY_COLUMNS);
}

export interface ActivityFilter {
  actor?: string;
  /** Only entries about these kinds of resource (none: no entry); undefined: every kind. */
  resources?: readonly ActivityResource[];
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

/**
 * Oldest first, `limit + 1` rows (see toPage). The resources are filtered in the query, before its LIMIT, so
 * a page a reader may not see all of is still full.
 */
export async function listActivity(db: Queryable, filter: ActivityFilter, page: PageRequest): Promise<ActivityEntry[]> {
  if (filter.resources?.length === 0) return [];
  let query = db.selectFrom('activity').selectAll().where('id', '>', page.afterId);
  if (filter.actor !== undefined) query = query.where('actor', '=', filter.actor);
  if (filter.resources !== undefined) query = query.where('resource', 'in', filter.resources);
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
