import type { Insertable, Selectable, Updateable } from 'kysely';
import type { PageRequest } from '../domain/paging.ts';
import { ReusedPageShape, type ReusedRows, ReusedShape, rowLimit } from './query-shapes.ts';
import type { Db, Queryable } from './db.ts';
import { type Column, insertRows } from './raw-sql.ts';
import { unheld } from './outbox.ts';
import type { DeliveryState, WebhookDeliveryTable, WebhookTable } from './schema.ts';

export type WebhookRow = Selectable<WebhookTable>;
export type DeliveryRow = Selectable<WebhookDeliveryTable>;

export async function insertWebhook(db: Queryable, webhook: Insertable<WebhookTable>): Promise<WebhookRow> {
  return db.insertInto('webhooks').values(webhook).returningAll().executeTakeFirstOrThrow();
}

export function findWebhook(db: Queryable, id: number): Promise<WebhookRow | undefined> {
  return db.selectFrom('webhooks').selectAll().where('id', '=', id).executeTakeFirst();
}

// A page of deliveries checks its webhook on every request: its id alone (no secret to open), reused while
// nothing is committed.
const webhookIdById = new ReusedShape(
  (db, id: number) => db.selectFrom('webhooks').select('id').where('id', '=', id),
  [-1001],
);

export async function webhookExists(db: Db, id: number): Promise<boolean> {
  return (await webhookIdById.execute(db, id)).rows.length > 0;
}

const webhookPage = new ReusedPageShape(
  (db, limit, afterId: number) =>
    db.selectFrom('webhooks').selectAll().where('id', '>', afterId).orderBy('id').limit(limit),
  [-1001],
);

/** Oldest first, `limit + 1` rows (see toPage). */
export function listWebhooks(db: Db, page: PageRequest): Promise<ReusedRows<WebhookRow>> {
  return webhookPage.execute(db, page.limit + 1, page.afterId);
}

/** Enabled webhooks: the ones an event may go to. */
export function listEnabledWebhooks(db: Queryable): Promise<WebhookRow[]> {
  return db.selectFrom('webhooks').selectAll().where('enabled', '=', 1).execute();
}

export async function updateWebhook(
  db: Queryable,
  id: number,
  changes: Updateable<WebhookTable>,
): Promise<WebhookRow | undefined> {
  return db.updateTable('webhooks').set(changes).where('id', '=', id).returningAll().executeTakeFirst();
}

