import { messageOf } from '../domain/errors.ts';
import type { FastifyBaseLogger } from 'fastify';
import type { Mail } from 'nodemailer';
import { type Clock, isoAt } from '../domain/clock.ts';
import { nextAttemptDelayMs } from '../domain/webhooks.ts';
import { composeDigest } from '../services/notifications.ts';
import type { Db } from '../store/db.ts';
import { claimDueMails, dropUnsentMail, hasUnsentMail, type MailRow, recordMailAttempt } from '../store/mail.ts';
import { type Lease, WorkerLoop } from './loop.ts';

/** SMTP_URL and NOTIFY_EMAIL; mail is sent only when both are set. */
export interface MailSettings {
  smtpUrl: string;
  to: string;
}

export interface MailSenderOptions {
  /** Undefined when SMTP_URL or NOTIFY_EMAIL is unset: mail waiting in the outbox is dropped, not sent. */
  settings: MailSettings | undefined;
  /** Waits before each retry: MAIL_RETRY_SCHEDULE_MS in production. */
  scheduleMs: readonly number[];
  pollIntervalMs: number;
  /** Limit on connecting and on the server's greeting; a silent connection is dropped after three times this. */
  timeoutMs: number;
  /** Several panels on one database: the rounds (and so the digest) run on the panel that holds this. */
  lease?: Lease;
}

/** Mails taken per round; each is sent in turn. */
const BATCH = 10;
const ERROR_MAX_CHARS = 300;

/**
 * Sends the notification mails of the outbox (store/mail.ts) over SMTP with nodemailer, and makes
 * the device digest once a minute at most. A mail that fails is retried after the schedule's waits
 * (with jitter), then failed. It runs beside the API and never inside a request: an SMTP server
 * that is down or hangs delays mail, never an answer. Several panels on one database share the
 * outbox: a mail is held by the sender that claimed it, and taken again when that claim lapses.
 */
export class MailSender {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #log: FastifyBaseLogger;
  readonly #options: MailSenderOptions;
  /** Made at the first mail sent. */
  #transport: Mail | undefined;
  readonly #loop: WorkerLoop<number>;

  constructor(db: Db, clock: Clock, log: FastifyBaseLogger, options: MailSenderOptions) {
    this.#db = db;
    this.#clock = clock;
    this.#log = log;
    this.#options = options;
    this.#loop = new WorkerLoop(() => this.#round(), {
      intervalMs: options.pollIntervalMs,
      onError: (err) => this.#log.error({ err }, 'mail sender round failed'),
      lease: options.lease,
    });
  }

  start(): void {
    this.#loop.start();
  }

  async stop(): Promise<void> {
    await this.#loop.stop();
    this.#transport?.close();
  }

  /**
   * One round: makes a digest if one is due, then sends what is due; returns how many attempts it
   * made. Concurrent calls share the round.
   */
  runOnce(): Promise<number> {
    return this.#loop.runOnce();
  }

  async #round(): Promise<number> {
    const { settings } = this.#options;
    if (settings === undefined) {
      if (await hasUnsentMail(this.#db)) await dropUnsentMail(this.#db);
      return 0;
    }
    await composeDigest(this.#db, this.#clock);
    const nowMs = this.#clock.nowMs();
    // Long enough for every mail of the batch to time out once.
    const lockedUntilMs = nowMs + BATCH * 5 * this.#options.timeoutMs;
    const mails = await claimDueMails(this.#db, isoAt(nowMs), isoAt(lockedUntilMs), BATCH);
    for (const mail of mails) await this.#attempt(mail, settings);
    return mails.length;
  }

  /**
   * nodemailer is loaded at the first mail, not with the panel: a panel that sends none (no SMTP_URL, or nothing
   * to tell) keeps its code out of memory.
   */
  async #transportFor(settings: MailSettings): Promise<Mail> {
    if (this.#transport === undefined) {
      const { createTransport } = await import('nodemailer');
      const { timeoutMs } = this.#options;
      this.#transport = createTransport(
        {
          url: settings.smtpUrl,
          connectionTimeout: timeoutMs,
          greetingTimeout: timeoutMs,
          socketTimeout: 3 * timeoutMs,
        },
        { from: { name: 'vpn-panel', address: settings.to }, to: settings.to },
      );
    }
    return this.#transport;
  }

  async #attempt(mail: MailRow, settings: MailSettings): Promise<void> {
    const attempts = mail.attempts + 1;
    try {
      const transport = await this.#transportFor(settings);
      await transport.sendMail({ subject: mail.subject, text: mail.text_body, html: mail.html_body });
      await recordMailAttempt(this.#db, mail.id, {
        state: 'sent',
        attempts,
        nextAttemptAt: null,
        lastError: null,
        sentAt: isoAt(this.#clock.nowMs()),
      });
    } catch (error) {
      const lastError = messageOf(error).slice(0, ERROR_MAX_CHARS);
      const delayMs = nextAttemptDelayMs(attempts, this.#options.scheduleMs, undefined, Math.random);
      if (delayMs === undefined)
        this.#log.error({ mail: mail.id, subject: mail.subject, err: lastError }, 'notification mail failed for good');
      else
        this.#log.warn({ mail: mail.id, err: lastError, retryInMs: delayMs }, 'notification mail not sent; will retry');
      await recordMailAttempt(this.#db, mail.id, {
        state: delayMs === undefined ? 'failed' : 'pending',
        attempts,
        nextAttemptAt: delayMs === undefined ? null : isoAt(this.#clock.nowMs() + delayMs),
        lastError,
        sentAt: null,
      });
    }
  }
}
