import type { FastifyBaseLogger } from 'fastify';
import { type Agent, request } from 'undici';
import { type Clock, isoAt } from '../domain/clock.ts';
import { nextAttemptDelayMs, parseRetryAfterSeconds, signWebhook } from '../domain/webhooks.ts';
import { ForbiddenTargetError, makeWebhookDispatcher } from '../services/webhook-targets.ts';
import { SYSTEM_ACTOR } from '../domain/events.ts';
import { recordActivity } from '../services/activity.ts';
import { outsideRequest } from '../services/request-context.ts';
import { type Db, type Tx, write } from '../store/db.ts';
import {
  type AttemptRecord,
  claimDueDeliveries,
  type DeliveryRow,
  findWebhook,
  listEnabledWebhooks,
  recordAttempt,
  updateWebhook,
  type WebhookRow,
} from '../store/webhooks.ts';
import { WorkerLoop } from './loop.ts';

export interface WebhookSenderOptions {
  /** Waits before each retry: RETRY_SCHEDULE_MS in production. */
  scheduleMs: readonly number[];
  /** Limit on a whole attempt: connecting, sending, the answer's status and body. */
  timeoutMs: number;
  /** Attempts in flight at once over all webhooks; one webhook gets a quarter of them at most. */
  concurrency: number;
  /** How often due deliveries (retries) are looked for when nothing nudges the sender. */
  pollIntervalMs: number;
  /** Lets targets be internal addresses (tests, labs); see isForbiddenAddress. */
  allowPrivate: boolean;
}

/** Time after an attempt's timeout for its result to be written before another sender may take the delivery. */
const RECORD_MARGIN_MS = 5_000;
/** A webhook whose slots are all taken, none freed for this long, is stalled: its backlog stops counting as ready work. */
const STALL_MS = 1_000;
const USER_AGENT = 'vpn-panel-webhooks';
const ERROR_MAX_CHARS = 200;

/** A claimed delivery, locked for this sender until `lockedUntilMs`. */
interface Held {
  delivery: DeliveryRow;
  webhook: WebhookRow;
  lockedUntilMs: number;
}

/** What the receiver did with one request. */
type Reply = { status: number; retryAfterSeconds: number | undefined } | { error: string };

/** One delivery's new state, written with others in one transaction. */
interface Outcome {
  deliveryId: number;
  record: AttemptRecord;
  /** Set when the receiver answered 410 Gone. */
  disableWebhookId: number | undefined;
}

/**
 * Sends webhook deliveries (the outbox of store/webhooks.ts): claims due ones in batches, POSTs each
 * signed per Standard Webhooks, and writes every attempt's outcome, several per transaction. Due
 * work is held in a queue per webhook; at most `concurrency` attempts run, at most a quarter of
 * them for one webhook, so a slow or dead receiver leaves the other slots to the others. Delivery
 * is at least once: a delivery held by a sender that dies is taken again once its lock lapses.
 * Pending deliveries of a disabled (or 410-answering) webhook are failed with error
 * "webhook disabled" rather than kept: re-enabling a webhook does not replay what it missed.
 */
export class WebhookSender {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #log: FastifyBaseLogger;
  readonly #options: WebhookSenderOptions;
  readonly #perWebhookCap: number;
  #dispatcher: Agent | undefined;
  /** Runs #fill, one at a time; a nudge while one runs makes it go round once more. */
  readonly #pump: WorkerLoop<void>;
  #stopping = false;
  /** A claim found less due work than it asked for: no more claims until the poll timer or nudge() clears it. */
  #drained = false;
  readonly #attempts = new Set<Promise<void>>();
  readonly #activeByWebhook = new Map<number, number>();
  /** performance.now() when a webhook's attempt last finished, or its first one started. */
  readonly #progressAtMs = new Map<number, number>();
  readonly #queues = new Map<number, Held[]>();
  /** Deliveries queued or in flight here, so one is never sent twice at once. */
  readonly #heldIds = new Set<number>();
  #outcomes: Outcome[] = [];
  #flushing: Promise<void> | undefined;
  #attemptsMade = 0;

