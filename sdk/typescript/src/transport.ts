import { randomUUID } from 'node:crypto';

/**
 * The one error of the SDK for a refused request: the panel's error body (docs/api.md "Errors") with the status.
 * Branch on `code`; `fields` names each input at fault.
 */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly fields: Record<string, string>;
  /** The panel's X-Request-Id of the answer: quote it when asking an operator. */
  readonly requestId: string | undefined;

  constructor(status: number, code: string, message: string, fields: Record<string, string>, requestId?: string) {
    super(`${status} ${code}: ${message}`);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.fields = fields;
    this.requestId = requestId;
  }
}

export interface TransportOptions {
  /** The API's base URL, e.g. `https://vpn.example.com/api/v1`. */
  baseUrl: string;
  /** An API key `vpnk_…` (`vpn-panel keys create`). */
  apiKey: string;
  /** Retries of a 429 or 503 (and 409 `idempotency_key_in_use`) before its ApiError is thrown; 5 when not given. */
  maxRetries?: number;
  /** The longest `Retry-After` waited for, in seconds; a longer one is thrown at once. 60 when not given. */
  maxRetryAfterSeconds?: number;
  /** The fetch to send with (tests, proxies); the global one when not given. */
  fetch?: typeof fetch;
}

export interface RequestOptions {
  query?: object | undefined;
  body?: unknown;
  /**
   * The operation honours `Idempotency-Key` (docs/api.md "Idempotency"): the request carries a fresh key, the same
   * on each retry, so it is retried on 503 too and never done twice. Any other request is retried only where the
   * panel refused it before doing anything (429).
   */
  idempotent?: boolean;
  /** What the answer is read as: JSON (the default) or text (a config). */
  as?: 'json' | 'text';
}

/** Statuses a request is sent again after, once `Retry-After` has passed. */
const RETRIED = new Set([429, 503]);

/** Sends requests to the panel: the key, JSON bodies, errors as ApiError, bounded retries after `Retry-After`. */
export class Transport {
  readonly #baseUrl: string;
  readonly #apiKey: string;
  readonly #maxRetries: number;
  readonly #maxRetryAfterSeconds: number;
  readonly #fetch: typeof fetch;

  constructor(options: TransportOptions) {
    this.#baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.#apiKey = options.apiKey;
    this.#maxRetries = options.maxRetries ?? 5;
    this.#maxRetryAfterSeconds = options.maxRetryAfterSeconds ?? 60;
    this.#fetch = options.fetch ?? fetch;
  }

  /** The answer's body, as the OpenAPI document gives the operation (`Answer`); undefined for a 204. */
  async request<Answer>(method: string, path: string, options: RequestOptions = {}): Promise<Answer> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.#apiKey}`, accept: 'application/json' };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    if (options.idempotent === true) headers['idempotency-key'] = randomUUID();
    const url = `${this.#baseUrl}${path}${queryString(options.query)}`;
    const body = options.body === undefined ? undefined : JSON.stringify(options.body);
    for (let attempt = 0; ; attempt++) {
      const response = await this.#fetch(url, { method, headers, body });
      if (response.ok) {
        if (response.status === 204) return documented(undefined);
        return documented(options.as === 'text' ? await response.text() : await response.json());
      }
      const error = await apiErrorOf(response);
      const wait = retryAfterSeconds(response.headers.get('retry-after'));
      const retried =
        (RETRIED.has(response.status) || error.code === 'idempotency_key_in_use') &&
        (method !== 'POST' || options.idempotent === true || response.status === 429);
      if (!retried || attempt >= this.#maxRetries || wait > this.#maxRetryAfterSeconds) throw error;
      await new Promise((resolve) => setTimeout(resolve, wait * 1000));
    }
  }

  /** Every item of a paged list (docs/api.md "Paging"), asking the next page with `after` = the last item's id. */
  async *list<Item extends { id: number }>(path: string, query: object = {}): AsyncGenerator<Item> {
    let after: number | undefined;
    for (;;) {
      const page = after === undefined ? query : { ...query, after };
      const { data, has_more } = await this.request<{ data: Item[]; has_more: boolean }>('GET', path, { query: page });
      yield* data;
      const last = data.at(-1);
      if (!has_more || last === undefined) return;
      after = last.id;
    }
  }
}

/**
 * The one narrowing of an answer: its body is what the OpenAPI document says the operation answers, which the
 * panel's own tests hold its routes to (test/http/openapi.test.ts).
 */
function documented<Answer>(body: unknown): Answer {
  return body as Answer;
}

function queryString(query: object | undefined): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null) params.set(name, String(value));
  }
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}

/** Seconds a `Retry-After` asks for (delta-seconds or an HTTP date); 1 when it is absent or unreadable. */
function retryAfterSeconds(header: string | null): number {
  if (header === null) return 1;
  if (/^\s*\d+\s*$/.test(header)) return Number(header);
  const at = Date.parse(header);
  return Number.isNaN(at) ? 1 : Math.max(0, (at - Date.now()) / 1000);
}

async function apiErrorOf(response: Response): Promise<ApiError> {
  const requestId = response.headers.get('x-request-id') ?? undefined;
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const error = typeof parsed === 'object' && parsed !== null && 'error' in parsed ? parsed.error : undefined;
  if (typeof error !== 'object' || error === null) {
    // Not the panel's error body (a proxy's page): the status says what there is to say.
    return new ApiError(response.status, `http_${response.status}`, text.slice(0, 200), {}, requestId);
  }
  const code = 'code' in error && typeof error.code === 'string' ? error.code : `http_${response.status}`;
  const message = 'message' in error && typeof error.message === 'string' ? error.message : '';
  const fields: Record<string, string> = {};
  if ('fields' in error && typeof error.fields === 'object' && error.fields !== null) {
    for (const [name, problem] of Object.entries(error.fields)) fields[name] = String(problem);
  }
  return new ApiError(response.status, code, message, fields, requestId);
}