export async function deleteWebhook(db: Queryable, id: number): Promise<boolean> {
  const result = await db.deleteFrom('webhooks').where('id', '=', id).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

export async function insertDelivery(db: Queryable, delivery: Insertable<WebhookDeliveryTable>): Promise<DeliveryRow> {
  return db.insertInto('webhook_deliveries').values(delivery).returningAll().executeTakeFirstOrThrow();
}

/** The columns of a delivery row, as insertRows writes them. */
const DELIVERY_COLUMNS: readonly Column<Insertable<WebhookDeliveryTable>>[] = [
  { name: 'webhook_id', type: 'bigint', of: (d) => d.webhook_id },
  { name: 'event_id', type: 'bigint', of: (d) => d.event_id },
  { name: 'kind', type: 'text', of: (d) => d.kind },
  { name: 'payload', type: 'text', of: (d) => d.payload },
  { name: 'message_id', type: 'text', of: (d) => d.message_id },
  { name: 'state', type: 'text', of: (d) => d.state },
  { name: 'attempts', type: 'bigint', of: (d) => d.attempts },
  { name: 'next_attempt_at', type: 'text', of: (d) => d.next_attempt_at ?? null },
  { name: 'last_attempt_at', type: 'text', of: (d) => d.last_attempt_at ?? null },
  { name: 'response_status', type: 'bigint', of: (d) => d.response_status ?? null },
  { name: 'error', type: 'text', of: (d) => d.error ?? null },
  { name: 'duration_ms', type: 'bigint', of: (d) => d.duration_ms ?? null },
  { name: 'locked_until', type: 'text', of: (d) => d.locked_until ?? null },
  { name: 'created_at', type: 'text', of: (d) => d.created_at },
];

/** Inserts the deliveries in order, a thousand per statement. */
export async function insertDeliveries(
  db: Queryable,
  deliveries: readonly Insertable<WebhookDeliveryTable>[],
): Promise<void> {
  await insertRows(db, 'webhook_deliveries', deliveries, DELIVERY_COLUMNS);
}

export function findDelivery(db: Queryable, id: number): Promise<DeliveryRow | undefined> {
  return db.selectFrom('webhook_deliveries').selectAll().where('id', '=', id).executeTakeFirst();
}

const deliveryPage = new ReusedPageShape(
  (db, limit, webhookId: number, afterId: number, state: DeliveryState | undefined) => {
    let query = db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('webhook_id', '=', webhookId)
      .where('id', '>', afterId);
    if (state !== undefined) query = query.where('state', '=', state);
    return query.orderBy('id').limit(limit);
  },
  // A real state as the sample is safe: the query holds no other string among its bound values.
  [-1001, -1002, 'failed'],
);

/** Oldest first, `limit + 1` rows (see toPage). */
export function listDeliveries(
  db: Db,
  webhookId: number,
  state: DeliveryState | undefined,
  page: PageRequest,
): Promise<ReusedRows<DeliveryRow>> {
  return deliveryPage.execute(db, page.limit + 1, webhookId, page.afterId, state);
}

/**
 * Pending deliveries that wait for an earlier one (by event) of the same webhook about the same device: a
 * webhook gets a device's events one at a time, in order (docs/api.md "Receiving deliveries"). Events about
 * no device (and those whose event row was pruned) wait for nothing. One pass over the pending rows, on the
 * index of due rows (`state`, `next_attempt_at`), and the events by their key.
 */
function waitingDeliveries(db: Queryable) {
  return db
    .selectFrom((eb) =>
      eb
        .selectFrom('webhook_deliveries as p')
        .innerJoin('events as e', 'e.id', 'p.event_id')
        .select((inner) => [
          'p.id',
          inner.fn
            .agg<number>('row_number')
            .over((over) => over.partitionBy(['p.webhook_id', 'e.device_id']).orderBy('p.event_id'))
            .as('place'),
        ])
        .where('p.state', '=', 'pending')
        .where('e.device_id', 'is not', null)
        .as('queued'),
    )
    .select('queued.id')
    .where('queued.place', '>', 1);
}

/**
 * Takes up to `limit` due pending deliveries that no other sender holds and that wait for no earlier one,
 * holding them until `lockedUntil`. A delivery waited for holds its followers back while it is retried, held
 * or due, until it is delivered or failed.
 */
export async function claimDueDeliveries(
  db: Queryable,
  nowIso: string,
  lockedUntil: string,
  limit: number,
): Promise<DeliveryRow[]> {
  const due = await db
    .selectFrom('webhook_deliveries')
    .select('id')
    .where('state', '=', 'pending')
    .where('next_attempt_at', '<=', nowIso)
    .where((eb) => unheld(eb, nowIso))
    .where('id', 'not in', waitingDeliveries(db))
    .orderBy('next_attempt_at')
    .limit(rowLimit(limit))
    .execute();
  if (due.length === 0) return [];
  return db
    .updateTable('webhook_deliveries')
    .set({ locked_until: lockedUntil })
    .where(
      'id',
      'in',
      due.map((row) => row.id),
    )
    .where((eb) => unheld(eb, nowIso))
    .returningAll()
    .execute();
}

/** What one attempt did; the caller decides the next state and time. */
export interface AttemptRecord {
  state: DeliveryState;
  attempts: number;
  nextAttemptAt: string | null;
  lastAttemptAt: string;
  responseStatus: number | null;
  error: string | null;
  durationMs: number;
}

export async function recordAttempt(db: Queryable, id: number, attempt: AttemptRecord): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set({
      state: attempt.state,
      attempts: attempt.attempts,
      next_attempt_at: attempt.nextAttemptAt,
      last_attempt_at: attempt.lastAttemptAt,
      response_status: attempt.responseStatus,
      error: attempt.error,
      duration_ms: attempt.durationMs,
      locked_until: null,
    })
    .where('id', '=', id)
    .execute();
}
