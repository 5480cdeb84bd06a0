import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Event } from './client.ts';

/** A delivery that is not the panel's: bad or missing signature, or a timestamp too far from now. */
export class WebhookVerificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

/** How far a delivery's `webhook-timestamp` may be from now (Standard Webhooks' default): replays older fail. */
const TOLERANCE_SECONDS = 5 * 60;

type HeaderBag = Headers | Record<string, string | string[] | undefined>;

function header(headers: HeaderBag, name: string): string {
  const value = headers instanceof Headers ? headers.get(name) : (headers[name] ?? headers[name.toLowerCase()]);
  const text = Array.isArray(value) ? value[0] : value;
  if (typeof text !== 'string' || text === '') throw new WebhookVerificationError(`missing ${name} header`);
  return text;
}

/**
 * The event of a webhook delivery, after checking its Standard Webhooks signature (`webhook-signature`: `v1,`
 * base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>` keyed by the secret after `whsec_`) and that its
 * timestamp is within 5 minutes of `nowSeconds`; throws WebhookVerificationError otherwise. `body` is the raw
 * request body, as received: a re-serialized one no longer matches.
 */
export function verifyWebhook(
  secret: string,
  headers: HeaderBag,
  body: string | Uint8Array,
  nowSeconds: number = Date.now() / 1000,
): Event {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (!/^\d+$/.test(timestamp)) throw new WebhookVerificationError('webhook-timestamp is not a number');
  if (Math.abs(nowSeconds - Number(timestamp)) > TOLERANCE_SECONDS) {
    throw new WebhookVerificationError('webhook-timestamp is too far from now');
  }
  const text = typeof body === 'string' ? body : Buffer.from(body).toString('utf8');
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${text}`).digest();
  const matches = signatures.split(' ').some((signature) => {
    const [version, mac] = signature.split(',', 2);
    if (version !== 'v1' || mac === undefined) return false;
    const given = Buffer.from(mac, 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  if (!matches) throw new WebhookVerificationError('no valid signature');
  return JSON.parse(text);
}
