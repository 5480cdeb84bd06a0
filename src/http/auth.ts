import type { FastifyRequest } from 'fastify';
import { SESSION_LIFETIME_MS } from '../domain/console-users.ts';
import { AppError } from '../domain/errors.ts';
import { addressBucket, type RateDecision } from '../domain/rate-limit.ts';
import type { ApiKeyService } from '../services/api-keys.ts';
import type { ConsoleSessionService } from '../services/console-sessions.ts';
import type { ConsoleUserPrincipal, Principal } from '../services/principals.ts';
import { cookieValues, setCookieValue } from './cookies.ts';
import type { RateLimiter } from './rate-limiter.ts';

/** The cookie that holds a console session's token, over plain http. */
export const SESSION_COOKIE = 'vpn_panel_session';

/**
 * Its name: over https (`PANEL_URL`), with the `__Host-` prefix, which a browser only keeps when set `Secure`, for
 * `Path=/`, without `Domain`, by this host over https: no neighbour on a sibling subdomain and no one on the
 * network (over plain http) can plant a cookie of that name for the panel to read.
 */
export function sessionCookieName(secure: boolean): string {
  return secure ? `__Host-${SESSION_COOKIE}` : SESSION_COOKIE;
}

/** The header a console request sends with every change: a page of another site cannot send it (CORS). */
export const CONSOLE_REQUEST_HEADER = 'x-console-request';

/**
 * The session token in the request's Cookie header (the cookie named `request.sessionCookieName`); undefined
 * without one. Two cookies of that name are refused (400): one was planted beside the panel's, and taking either
 * could sign the browser in as someone else.
 */
export function sessionTokenOf(request: FastifyRequest): string | undefined {
  const name = request.sessionCookieName;
  const [token, twin] = cookieValues(request.headers.cookie, name);
  if (twin !== undefined) {
    const message = `the request carries two ${name} cookies; clear this site's cookies, then sign in again`;
    throw new AppError('bad_request', message, { cookie: `one ${name} at most` });
  }
  return token;
}

/**
 * The `Set-Cookie` value that holds a session's token, or with `null` clears it. The browser keeps it
 * for the session's whole lifetime (a phone that closes its browser stays signed in); the panel ends it
 * sooner when idle.
 */
export function sessionCookie(token: string | null, secure: boolean): string {
  const maxAgeSeconds = token === null ? 0 : SESSION_LIFETIME_MS / 1000;
  return setCookieValue(sessionCookieName(secure), token ?? '', { path: '/', maxAgeSeconds, secure });
}

/** Refuses a request of an address that spent its budget of requests without valid credentials. */
function refuseFlood(decision: RateDecision): void {
  if (!decision.allowed) {
    const message = 'too many requests without a valid API key or console session from this address; slow down';
    throw new AppError('rate_limited', message, {}, decision.retryAfterSeconds);
  }
}

/** Who a request is: by its API key or its console session. */
export class Authenticator {
  readonly #apiKeys: ApiKeyService;
  readonly #sessions: ConsoleSessionService;
  readonly #unauthenticatedLimiter: RateLimiter;

  constructor(apiKeys: ApiKeyService, sessions: ConsoleSessionService, unauthenticatedLimiter: RateLimiter) {
    this.#apiKeys = apiKeys;
    this.#sessions = sessions;
    this.#unauthenticatedLimiter = unauthenticatedLimiter;
  }

  /**
   * The request's principal: its `Authorization` header's API key when it has that header (a key wins
   * over a cookie), else its console session, else the key's `unauthorized`. Credentials not known valid
   * first spend their address's budget (UNAUTHENTICATED_RATE), shared by keys and sessions.
   */
  principalOf(request: FastifyRequest): Principal | Promise<Principal> {
    if (request.headers.authorization === undefined) {
      const token = sessionTokenOf(request);
      if (token !== undefined) return this.sessionOf(request, token);
    }
    return this.#apiKeys.authenticate(request.headers.authorization, this.#admitUnknown, request);
  }

  /** The principal of the request's console session; `unauthorized` without a live one. */
  sessionOf(request: FastifyRequest, token = sessionTokenOf(request)): Promise<ConsoleUserPrincipal> {
    return this.#sessions.authenticate(token, this.#admitUnknown, request);
  }

  /** A request whose credentials are not known valid spends one of its address's budget before any lookup. */
  readonly #admitUnknown = (request: FastifyRequest): void | Promise<void> => {
    const decision = this.#unauthenticatedLimiter.take(`auth:${addressBucket(request.ip)}`);
    if (decision instanceof Promise) return decision.then(refuseFlood);
    refuseFlood(decision);
  };
}

/** The origin the console is served from: PANEL_URL's when it was set, else the request's own (its Host). */
function consoleOrigin(request: FastifyRequest, panelOrigin: string | undefined): string | undefined {
  if (panelOrigin !== undefined) return panelOrigin;
  try {
    return new URL(`${request.protocol}://${request.host}`).origin;
  } catch {
    return undefined;
  }
}

/** A request that says where it comes from (the browser's `Origin`) must come from the console's origin. */
export function checkOrigin(request: FastifyRequest, panelOrigin: string | undefined): void {
  const origin = request.headers.origin;
  if (origin === undefined || origin === consoleOrigin(request, panelOrigin)) return;
  throw new AppError('csrf_check_failed', `a console request from another origin (${origin}) is refused`, {
    origin: 'not the panel',
  });
}

/**
 * A change made with a console session (not with an API key) carries `X-Console-Request: 1` and, when
 * the browser names its origin, comes from the console's own: what a page of another site cannot do.
 */
export function checkConsoleWrite(request: FastifyRequest, panelOrigin: string | undefined): void {
  if (request.headers[CONSOLE_REQUEST_HEADER] !== '1') {
    const message = 'a change made with a console session needs the header X-Console-Request: 1';
    throw new AppError('csrf_check_failed', message, { [CONSOLE_REQUEST_HEADER]: 'must be 1' });
  }
  checkOrigin(request, panelOrigin);
}

/**
 * The actor of a request's changes: `via API key <name>` or `via console user <name>`. Only routes with a scope
 * reach here.
 */
export function actorOf(request: FastifyRequest): string {
  if (request.principal === null) throw new Error(`route ${request.routeOptions.url} has no scope, so no actor`);
  return request.principal.actor;
}
