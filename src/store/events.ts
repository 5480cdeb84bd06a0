import type { EventDraft, EventKind, PanelEvent } from '../domain/events.ts';
import { isEventKind } from '../domain/events.ts';
import { CompiledPageShape, rowLimit } from './query-shapes.ts';
import type { Db, Queryable } from './db.ts';
import type { PageRequest } from '../domain/paging.ts';

/** Rows per insert statement of a bulk insert: a dozen values each, well below either database's limit. */
export const INSERT_CHUNK_ROWS = 500;

/**
 * Inserts the events in order, a few hundred per statement, and gives their ids in the same order (ids
 * rise in the order of a statement's rows on both databases, so the ids returned are sorted to match).
 */
export async function insertEvents(db: Queryable, drafts: readonly EventDraft[], createdAt: string): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < drafts.length; i += INSERT_CHUNK_ROWS) {
    const values = drafts.slice(i, i + INSERT_CHUNK_ROWS).map((draft) => ({ ...draft, created_at: createdAt }));
    const rows = await db.insertInto('events').values(values).returning('id').execute();
    ids.push(...rows.map((r) => Number(r.id)).sort((a, b) => a - b));
  }
  return ids;
}

export interface EventFilter {
  serverId?: number;
  deviceId?: number;
  kinds?: readonly EventKind[];
}

function eventsAfter(db: Db, afterId: number, filter: EventFilter) {
  let query = db.selectFrom('events').selectAll().where('id', '>', afterId);
  if (filter.serverId !== undefined) query = query.where('server_id', '=', filter.serverId);
  if (filter.deviceId !== undefined) query = query.where('device_id', '=', filter.deviceId);
  if (filter.kinds !== undefined && filter.kinds.length > 0) query = query.where('kind', 'in', filter.kinds);
  return query.orderBy('id');
}

/** Without a kind filter (a list of any length changes the SQL), pages are a compiled shape. */
const eventPageShape = new CompiledPageShape(
  (db, limit, afterId: number, serverId: number | undefined, deviceId: number | undefined) =>
    eventsAfter(db, afterId, { serverId, deviceId }).limit(limit),
  [-1001, -1002, -1003],
  { reuse: true },
);

/** Oldest first, `limit + 1` rows (see toPage). */
/** A row whose kind is one the panel knows, as the row itself (not a copy: reused rows stay the same objects). */
function hasEventKind<R extends { kind: string }>(row: R): row is R & { kind: EventKind } {
  return isEventKind(row.kind);
}

export async function listEvents(db: Db, filter: EventFilter, page: PageRequest): Promise<readonly PanelEvent[]> {
  const rows =
    filter.kinds === undefined || filter.kinds.length === 0
      ? await eventPageShape.execute(db, page.limit + 1, page.afterId, filter.serverId, filter.deviceId)
      : await eventsAfter(db, page.afterId, filter)
          .limit(rowLimit(page.limit + 1))
          .execute();
  return rows.filter(hasEventKind);
}

export async function pruneEvents(db: Queryable, before: string): Promise<number> {
  const result = await db.deleteFrom('events').where('created_at', '<', before).executeTakeFirst();
  return Number(result.numDeletedRows);
}
