import type { Agent } from 'undici';
import type { Clock } from '../domain/clock.ts';
import { type AttemptReply, parseRetryAfterSeconds, signWebhook } from '../domain/webhooks.ts';
import { ForbiddenTargetError, makeWebhookDispatcher } from '../services/webhook-targets.ts';

/** One POST of a delivery to its webhook. */
export interface WebhookRequest {
  url: string;
  secret: string;
  /** The `webhook-id`: the same on every attempt of a delivery, so receivers can de-duplicate. */
  messageId: string;
  payload: string;
  /** When the attempt starts: its `webhook-timestamp`. */
  sentAtMs: number;
}

/** One attempt: the request in, what became of it out. A failure to connect or a timeout is a reply too. */
export type WebhookAttempt = (request: WebhookRequest) => Promise<AttemptReply>;

export interface WebhookPosterOptions {
  /** Limit on a whole attempt: connecting, sending, the answer's status and body. */
  timeoutMs: number;
  /** Lets targets be internal addresses (tests, labs); see isForbiddenAddress. */
  allowPrivate: boolean;
}

const USER_AGENT = 'vpn-panel-webhooks';
const ERROR_MAX_CHARS = 200;

/**
 * The real WebhookAttempt: a POST signed per Standard Webhooks over undici, through the dispatcher that
 * refuses internal addresses (makeWebhookDispatcher); redirects are not followed.
 */
export class WebhookPoster {
  readonly #clock: Clock;
  readonly #options: WebhookPosterOptions;
  /** Made at the first attempt, so a poster that never sends holds no connection pool. */
  #dispatcher: Promise<Agent> | undefined;

  constructor(clock: Clock, options: WebhookPosterOptions) {
    this.#clock = clock;
    this.#options = options;
  }

  readonly attempt: WebhookAttempt = async ({ url, secret, messageId, payload, sentAtMs }) => {
    const timestampSeconds = Math.floor(sentAtMs / 1000);
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.#options.timeoutMs);
    this.#dispatcher ??= makeWebhookDispatcher(this.#options.allowPrivate);
    try {
      const { request } = await import('undici');
      const response = await request(url, {
        method: 'POST',
        dispatcher: await this.#dispatcher,
        signal: controller.signal,
        headers: {
          'content-type': 'application/json',
          'user-agent': USER_AGENT,
          'webhook-id': messageId,
          'webhook-timestamp': String(timestampSeconds),
          'webhook-signature': signWebhook(secret, messageId, timestampSeconds, payload),
        },
        body: payload,
      });
      // Read (and discard) the body so the connection goes back to the pool.
      await response.body.dump();
      const retryAfter = response.headers['retry-after'];
      const nowMs = this.#clock.nowMs();
      const retryAfterSeconds = parseRetryAfterSeconds(typeof retryAfter === 'string' ? retryAfter : undefined, nowMs);
      return { status: response.statusCode, retryAfterSeconds };
    } catch (error) {
      return { error: controller.signal.aborted ? 'timeout' : describeFailure(error) };
    } finally {
      clearTimeout(timer);
    }
  };

  /** Closes the pooled connections; a later attempt opens new ones. */
  async close(): Promise<void> {
    const dispatcher = this.#dispatcher;
    this.#dispatcher = undefined;
    await (await dispatcher)?.close();
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
