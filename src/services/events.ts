import { type Clock, isoAt } from '../domain/clock.ts';
import type { EventDraft, EventKind, PanelEvent } from '../domain/events.ts';
import type { DeviceRow } from '../store/devices.ts';
import type { NodeRow } from '../store/nodes.ts';
import type { ServerRow } from '../store/servers.ts';
import { type Page, type PageRequest, toPage } from '../domain/paging.ts';
import type { Db, Tx } from '../store/db.ts';
import { type EventFilter, insertEvents, listEvents, listEventsOfKinds } from '../store/events.ts';
import {
  type DeliveryRow,
  insertDeliveries,
  insertDelivery,
  listEnabledWebhooks,
  type WebhookRow,
} from '../store/webhooks.ts';
import type { WebhookDeliveryTable } from '../store/schema.ts';
import type { Insertable } from 'kysely';
import { notifyEvent } from './notifications.ts';
import { keptPages } from './row-views.ts';

/**
 * Records events inside the transaction of the change that causes them (`recordChange`, the publisher's), each
 * with one outbox delivery for every enabled webhook subscribed to its kind and the notification mail it calls
 * for: the change, the events, their deliveries and their mail all land, or none do. Set statements: the events
 * a few hundred a statement, the webhooks read once, every event's deliveries inserted together (a webhook's in
 * event order), then each event's mail.
 */
export async function recordEvents(tx: Tx, clock: Clock, drafts: readonly EventDraft[]): Promise<PanelEvent[]> {
  if (drafts.length === 0) return [];
  const createdAt = isoAt(clock.nowMs());
  const ids = await insertEvents(tx, drafts, createdAt);
  const events = drafts.map((draft, i): PanelEvent => ({ id: ids[i] ?? 0, created_at: createdAt, ...draft }));
  const deliveries: Insertable<WebhookDeliveryTable>[] = [];
  for (const webhook of await listEnabledWebhooks(tx)) {
    const kinds = subscribedKinds(webhook);
    for (const event of events) if (kinds.includes(event.kind)) deliveries.push(delivery(webhook.id, event, createdAt));
  }
  await insertDeliveries(tx, deliveries);
  for (const event of events) await notifyEvent(tx, clock, event);
  return events;
}

/** A webhook's subscriptions as stored. */
export function subscribedKinds(webhook: Pick<WebhookRow, 'events'>): string[] {
  const value: unknown = JSON.parse(webhook.events);
  return Array.isArray(value) ? value.filter((k): k is string => typeof k === 'string') : [];
}

/** One delivery of the event to the webhook, due now. */
export function enqueueDelivery(tx: Tx, webhookId: number, event: PanelEvent, nowIso: string): Promise<DeliveryRow> {
  return insertDelivery(tx, delivery(webhookId, event, nowIso));
}

/** The row of one delivery of the event to the webhook, due now; its message id stays the same on every retry. */
function delivery(webhookId: number, event: PanelEvent, nowIso: string): Insertable<WebhookDeliveryTable> {
  return {
    webhook_id: webhookId,
    event_id: event.id,
    kind: event.kind,
    device_id: event.device_id,
    payload: JSON.stringify(event),
    message_id: `msg_${event.id}_${webhookId}`,
    state: 'pending',
    attempts: 0,
    next_attempt_at: nowIso,
    last_attempt_at: null,
    response_status: null,
    error: null,
    duration_ms: null,
    locked_until: null,
    created_at: nowIso,
  };
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

/** The event feed as clients read it (GET /events). */
export class EventService {
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
  }

  /** Pages of events, kept per reused rows (listEvents). */
  readonly #pageOf = keptPages((event: PanelEvent) => event);

  /** Events matching the filter after the cursor, oldest first. */
  async page(filter: EventFilter, page: PageRequest): Promise<Page<PanelEvent>> {
    const { kinds } = filter;
    if (kinds !== undefined && kinds.length > 0) {
      return toPage(await listEventsOfKinds(this.#db, { ...filter, kinds }, page), page);
    }
    return this.#pageOf(await listEvents(this.#db, filter, page), page);
  }
}

/** An event about a device, with its server and node filled in. */
export function deviceEventDraft(
  kind: EventKind,
  row: DeviceRow,
  server: Pick<ServerRow, 'id' | 'name' | 'country'>,
  node: Pick<NodeRow, 'name'>,
  actor: string,
  detail: string,
): EventDraft {
  return eventDraft({
    kind,
    device_id: row.id,
    device_name: row.name,
    server_id: server.id,
    server_name: server.name,
    node_name: node.name,
    ip: row.address,
    country: server.country,
    detail,
    actor,
  });
}

/** An event about a server, with its node filled in; `ip` is the server's endpoint. */
export function serverEventDraft(
  kind: EventKind,
  server: Pick<ServerRow, 'id' | 'name' | 'endpoint' | 'country'>,
  node: Pick<NodeRow, 'name'>,
  actor: string,
  detail: string,
): EventDraft {
  return eventDraft({
    kind,
    server_id: server.id,
    server_name: server.name,
    node_name: node.name,
    ip: server.endpoint,
    country: server.country,
    detail,
    actor,
  });
}
