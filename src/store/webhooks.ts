import {
  type Expression,
  type ExpressionBuilder,
  type Insertable,
  type Selectable,
  type SqlBool,
  sql,
  type Updateable,
} from 'kysely';
import type { PageRequest } from '../domain/paging.ts';
import { ReusedPageShape, type ReusedRows, ReusedShape, rowLimit } from './query-shapes.ts';
import type { Db, Queryable } from './db.ts';
import { type Column, insertRows } from './raw-sql.ts';
import { unheld } from './outbox.ts';
import type { Database, DeliveryState, WebhookDeliveryTable, WebhookTable } from './schema.ts';

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
  { name: 'device_id', type: 'bigint', of: (d) => d.device_id ?? null },
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
 * no device wait for nothing. One probe of `deliveries_device_queue` (the pending rows by webhook, device and
 * event) per candidate; the state is a literal so that both databases see the probe fits that partial index.
 */
function waitsForEarlier(eb: ExpressionBuilder<Database, 'webhook_deliveries'>): Expression<SqlBool> {
  return eb.exists(
    eb
      .selectFrom('webhook_deliveries as p')
      .select('p.id')
      .where('p.state', '=', sql.lit('pending'))
      .whereRef('p.webhook_id', '=', 'webhook_deliveries.webhook_id')
      .whereRef('p.device_id', '=', 'webhook_deliveries.device_id')
      .whereRef('p.event_id', '<', 'webhook_deliveries.event_id'),
  );
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
    .where((eb) => eb.not(waitsForEarlier(eb)))
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

/**
 * Removes delivered and failed deliveries made before `before`, on the index of finished rows by `created_at`
 * (`deliveries_finished`, whose condition the literal state matches); pending ones stay whatever their age.
 */
export async function pruneDeliveries(db: Queryable, before: string): Promise<number> {
  const result = await db
    .deleteFrom('webhook_deliveries')
    .where('state', '!=', sql.lit('pending'))
    .where('created_at', '<', before)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
