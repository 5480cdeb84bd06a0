import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { AppError } from '../domain/errors.ts';
import { type RateDecision, rateLimitField, rateLimitPolicyField, REQUEST_RATE } from '../domain/rate-limit.ts';
import type { Principal } from '../services/principals.ts';
import type { Api } from './api.ts';
import { type Authenticator, checkConsoleWrite } from './auth.ts';
import { checkConsoleHost } from './console-hosts.ts';
import { meets, type Requirement } from './operation.ts';
import type { RateLimiter } from './rate-limiter.ts';
import { UNMATCHED_ROUTE } from './request-metrics.ts';

/** Every method but GET and HEAD may change something. */
export function changesState(method: string | string[]): boolean {
  return (Array.isArray(method) ? method : [method]).some((m) => m !== 'GET' && m !== 'HEAD');
}

const RATE_LIMIT_POLICY = rateLimitPolicyField(REQUEST_RATE);

/** Who a refusal names. */
function callerOf(principal: Principal): string {
  return principal.kind === 'api_key' ? 'this API key' : `console user ${principal.name} (${principal.role})`;
}

/** The rate-limit fields (none for an exempt key) and the scope: refuses the request, or lets it through. */
function enforce(
  reply: FastifyReply,
  principal: Principal,
  scope: Requirement,
  decision: RateDecision | undefined,
): void {
  if (decision !== undefined) {
    reply.header('ratelimit-policy', RATE_LIMIT_POLICY);
    reply.header('ratelimit', rateLimitField(decision));
    if (!decision.allowed) {
      const message = `too many requests for ${callerOf(principal)}; slow down`;
      throw new AppError('rate_limited', message, {}, decision.retryAfterSeconds);
    }
  }
  if (!meets(principal, scope)) {
    const message = `${callerOf(principal)} lacks the scope ${scope}`;
    throw new AppError('insufficient_scope', message, { scope: `${scope} required` });
  }
}

/** A request with a scope, waiting to be admitted. */
interface Arrival {
  request: FastifyRequest;
  reply: FastifyReply;
  scope: Requirement;
  done: HookHandlerDoneFunction;
}

export interface AdmissionDeps {
  authenticator: Authenticator;
  /** Per API key or console user (REQUEST_RATE). */
  rateLimiter: RateLimiter;
  /** The names (besides IP addresses) the console answers at. */
  consoleHosts: ReadonlySet<string>;
  /** PANEL_URL's origin, which changes made with a console session must come from; unset: the request's own. */
  panelOrigin: string | undefined;
  /** The store's `requestBegins`: called once requests have arrived, before anything reads for them. */
  requestBegins: () => void;
}

/**
 * Admits every request of a route with a scope: who the caller is (API key or console session), its rate limit
 * and the scope; a session must also be at one of the console's hosts and, for a change, pass the CSRF check.
 */
export function admitRequests(app: Api, deps: AdmissionDeps): void {
  /** Refuses or lets through a request whose caller is known; a promise only when the limiter answers later. */
  const admit = (
    request: FastifyRequest,
    reply: FastifyReply,
    scope: Requirement,
    principal: Principal,
  ): Promise<void> | undefined => {
    request.principal = principal;
    if (principal.kind === 'console_user') {
      checkConsoleHost(request, deps.consoleHosts);
      if (changesState(request.method)) checkConsoleWrite(request, deps.panelOrigin);
    }
    const decision = principal.rateLimitExempt ? undefined : deps.rateLimiter.take(principal.rateLimitId);
    if (decision instanceof Promise) return decision.then((d) => enforce(reply, principal, scope, d));
    enforce(reply, principal, scope, decision);
    return undefined;
  };

  /**
   * `done` goes on with the request or answers the refusal. Callback style: with a key seen before and a limiter
   * in process, a request is admitted without a promise (each one is a turn of the microtask queue).
   */
  const authorize = (arrival: Arrival) => {
    const { request, reply, scope, done } = arrival;
    const refuse = (error: unknown) => done(error instanceof Error ? error : new Error(String(error)));
    let admitted: Promise<void> | undefined;
    try {
      const principal = deps.authenticator.principalOf(request);
      admitted =
        principal instanceof Promise
          ? principal.then((p) => admit(request, reply, scope, p))
          : admit(request, reply, scope, principal);
    } catch (error) {
      // Answered with sendError, as anything a hook rejects with.
      return refuse(error);
    }
    if (admitted === undefined) return done();
    admitted.then(() => done(), refuse);
  };

  // The requests with a scope that one turn of the event loop read are admitted together, once it read them all
  // (setImmediate: the check phase, after the poll phase read the sockets): requestBegins then runs once for all
  // of them, so they share one check for other processes' commits (a pread of SQLite's WAL-index header), and
  // each still sees every commit made before it arrived, since the check is made after the last was read.
  let arrivals: Arrival[] = [];
  const admitArrivals = () => {
    const batch = arrivals;
    arrivals = [];
    deps.requestBegins();
    for (const arrival of batch) authorize(arrival);
  };
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    const route = request.routeOptions;
    request.routeTemplate = route.url ?? UNMATCHED_ROUTE;
    const scope = route.config.scope;
    if (scope === undefined) {
      deps.requestBegins();
      return done();
    }
    if (arrivals.length === 0) setImmediate(admitArrivals);
    arrivals.push({ request, reply, scope, done });
  });
}
