import type { FastifyBaseLogger } from 'fastify';
import { type Clock, isoAt } from '../domain/clock.ts';
import { type AttemptReply, attemptVerdict } from '../domain/webhooks.ts';
import { webhookDisabled } from '../services/change-kinds.ts';
import { appendChange, type Change, type ChangePublisher, change } from '../services/changes.ts';
import { type PanelObserver, UNOBSERVED_PANEL } from '../services/metrics.ts';
import type { Tx } from '../store/db.ts';
import {
  type AttemptRecord,
  type DeliveryRow,
  findWebhook,
  recordAttempt,
  updateWebhook,
  type WebhookRow,
} from '../store/webhooks.ts';

/** One delivery's new state, written with others in one transaction. */
interface Outcome {
  deliveryId: number;
  record: AttemptRecord;
  /** Set when the receiver answered 410 Gone. */
  disableWebhookId: number | undefined;
}

/** When an attempt started (clock time) and how long it took. */
export interface AttemptTiming {
  startedAtMs: number;
  durationMs: number;
}

/**
 * Writes what became of deliveries: each attempt's result (attemptVerdict: delivered, retried on the
 * schedule, failed) and the webhooks a 410 Gone turns off. Outcomes that come in the same turn are
 * written in one transaction, the next ones as soon as that one is done. Once a batch that delivered or failed
 * a delivery is written, `onFinal` is told: the deliveries that waited for it (store/webhooks.ts) may be claimed.
 */
export class DeliveryOutcomes {
  readonly #changes: ChangePublisher;
  readonly #clock: Clock;
  readonly #log: FastifyBaseLogger;
  readonly #scheduleMs: readonly number[];
  readonly #observer: PanelObserver;
  readonly #onFinal: () => void;
  #outcomes: Outcome[] = [];
  #flushing: Promise<void> | undefined;

  constructor(
    changes: ChangePublisher,
    clock: Clock,
    log: FastifyBaseLogger,
    scheduleMs: readonly number[],
    observer: PanelObserver = UNOBSERVED_PANEL,
    onFinal: () => void = () => {},
  ) {
    this.#changes = changes;
    this.#clock = clock;
    this.#log = log;
    this.#scheduleMs = scheduleMs;
    this.#observer = observer;
    this.#onFinal = onFinal;
  }

  /** Records one attempt's reply; true when it disables the webhook (410 Gone): its queued deliveries are to fail. */
  recordAttempt(delivery: DeliveryRow, webhook: WebhookRow, reply: AttemptReply, timing: AttemptTiming): boolean {
    const attempts = delivery.attempts + 1;
    const nowMs = this.#clock.nowMs();
    const { disablesWebhook, ...verdict } = attemptVerdict(reply, attempts, this.#scheduleMs, nowMs, Math.random);
    const record = { ...verdict, attempts, lastAttemptAt: isoAt(timing.startedAtMs), durationMs: timing.durationMs };
    this.#record(delivery.id, record, disablesWebhook ? webhook.id : undefined);
    this.#observer.webhookDelivery(verdict.state === 'pending' ? 'retry' : verdict.state);
    if (disablesWebhook) {
      // The host only: a receiver's URL often carries its own secret in the path or query.
      const host = new URL(webhook.url).host;
      this.#log.warn({ webhook: webhook.id, host }, 'webhook disabled: its receiver answered 410 Gone');
    }
    return disablesWebhook;
  }

  /** Fails a delivery of a disabled webhook without an attempt; the previous attempt's details stay. */
  giveUp(delivery: DeliveryRow, nowMs: number): void {
    this.#observer.webhookDelivery('failed');
    this.#record(delivery.id, {
      state: 'failed',
      attempts: delivery.attempts,
      nextAttemptAt: null,
      lastAttemptAt: delivery.last_attempt_at ?? isoAt(nowMs),
      responseStatus: delivery.response_status,
      error: 'webhook disabled',
      durationMs: delivery.duration_ms ?? 0,
    });
  }

  /** The write in progress, which goes on until every outcome recorded so far is written; undefined when idle. */
  get writing(): Promise<void> | undefined {
    return this.#flushing;
  }

  #record(deliveryId: number, record: AttemptRecord, disableWebhookId?: number): void {
    this.#outcomes.push({ deliveryId, record, disableWebhookId });
    this.#scheduleFlush();
  }

  #scheduleFlush(): void {
    if (this.#flushing) return;
    this.#flushing = this.#flush().finally(() => {
      this.#flushing = undefined;
    });
  }

  /**
   * Writes the outcomes gathered so far, one transaction per batch. A batch that fails to write is re-sent
   * once its locks lapse.
   */
  async #flush(): Promise<void> {
    while (this.#outcomes.length > 0) {
      // Outcomes of attempts that finish in the same turn go into the same transaction.
      await new Promise((resolve) => setImmediate(resolve));
      const batch = this.#outcomes;
      this.#outcomes = [];
      const updatedAt = isoAt(this.#clock.nowMs());
      try {
        await this.#changes.commit(async (tx) => {
          const disabled = change({});
          for (const outcome of batch) {
            await recordAttempt(tx, outcome.deliveryId, outcome.record);
            if (outcome.disableWebhookId === undefined) continue;
            appendChange(disabled, await this.#disable(tx, outcome.disableWebhookId, updatedAt));
          }
          return { result: undefined, change: disabled };
        });
        if (batch.some((outcome) => outcome.record.state !== 'pending')) this.#onFinal();
      } catch (err) {
        this.#log.error({ err, deliveries: batch.length }, 'recording webhook attempts failed');
      }
    }
  }

  /**
   * Turns a webhook off after its receiver answered 410 Gone: a change the panel makes itself, so it is in
   * the activity log.
   */
  async #disable(tx: Tx, webhookId: number, updatedAt: string): Promise<Change> {
    const before = await findWebhook(tx, webhookId);
    if (before?.enabled !== 1) return change({});
    return webhookDisabled(before, await updateWebhook(tx, webhookId, { enabled: 0, updated_at: updatedAt }));
  }
}
