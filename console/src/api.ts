/**
 * The panel's `/api/v1`, typed by the OpenAPI document (api-types.ts: the SDK's generated types, `npm run gen:sdk`).
 * Calls carry the session cookie (same origin); writes add `X-Console-Request: 1`, which the panel asks of a
 * cookie-authenticated write, so another site cannot make the browser send one.
 */
import createClient from 'openapi-fetch';
import type { components, paths } from './api-types.ts';

export type Schemas = components['schemas'];
export type Device = Schemas['Device'];
export type Server = Schemas['Server'];
export type PanelNode = Schemas['Node'];
export type Webhook = Schemas['Webhook'];
export type Delivery = Schemas['WebhookDelivery'];
export type PanelEvent = Schemas['Event'];
export type FleetUsage = Schemas['FleetUsage'];
export type Usage = FleetUsage['today'];
export type Problem = Schemas['Error']['error'];

const READS = new Set(['GET', 'HEAD']);

/** Told when the panel answers 401: the session ended (signed out elsewhere, expired, user removed). */
let onSignedOut: () => void = () => {};

export function whenSignedOut(listener: () => void): void {
  onSignedOut = listener;
}

/** Told when the panel answers 403: the user's role may have changed (made a viewer, by themself or another admin). */
let onForbidden: () => void = () => {};

export function whenForbidden(listener: () => void): void {
  onForbidden = listener;
}

export const api = createClient<paths>({ baseUrl: location.origin, credentials: 'same-origin' });
api.use({
  onRequest({ request }) {
    if (!READS.has(request.method)) request.headers.set('x-console-request', '1');
    return request;
  },
  onResponse({ response }) {
    if (response.status === 401) onSignedOut();
    if (response.status === 403) onForbidden();
    return response;
  },
});

export type Result<T> = { ok: true; data: T } | { ok: false; status: number; problem: Problem };

function isProblem(value: unknown): value is Schemas['Error'] {
  if (typeof value !== 'object' || value === null || !('error' in value)) return false;
  const { error } = value;
  return typeof error === 'object' && error !== null && 'message' in error && typeof error.message === 'string';
}

/** What went wrong, from the panel's error body when it sent one, or from the status line. */
export function problemOf(status: number, body: unknown): Problem {
  if (isProblem(body)) return { code: body.error.code, message: body.error.message, fields: body.error.fields ?? {} };
  const message = status === 0 ? 'the panel did not answer; check the connection' : `the panel answered ${status}`;
  return { code: 'unexpected', message, fields: {} };
}

interface Answer<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/** An API call whose success carries a body. */
export async function read<T>(call: Promise<Answer<T>>): Promise<Result<T>> {
  try {
    const answer = await call;
    if (answer.response.ok && answer.data !== undefined) return { ok: true, data: answer.data };
    return { ok: false, status: answer.response.status, problem: problemOf(answer.response.status, answer.error) };
  } catch {
    return { ok: false, status: 0, problem: problemOf(0, undefined) };
  }
}

/** An API call whose success has no body (204). */
export async function act(call: Promise<Answer<unknown>>): Promise<Result<null>> {
  try {
    const answer = await call;
    if (answer.response.ok) return { ok: true, data: null };
    return { ok: false, status: answer.response.status, problem: problemOf(answer.response.status, answer.error) };
  } catch {
    return { ok: false, status: 0, problem: problemOf(0, undefined) };
  }
}

/** Every event kind, for the webhook subscription boxes and the activity filter: the list the API is made from. */
export { EVENT_KINDS } from '../../src/domain/events.ts';

export interface Pages<T> {
  items: T[];
  /** False when there were more pages than were read. */
  complete: boolean;
}

/** Reads a paged list (`after` = the last id seen) page by page, at most `maxPages` pages. */
export async function readPages<T extends { id: number }>(
  page: (after: number | undefined) => Promise<Answer<{ data: T[]; has_more: boolean }>>,
  maxPages: number,
): Promise<Result<Pages<T>>> {
  const items: T[] = [];
  let after: number | undefined;
  for (let pages = 0; pages < maxPages; pages++) {
    const result = await read(page(after));
    if (!result.ok) return result;
    items.push(...result.data.data);
    after = result.data.data.at(-1)?.id;
    if (!result.data.has_more || after === undefined) return { ok: true, data: { items, complete: true } };
  }
  return { ok: true, data: { items, complete: false } };
}
