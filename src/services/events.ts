import { type Clock, isoAt } from '../domain/clock.ts';
import type { EventDraft, PanelEvent } from '../domain/events.ts';
import { type Page, type PageRequest, toPage } from '../domain/paging.ts';
import type { Queryable, Tx } from '../store/db.ts';
import { type EventFilter, insertEvent, listEvents } from '../store/events.ts';

/** Records an event inside the transaction of the change that causes it, so neither exists without the other. */
export function recordEvent(tx: Tx, clock: Clock, draft: EventDraft): Promise<number> {
  return insertEvent(tx, draft, isoAt(clock.nowMs()));
}

/** An event draft with every optional field empty. */
export function eventDraft(fields: Pick<EventDraft, 'kind' | 'detail' | 'actor'> & Partial<EventDraft>): EventDraft {
  return {
    server_id: null,
    server_name: null,
    device_id: null,
    device_name: null,
    node_name: null,
    ip: null,
    country: null,
    ...fields,
  };
}

/** Events matching the filter after the cursor, oldest first. */
export async function eventPage(db: Queryable, filter: EventFilter, page: PageRequest): Promise<Page<PanelEvent>> {
  return toPage(await listEvents(db, filter, page), page);
}
