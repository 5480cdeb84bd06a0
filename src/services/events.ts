import { type Clock, isoAt } from '../domain/clock.ts';
import type { EventDraft, EventKind, PanelEvent } from '../domain/events.ts';
import type { DeviceRow } from '../store/devices.ts';
import type { NodeRow } from '../store/nodes.ts';
import type { ServerRow } from '../store/servers.ts';
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

/** An event about a device, with its server and node filled in. */
export function recordDeviceEvent(
  tx: Tx,
  clock: Clock,
  kind: EventKind,
  row: DeviceRow,
  server: Pick<ServerRow, 'id' | 'name' | 'country'>,
  node: Pick<NodeRow, 'name'>,
  actor: string,
  detail: string,
): Promise<number> {
  return recordEvent(tx, clock, eventDraft({
    kind, device_id: row.id, device_name: row.name, server_id: server.id, server_name: server.name, node_name: node.name, ip: row.address, country: server.country, detail, actor,
  }));
}
