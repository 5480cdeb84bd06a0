import type { EventDraft, EventKind, PanelEvent } from '../domain/events.ts';
import { isEventKind } from '../domain/events.ts';
import { ReusedPageShape, type ReusedRows, rowLimit } from './query-shapes.ts';
import type { Db, Queryable } from './db.ts';
import { type Column, insertRows } from './raw-sql.ts';
import type { PageRequest } from '../domain/paging.ts';

/** The columns of an event row, as insertRows writes them. */
const EVENT_COLUMNS: readonly Column<EventDraft & { created_at: string }>[] = [
  { name: 'kind', type: 'text', of: (e) => e.kind },
  { name: 'created_at', type: 'text', of: (e) => e.created_at },
  { name: 'server_id', type: 'bigint', of: (e) => e.server_id },
  { name: 'server_name', type: 'text', of: (e) => e.server_name },
  { name: 'device_id', type: 'bigint', of: (e) => e.device_id },
  { name: 'device_name', type: 'text', of: (e) => e.device_name },
  { name: 'node_name', type: 'text', of: (e) => e.node_name },
  { name: 'ip', type: 'text', of: (e) => e.ip },
  { name: 'country', type: 'text', of: (e) => e.country },
  { name: 'detail', type: 'text', of: (e) => e.detail },
  { name: 'actor', type: 'text', of: (e) => e.actor },
];

/** Inserts the events in order, a thousand per statement, and gives their ids in the same order. */
export function insertEvents(db: Queryable, drafts: readonly EventDraft[], createdAt: string): Promise<number[]> {
  return insertRows(
    db,
    'events',
    drafts.map((draft) => ({ ...draft, created_at: createdAt })),
    EVENT_COLUMNS,
  );
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

/** Without a kind filter (a list of any length changes the SQL), pages are a query shape whose rows are reused. */
const eventPageShape = new ReusedPageShape(
  (db, limit, afterId: number, serverId: number | undefined, deviceId: number | undefined) =>
    eventsAfter(db, afterId, { serverId, deviceId }).limit(limit),
  [-1001, -1002, -1003],
);

/** A row whose kind is one the panel knows, as the row itself (not a copy: reused rows stay the same objects). */
function hasEventKind<R extends { kind: string }>(row: R): row is R & { kind: EventKind } {
  return isEventKind(row.kind);
}

/** Events of every kind this panel knows, oldest first, `limit + 1` rows (see toPage). */
export async function listEvents(
  db: Db,
  filter: Omit<EventFilter, 'kinds'>,
  page: PageRequest,
): Promise<ReusedRows<PanelEvent>> {
  const rows = await eventPageShape.execute(db, page.limit + 1, page.afterId, filter.serverId, filter.deviceId);
  // Without a row of a kind this panel does not know (the usual case), the reused rows are answered as they are,
  // so the page made of them is kept too (keptPages).
  return rows.every(hasEventKind) ? rows : rows.filter(hasEventKind);
}

/** listEvents of the filter's kinds only, read anew every time. */
export async function listEventsOfKinds(
  db: Db,
  filter: EventFilter & { kinds: readonly EventKind[] },
  page: PageRequest,
): Promise<PanelEvent[]> {
  const rows = await eventsAfter(db, page.afterId, filter)
    .limit(rowLimit(page.limit + 1))
    .execute();
  return rows.filter(hasEventKind);
}

export async function pruneEvents(db: Queryable, before: string): Promise<number> {
  const result = await db.deleteFrom('events').where('created_at', '<', before).executeTakeFirst();
  return Number(result.numDeletedRows);
}