  constructor(db: Db, clock: Clock, log: FastifyBaseLogger, options: WebhookSenderOptions) {
    this.#db = db;
    this.#clock = clock;
    this.#log = log;
    this.#options = options;
    this.#perWebhookCap = Math.max(1, Math.floor(options.concurrency / 4));
    this.#pump = new WorkerLoop(() => this.#fill(), {
      intervalMs: options.pollIntervalMs,
      onError: (err) => this.#log.error({ err }, 'webhook sender round failed'),
      // The poll clears #drained, so a tick is a nudge: due retries are claimed even if a round runs.
      onTick: () => this.nudge(),
    });
  }

  start(): void {
    this.#stopping = false;
    this.#pump.start();
    this.nudge();
  }

  /** Stops taking work, waits for the attempts in flight and their records. Queued deliveries stay locked until their lock lapses. */
  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#pump.stop();
    await this.#settled();
    for (const queue of this.#queues.values()) for (const held of queue) this.#heldIds.delete(held.delivery.id);
    this.#queues.clear();
    await this.#dispatcher?.close();
    this.#dispatcher = undefined;
  }

  /** Looks for due deliveries soon, e.g. after an event was recorded; the work it starts belongs to no request. */
  nudge(): void {
    this.#drained = false;
    outsideRequest(() => this.#pump.nudge());
  }

  /** Sends everything due now and waits until those attempts are recorded; returns how many attempts were made. */
  async runOnce(): Promise<number> {
    const before = this.#attemptsMade;
    this.#drained = false;
    // A round in flight may have claimed before this call: it goes round once more.
    if (this.#pump.busy) this.#pump.nudge();
    await this.#pump.runOnce();
    await this.#settled();
    return this.#attemptsMade - before;
  }

  /**
   * Starts queued work in free slots and claims more while slots are free and little is ready. A
   * claim that brings only a stalled webhook's deliveries leaves them locked (taken again when the
   * lock lapses) and claims again, digging past that backlog to other webhooks' deliveries.
   */
  async #fill(): Promise<void> {
    const { concurrency } = this.#options;
    this.#dropUnstartable();
    this.#startQueued();
    while (!this.#stopping && !this.#drained && this.#attempts.size < concurrency && this.#readyCount() < concurrency) {
      const limit = 2 * concurrency - this.#readyCount();
      if ((await this.#claim(limit)) < limit) this.#drained = true;
      this.#startQueued();
    }
  }

  /** Claims up to `limit` due deliveries; returns how many the store gave. */
  async #claim(limit: number): Promise<number> {
    const nowMs = this.#clock.nowMs();
    // Long enough to wait one timeout in a queue, then run a whole attempt and record it.
    const lockedUntilMs = nowMs + 2 * this.#options.timeoutMs + RECORD_MARGIN_MS;
    const claimed = await claimDueDeliveries(this.#db, isoAt(nowMs), isoAt(lockedUntilMs), limit);
    if (claimed.length === 0) return 0;
    const webhooks = new Map((await listEnabledWebhooks(this.#db)).map((w) => [w.id, w]));
    for (const delivery of claimed) {
      if (this.#heldIds.has(delivery.id)) continue;
      const webhook = webhooks.get(delivery.webhook_id);
      if (webhook === undefined) {
        this.#giveUp(delivery, nowMs);
        continue;
      }
      const queue = this.#queues.get(webhook.id) ?? [];
      if (this.#isStalled(webhook.id) && queue.length >= this.#perWebhookCap) continue;
      queue.push({ delivery, webhook, lockedUntilMs });
      this.#queues.set(webhook.id, queue);
      this.#heldIds.add(delivery.id);
    }
    return claimed.length;
  }

  /** Queued deliveries of webhooks that are not stalled: work that will start soon. */
  #readyCount(): number {
    let ready = 0;
    for (const [webhookId, queue] of this.#queues) if (!this.#isStalled(webhookId)) ready += queue.length;
    return ready;
  }

  #isStalled(webhookId: number): boolean {
    const progressAtMs = this.#progressAtMs.get(webhookId);
    return this.#active(webhookId) >= this.#perWebhookCap && progressAtMs !== undefined && performance.now() - progressAtMs > STALL_MS;
  }

  #active(webhookId: number): number {
    return this.#activeByWebhook.get(webhookId) ?? 0;
  }

  /** Forgets queued deliveries whose lock would lapse before an attempt could finish: another sender may take them then. */
  #dropUnstartable(): void {
    const latestStartMs = this.#clock.nowMs() + this.#options.timeoutMs + RECORD_MARGIN_MS;
    for (const [webhookId, queue] of this.#queues) {
      const startable: Held[] = [];
      for (const held of queue) {
        if (held.lockedUntilMs >= latestStartMs) startable.push(held);
        else this.#heldIds.delete(held.delivery.id);
      }
      if (startable.length === 0) this.#queues.delete(webhookId);
      else this.#queues.set(webhookId, startable);
    }
  }

  /** Fills free slots from the queues, one delivery per webhook in turn. */
  #startQueued(): void {
    const { concurrency } = this.#options;
    let started = true;
    while (started && !this.#stopping) {
      started = false;
      for (const [webhookId, queue] of this.#queues) {
        if (this.#attempts.size >= concurrency) return;
        if (this.#active(webhookId) >= this.#perWebhookCap) continue;
        const held = queue.shift();
        if (queue.length === 0) this.#queues.delete(webhookId);
        if (held === undefined) continue;
        this.#start(held);
        started = true;
      }
    }
  }

  #start(held: Held): void {
    const webhookId = held.webhook.id;
    const active = this.#active(webhookId);
    if (active === 0) this.#progressAtMs.set(webhookId, performance.now());
    this.#activeByWebhook.set(webhookId, active + 1);
    const attempt: Promise<void> = this.#attempt(held)
      .catch((err: unknown) => this.#log.error({ err, delivery: held.delivery.id }, 'webhook attempt failed'))
      .finally(() => {
        this.#attempts.delete(attempt);
        this.#heldIds.delete(held.delivery.id);
        const left = this.#active(webhookId) - 1;
        if (left === 0) {
          this.#activeByWebhook.delete(webhookId);
          this.#progressAtMs.delete(webhookId);
        } else {
          this.#activeByWebhook.set(webhookId, left);
          this.#progressAtMs.set(webhookId, performance.now());
        }
        this.#attemptsMade += 1;
        // Attempts finishing in the same turn share one round, hence one claim.
        this.#pump.nudge();
      });
    this.#attempts.add(attempt);
  }

  async #attempt({ delivery, webhook }: Held): Promise<void> {
    const startedAtMs = this.#clock.nowMs();
    const startedAt = performance.now();
    const reply = await this.#post(webhook, delivery, startedAtMs);
    const done = { attempts: delivery.attempts + 1, lastAttemptAt: isoAt(startedAtMs), durationMs: Math.round(performance.now() - startedAt) };
    if ('error' in reply) {
      this.#record(delivery.id, this.#retryOrFail(done, null, reply.error, undefined));
    } else if (reply.status >= 200 && reply.status < 300) {
      this.#record(delivery.id, { ...done, state: 'delivered', nextAttemptAt: null, responseStatus: reply.status, error: null });
    } else if (reply.status === 410) {
      this.#record(delivery.id, { ...done, state: 'failed', nextAttemptAt: null, responseStatus: 410, error: '410 Gone: webhook disabled' }, webhook.id);
      // The host only: a receiver's URL often carries its own secret in the path or query.
      const host = new URL(webhook.url).host;
      this.#log.warn({ webhook: webhook.id, host }, 'webhook disabled: its receiver answered 410 Gone');
      this.#failQueued(webhook.id);
    } else {
      const error = reply.status >= 300 && reply.status < 400 ? `redirect ${reply.status} is not followed` : `HTTP ${reply.status}`;
      this.#record(delivery.id, this.#retryOrFail(done, reply.status, error, reply.retryAfterSeconds));
    }
  }

  #retryOrFail(
    done: Pick<AttemptRecord, 'attempts' | 'lastAttemptAt' | 'durationMs'>,
    responseStatus: number | null,
    error: string,
    retryAfterSeconds: number | undefined,
  ): AttemptRecord {
    const delayMs = nextAttemptDelayMs(done.attempts, this.#options.scheduleMs, retryAfterSeconds, Math.random);
    if (delayMs === undefined) return { ...done, state: 'failed', nextAttemptAt: null, responseStatus, error };
    return { ...done, state: 'pending', nextAttemptAt: isoAt(this.#clock.nowMs() + delayMs), responseStatus, error };
  }

  async #post(webhook: WebhookRow, delivery: DeliveryRow, nowMs: number): Promise<Reply> {
    const timestampSeconds = Math.floor(nowMs / 1000);
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.#options.timeoutMs);
    try {
      const response = await request(webhook.url, {
        method: 'POST',
        dispatcher: (this.#dispatcher ??= makeWebhookDispatcher(this.#options.allowPrivate)),
        signal: controller.signal,
        headers: {
          'content-type': 'application/json',
          'user-agent': USER_AGENT,
          'webhook-id': delivery.message_id,
          'webhook-timestamp': String(timestampSeconds),
          'webhook-signature': signWebhook(webhook.secret, delivery.message_id, timestampSeconds, delivery.payload),
        },
        body: delivery.payload,
      });
      // Read (and discard) the body so the connection goes back to the pool.
      await response.body.dump();
      const retryAfter = response.headers['retry-after'];
      return { status: response.statusCode, retryAfterSeconds: parseRetryAfterSeconds(typeof retryAfter === 'string' ? retryAfter : undefined, this.#clock.nowMs()) };
    } catch (error) {
      return { error: controller.signal.aborted ? 'timeout' : describeFailure(error) };
    } finally {
      clearTimeout(timer);
    }
  }

  /** Fails the deliveries queued for a webhook that was just disabled. */
  #failQueued(webhookId: number): void {
    const queue = this.#queues.get(webhookId) ?? [];
    this.#queues.delete(webhookId);
    const nowMs = this.#clock.nowMs();
    for (const held of queue) {
      this.#heldIds.delete(held.delivery.id);
      this.#giveUp(held.delivery, nowMs);
    }
  }

  /** Fails a delivery without an attempt; the previous attempt's details stay. */
  #giveUp(delivery: DeliveryRow, nowMs: number): void {
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

  /** Writes the outcomes gathered so far, one transaction per batch. A batch that fails to write is re-sent once its locks lapse. */
  async #flush(): Promise<void> {
    while (this.#outcomes.length > 0) {
      // Outcomes of attempts that finish in the same turn go into the same transaction.
      await new Promise((resolve) => setImmediate(resolve));
      const batch = this.#outcomes;
      this.#outcomes = [];
      const updatedAt = isoAt(this.#clock.nowMs());
      try {
        await write(this.#db, async (tx) => {
          for (const outcome of batch) {
            await recordAttempt(tx, outcome.deliveryId, outcome.record);
            if (outcome.disableWebhookId !== undefined) await this.#disable(tx, outcome.disableWebhookId, updatedAt);
          }
        });
      } catch (err) {
        this.#log.error({ err, deliveries: batch.length }, 'recording webhook attempts failed');
      }
    }
  }

  /** Turns a webhook off after its receiver answered 410 Gone: a change the panel makes itself, so it is in the activity log. */
  async #disable(tx: Tx, webhookId: number, updatedAt: string): Promise<void> {
    const before = await findWebhook(tx, webhookId);
    if (before?.enabled !== 1) return;
    const after = await updateWebhook(tx, webhookId, { enabled: 0, updated_at: updatedAt });
    await recordActivity(tx, this.#clock, {
      resource: 'webhook', resourceId: webhookId, verb: 'disabled', summary: `webhook ${webhookId} to ${before.url} turned off: its receiver answered 410 Gone`, actor: SYSTEM_ACTOR, before, after: after ?? null,
    });
  }

  /** Resolves once nothing is in flight, queued to start, or waiting to be written. */
  async #settled(): Promise<void> {
    for (;;) {
      const busy = [...this.#attempts, this.#flushing].filter((p): p is Promise<void> => p !== undefined);
      if (busy.length === 0 && !this.#pump.busy) return;
      await Promise.allSettled([...busy, this.#pump.idle()]);
    }
  }
}

/** A short reason for a failed attempt, e.g. "connect ECONNREFUSED". */
function describeFailure(error: unknown): string {
  if (error instanceof ForbiddenTargetError) return error.message;
  if (!(error instanceof Error)) return String(error).slice(0, ERROR_MAX_CHARS);
  if (error instanceof AggregateError && error.errors[0] !== undefined) return describeFailure(error.errors[0]);
  const code = 'code' in error && typeof error.code === 'string' ? error.code : undefined;
  const syscall = 'syscall' in error && typeof error.syscall === 'string' ? error.syscall : undefined;
  const text = code !== undefined && syscall !== undefined ? `${syscall} ${code}` : error.message;
  return text.slice(0, ERROR_MAX_CHARS);
}
