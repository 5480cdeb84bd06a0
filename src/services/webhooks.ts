import { type Clock, isoAt } from '../domain/clock.ts';
import { webhookNotFound } from '../domain/error-cases.ts';
import { AppError } from '../domain/errors.ts';
import { type EventKind, type PanelEvent, isEventKind } from '../domain/events.ts';
import type { Page, PageRequest } from '../domain/paging.ts';
import { generateWebhookSecret } from '../domain/webhooks.ts';
import type { Db } from '../store/db.ts';
import type { DeliveryState } from '../store/schema.ts';
import {
  deleteWebhook,
  type DeliveryRow,
  findWebhook,
  insertWebhook,
  listDeliveries,
  listWebhooks,
  updateWebhook,
  type WebhookRow,
  webhookExists,
} from '../store/webhooks.ts';
import { webhookCreated, webhookDeleted, webhookPinged, webhookUpdated } from './change-kinds.ts';
import type { ChangePublisher } from './changes.ts';
import { keptPages } from './row-views.ts';
import { enqueueDelivery, subscribedKinds } from './events.ts';
import { checkWebhookUrl } from './webhook-targets.ts';

/** A webhook as docs/api.md "Webhooks" shows it; `secret` only in the answer that creates it. */
export interface WebhookView {
  id: number;
  url: string;
  events: EventKind[];
  description: string;
  enabled: boolean;
  created_by: string;
  created_at: string;
  updated_at: string;
}

/** A delivery as docs/api.md "Webhooks" shows it. */
export interface DeliveryView {
  id: number;
  webhook_id: number;
  event_id: number;
  kind: string;
  payload: PanelEvent;
  state: DeliveryState;
  attempts: number;
  next_attempt_at: string | null;
  last_attempt_at: string | null;
  response_status: number | null;
  error: string | null;
  duration_ms: number | null;
  created_at: string;
}

export interface WebhookInput {
  url: string;
  events: string[];
  description?: string;
  enabled?: boolean;
}

function eventKinds(events: readonly string[]): EventKind[] {
  const unknown = events.filter((k) => !isEventKind(k) || k === 'ping');
  if (unknown.length > 0) {
    throw new AppError(
      'validation_failed',
      `unknown event kind ${unknown.join(', ')} (ping is always delivered by the ping endpoint)`,
      { events: `unknown: ${unknown.join(', ')}` },
    );
  }
  return [...new Set(events.filter(isEventKind))];
}

/**
 * Webhooks (docs/decisions.md "Webhooks: delivery, signing and retries"): endpoints that receive the events
 * they subscribe to, signed, at least once.
 */
export class WebhookService {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #allowPrivate: boolean;
  readonly #changes: ChangePublisher;

  constructor(db: Db, clock: Clock, allowPrivate: boolean, changes: ChangePublisher) {
    this.#db = db;
    this.#clock = clock;
    this.#allowPrivate = allowPrivate;
    this.#changes = changes;
  }

  view(row: WebhookRow): WebhookView {
    return {
      id: row.id,
      url: row.url,
      events: subscribedKinds(row).filter(isEventKind),
      description: row.description,
      enabled: row.enabled === 1,
      created_by: row.created_by,
      created_at: row.created_at,
      updated_at: row.updated_at,
    };
  }

  /** Pages of deliveries' views, kept per reused rows (listDeliveries): each payload is parsed once. */
  readonly #deliveryPage = keptPages((row: DeliveryRow) => this.deliveryView(row));

  deliveryView(row: DeliveryRow): DeliveryView {
    const payload: PanelEvent = JSON.parse(row.payload);
    return {
      id: row.id,
      webhook_id: row.webhook_id,
      event_id: row.event_id,
      kind: row.kind,
      payload,
      state: row.state,
      attempts: row.attempts,
      next_attempt_at: row.next_attempt_at,
      last_attempt_at: row.last_attempt_at,
      response_status: row.response_status,
      error: row.error,
      duration_ms: row.duration_ms,
      created_at: row.created_at,
    };
  }

  async #get(id: number): Promise<WebhookRow> {
    const row = await findWebhook(this.#db, id);
    if (!row) throw webhookNotFound(id);
    return row;
  }

  async create(input: WebhookInput, actor: string): Promise<WebhookView & { secret: string }> {
    const events = eventKinds(input.events);
    await checkWebhookUrl(input.url, this.#allowPrivate);
    const now = isoAt(this.#clock.nowMs());
    const row = await this.#changes.commit(async (tx) => {
      const created = await insertWebhook(tx, {
        url: input.url,
        events: JSON.stringify(events),
        description: input.description ?? '',
        enabled: (input.enabled ?? true) ? 1 : 0,
        secret: generateWebhookSecret(),
        created_by: actor,
        created_at: now,
        updated_at: now,
      });
      return { result: created, change: webhookCreated(created, actor) };
    });
    return { ...this.view(row), secret: row.secret };
  }

  async get(id: number): Promise<WebhookView> {
    return this.view(await this.#get(id));
  }

  /** Pages of listed webhooks' views, kept per reused rows (listWebhooks). */
  readonly #listedPage = keptPages((row: WebhookRow) => this.view(row));

  async list(page: PageRequest): Promise<Page<WebhookView>> {
    return this.#listedPage(await listWebhooks(this.#db, page), page);
  }

  async update(id: number, patch: Partial<WebhookInput>, actor: string): Promise<WebhookView> {
    await this.#get(id);
    const events = patch.events === undefined ? undefined : eventKinds(patch.events);
    if (patch.url !== undefined) await checkWebhookUrl(patch.url, this.#allowPrivate);
    const row = await this.#changes.commit(async (tx) => {
      const before = await findWebhook(tx, id);
      const after = await updateWebhook(tx, id, {
        url: patch.url,
        events: events === undefined ? undefined : JSON.stringify(events),
        description: patch.description,
        enabled: patch.enabled === undefined ? undefined : patch.enabled ? 1 : 0,
        updated_at: isoAt(this.#clock.nowMs()),
      });
      if (!before || !after) throw webhookNotFound(id);
      return { result: after, change: webhookUpdated(before, after, actor) };
    });
    return this.view(row);
  }

  async delete(id: number, actor: string): Promise<void> {
    await this.#changes.commit(async (tx) => {
      const before = await findWebhook(tx, id);
      if (!before || !(await deleteWebhook(tx, id))) throw webhookNotFound(id);
      return { result: undefined, change: webhookDeleted(before, actor) };
    });
  }

  async deliveries(id: number, state: DeliveryState | undefined, page: PageRequest): Promise<Page<DeliveryView>> {
    if (!(await webhookExists(this.#db, id))) throw webhookNotFound(id);
    return this.#deliveryPage(await listDeliveries(this.#db, id, state, page), page);
  }

  /** A `ping` event sent to this webhook alone, whatever it subscribes to (docs/api.md "Webhooks"). */
  async ping(id: number, actor: string): Promise<DeliveryView> {
    const webhook = await this.#get(id);
    // The hook runs once, in the transaction that records the ping: its delivery is committed with it.
    const sent: DeliveryRow[] = [];
    await this.#changes.commit(
      async () => ({ result: undefined, change: webhookPinged(webhook.id, actor) }),
      async (tx, _none, [event]) => {
        if (event !== undefined) sent.push(await enqueueDelivery(tx, webhook.id, event, event.created_at));
      },
    );
    const [delivery] = sent;
    if (delivery === undefined) throw new Error('a ping recorded gave no delivery');
    return this.deliveryView(delivery);
  }
}
