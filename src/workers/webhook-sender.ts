import type { FastifyBaseLogger } from 'fastify';
import { type Clock, isoAt } from '../domain/clock.ts';
import type { ChangePublisher } from '../services/changes.ts';
import { outsideRequest } from '../services/request-context.ts';
import type { Db } from '../store/db.ts';
import { claimDueDeliveries, type DeliveryRow, listEnabledWebhooks, type WebhookRow } from '../store/webhooks.ts';
import { WorkerLoop } from './loop.ts';
import { type WebhookAttempt, WebhookPoster, type WebhookPosterOptions } from './webhook-attempt.ts';
import { DeliveryOutcomes } from './webhook-outcomes.ts';
import type { PanelObserver } from '../services/metrics.ts';

export interface WebhookSenderOptions extends WebhookPosterOptions {
  /** Waits before each retry: RETRY_SCHEDULE_MS in production. */
  scheduleMs: readonly number[];
  /** Attempts in flight at once over all webhooks; one webhook gets a quarter of them at most. */
  concurrency: number;
  /** How often due deliveries (retries) are looked for when nothing nudges the sender. */
  pollIntervalMs: number;
  /** Told what became of each attempt, for the metrics. */
  observer?: PanelObserver;
}

/** Time after an attempt's timeout for its result to be written before another sender may take the delivery. */
const RECORD_MARGIN_MS = 5_000;
/**
 * A webhook whose slots are all taken, none freed for this long, is stalled: its backlog stops counting as ready
 * work.
 */
const STALL_MS = 1_000;

/** A claimed delivery, locked for this sender until `lockedUntilMs`. */
interface Held {
  delivery: DeliveryRow;
  webhook: WebhookRow;
  lockedUntilMs: number;
}

/**
 * Sends webhook deliveries (the outbox of store/webhooks.ts), deciding what to send when: claims due
 * ones in batches, hands each to `attempt` (by default WebhookPoster's signed POST) and the reply to
 * DeliveryOutcomes, which writes it. Due work is held in a queue per webhook; at most `concurrency`
 * attempts run, at most a quarter of them for one webhook, so a slow or dead receiver leaves the other
 * slots to the others. A webhook gets each device's events in order, one at a time: the store gives a
 * delivery only once the earlier ones of its device are delivered or failed. Delivery is at least once: a
 * delivery held by a sender that dies is taken again once its lock lapses (and holds its device's next
 * back). Pending deliveries of a disabled (or 410-answering) webhook are failed with error "webhook
 * disabled" rather than kept: re-enabling a webhook does not replay what it missed.
 */
export class WebhookSender {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #log: FastifyBaseLogger;
  readonly #options: WebhookSenderOptions;
  readonly #perWebhookCap: number;
  readonly #attempt: WebhookAttempt;
  /** The default attempt's client, closed on stop(); none when the attempt was given. */
  readonly #poster: WebhookPoster | undefined;
  readonly #outcomes: DeliveryOutcomes;
  /** Runs #fill, one at a time; a nudge while one runs makes it go round once more. */
  readonly #pump: WorkerLoop<void>;
  #stopping = false;
  /** A claim found less due work than it asked for: no more claims until the poll timer or nudge() clears it. */
  #drained = false;
  /**
   * Counts the nudges: a claim that began before one may have missed the work it announces, so it does not mark the
   * sender drained (that nudge's round would then claim nothing until the poll).
   */
  #nudges = 0;
  readonly #attempts = new Set<Promise<void>>();
  readonly #activeByWebhook = new Map<number, number>();
  /** performance.now() when a webhook's attempt last finished, or its first one started. */
  readonly #progressAtMs = new Map<number, number>();
  readonly #queues = new Map<number, Held[]>();
  /** Deliveries queued or in flight here, so one is never sent twice at once. */
  readonly #heldIds = new Set<number>();
  #attemptsMade = 0;

  /** `changes`: how the webhooks a 410 Gone turns off are committed (its nudge may come back here). */
  constructor(
    db: Db,
    clock: Clock,
    changes: ChangePublisher,
    log: FastifyBaseLogger,
    options: WebhookSenderOptions,
    attempt?: WebhookAttempt,
  ) {
    this.#db = db;
    this.#clock = clock;
    this.#log = log;
    this.#options = options;
    if (attempt === undefined) {
      this.#poster = new WebhookPoster(clock, options);
      this.#attempt = this.#poster.attempt;
    } else {
      this.#attempt = attempt;
    }
    // A delivery done lets the next one of its device be claimed (store/webhooks.ts): look for it at once.
    this.#outcomes = new DeliveryOutcomes(changes, clock, log, options.scheduleMs, options.observer, () =>
      this.nudge(),
    );
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

  /**
   * Stops taking work, waits for the attempts in flight and their records. Queued deliveries stay locked until their
   * lock lapses.
   */
  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#pump.stop();
    await this.#settled();
    for (const queue of this.#queues.values()) for (const held of queue) this.#heldIds.delete(held.delivery.id);
    this.#queues.clear();
    await this.#poster?.close();
  }

  /** Looks for due deliveries soon, e.g. after an event was recorded; the work it starts belongs to no request. */
  nudge(): void {
    this.#undrain();
    outsideRequest(() => this.#pump.nudge());
  }

  #undrain(): void {
    this.#nudges++;
    this.#drained = false;
  }

  /** Sends everything due now and waits until those attempts are recorded; returns how many attempts were made. */
  async runOnce(): Promise<number> {
    const before = this.#attemptsMade;
    this.#undrain();
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
      const nudges = this.#nudges;
      if ((await this.#claim(limit)) < limit && nudges === this.#nudges) this.#drained = true;
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
        this.#outcomes.giveUp(delivery, nowMs);
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
    return (
      this.#active(webhookId) >= this.#perWebhookCap &&
      progressAtMs !== undefined &&
      performance.now() - progressAtMs > STALL_MS
    );
  }

  #active(webhookId: number): number {
    return this.#activeByWebhook.get(webhookId) ?? 0;
  }

  /**
   * Forgets queued deliveries whose lock would lapse before an attempt could finish: another sender may take them
   * then.
   */
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
    const attempt: Promise<void> = this.#send(held)
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

  async #send({ delivery, webhook }: Held): Promise<void> {
    const startedAtMs = this.#clock.nowMs();
    const startedAt = performance.now();
    const reply = await this.#attempt({
      url: webhook.url,
      secret: webhook.secret,
      messageId: delivery.message_id,
      payload: delivery.payload,
      sentAtMs: startedAtMs,
    });
    const timing = { startedAtMs, durationMs: Math.round(performance.now() - startedAt) };
    if (this.#outcomes.recordAttempt(delivery, webhook, reply, timing)) this.#failQueued(webhook.id);
  }

  /** Fails the deliveries queued for a webhook that was just disabled. */
  #failQueued(webhookId: number): void {
    const queue = this.#queues.get(webhookId) ?? [];
    this.#queues.delete(webhookId);
    const nowMs = this.#clock.nowMs();
    for (const held of queue) {
      this.#heldIds.delete(held.delivery.id);
      this.#outcomes.giveUp(held.delivery, nowMs);
    }
  }

  /** Resolves once nothing is in flight, queued to start, or waiting to be written. */
  async #settled(): Promise<void> {
    for (;;) {
      const busy = [...this.#attempts, this.#outcomes.writing].filter((p): p is Promise<void> => p !== undefined);
      if (busy.length === 0 && !this.#pump.busy) return;
      await Promise.allSettled([...busy, this.#pump.idle()]);
    }
  }
}
