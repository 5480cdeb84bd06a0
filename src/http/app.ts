import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyReply,
  type FastifyRequest,
  type HookHandlerDoneFunction,
} from 'fastify';
import { AppError } from '../domain/errors.ts';
import { pathBeyondDepth } from '../domain/json-depth.ts';
import { type RateDecision, rateLimitField, rateLimitPolicyField, REQUEST_RATE } from '../domain/rate-limit.ts';
import type { ApiKeyService } from '../services/api-keys.ts';
import type { ActivityLog } from '../services/activity.ts';
import type { ConsoleSessionService } from '../services/console-sessions.ts';
import type { ConsoleUserService } from '../services/console-users.ts';
import type { DeviceService } from '../services/devices.ts';
import type { EventService } from '../services/events.ts';
import type { GroupService } from '../services/groups.ts';
import type { IdempotencyService } from '../services/idempotency.ts';
import type { PanelObserver } from '../services/metrics.ts';
import type { ShareLinkService } from '../services/share-links.ts';
import type { WebhookService } from '../services/webhooks.ts';
import type { NodeService } from '../services/nodes.ts';
import type { Principal } from '../services/principals.ts';
import type { ServerService } from '../services/servers.ts';
import type { UsageService } from '../services/usage.ts';
import { withRequestId } from '../services/request-context.ts';
import type { Api } from './api.ts';
import { apiHeaders, setApiHeaders } from './api-headers.ts';
import { Authenticator, checkConsoleWrite, sessionCookieName } from './auth.ts';
import { checkConsoleHost, guardConsoleHosts } from './console-hosts.ts';
import { sendClientError, sendError } from './errors.ts';
import { requestFingerprint, sendReplay } from './idempotency.ts';
import { meets, type Requirement } from './operation.ts';
import type { RateLimiter } from './rate-limiter.ts';
import { RequestIds } from './request-ids.ts';
import { RequestLogger } from './request-log.ts';
import { serializerFactory } from './serialization.ts';
import { ErrorSchema } from './schemas/common.ts';
import { DeviceSchema, GroupSchema, UsageReportSchema } from './schemas/devices.ts';
import { ActivityEntrySchema, ApiKeySchema, ConsoleUserSchema } from './schemas/console-admin.ts';
import { EventSchema } from './schemas/events.ts';
import { FleetUsageSchema } from './schemas/usage.ts';
import { DeliverySchema, WebhookSchema } from './schemas/webhooks.ts';
import { NodeSchema, ServerSchema } from './schemas/servers.ts';
import { validatorCompiler } from './validation.ts';
import { activityRoutes } from './routes/activity.ts';
import { apiKeyRoutes } from './routes/api-keys.ts';
import { consoleRoutes } from './routes/console.ts';
import { consoleUserRoutes } from './routes/console-users.ts';
import { deviceRoutes } from './routes/devices.ts';
import { eventRoutes } from './routes/events.ts';
import { groupRoutes } from './routes/groups.ts';
import { consoleSessionRoutes } from './routes/console-session.ts';
import type { SignInLimiters } from './sign-in-gate.ts';
import { metaRoutes, openApiRoute } from './routes/meta.ts';
import { serverRoutes } from './routes/servers.ts';
import { shareLinkRoutes } from './routes/share-links.ts';
import { sharePageRoutes } from './routes/share-page.ts';
import { usageRoutes } from './routes/usage.ts';
import { webhookRoutes } from './routes/webhooks.ts';

export interface AppDeps {
  events: EventService;
  apiKeys: ApiKeyService;
  servers: ServerService;
  nodes: NodeService;
  devices: DeviceService;
  groups: GroupService;
  shareLinks: ShareLinkService;
  webhooks: WebhookService;
  usage: UsageService;
  /** Per API key (REQUEST_RATE), and per address on the share page. */
  rateLimiter: RateLimiter;
  /** Per client address, for requests without a key or session known valid (UNAUTHENTICATED_RATE). */
  unauthenticatedLimiter: RateLimiter;
  consoleSessions: ConsoleSessionService;
  consoleUsers: ConsoleUserService;
  activity: ActivityLog;
  /** Console sign-in budgets (per address, IPv6 network, user name from an address and from anywhere). */
  signInLimiters: SignInLimiters;
  /**
   * The origin of `PANEL_URL` when it was set: cookie-authenticated changes must come from it. Unset, the
   * request's own origin (its Host) counts.
   */
  panelOrigin: string | undefined;
  /** The names (besides IP addresses) the console answers at (config `consoleHostNames`, src/http/console-hosts.ts). */
  consoleHostNames: readonly string[];
  /** Session cookies carry `Secure`: `PANEL_URL` is https. */
  secureCookies: boolean;
  idempotency: IdempotencyService;
  /** Checks the database answers, for `/healthz`. */
  checkHealth: () => Promise<void>;
  version: string;
  logger: FastifyBaseLogger;
  /** The proxies whose X-Forwarded-For names the client (config `TRUST_PROXY`); false = none. */
  trustProxy: false | string[];
  /** Connections held at once; more are closed as they arrive. */
  maxConnections: number;
  /** Told of every answer, for the metrics; none: no hook runs. */
  observer?: PanelObserver;
  /**
   * Called once requests have arrived, before anything reads for them (for requests with a scope, once for those
   * of a turn of the event loop): the store's `requestBegins`.
   */
  requestBegins: () => void;
}

/** Request bodies here are small JSON objects (metadata is at most 4 KB). */
const BODY_LIMIT_BYTES = 64 * 1024;
/** Room for metadata's own limit (METADATA_MAX_DEPTH) inside a body, far from a stack's limit. */
const BODY_MAX_DEPTH = 64;
const REQUEST_ID = /^[\w.:-]{1,128}$/;
/**
 * Time to receive a request's headers, and the whole request (headers and body) from its first byte,
 * also before any key is checked. Generous for a slow mobile link: a full 64 KiB body needs only
 * ~18 kbit/s. Only receiving is bounded: POST /servers deploys after its body arrived and may take a
 * minute (the agent's apply timeout) before it answers, which nothing here cuts. Node looks for
 * expired requests every TIMEOUT_CHECK_MS, so a trickle is cut within timeout + TIMEOUT_CHECK_MS.
 */
const HEADERS_TIMEOUT_MS = 20_000;
const REQUEST_TIMEOUT_MS = 30_000;
const TIMEOUT_CHECK_MS = 5_000;
/**
 * An idle keep-alive connection is closed after this: longer than the 60 s after which nginx and the
 * usual load balancers drop idle upstream connections, so the panel never closes one a proxy is about
 * to reuse (Fastify's default, for the same reason).
 */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

/** Every method but GET and HEAD may change something. */
function changesState(method: string | string[]): boolean {
  return (Array.isArray(method) ? method : [method]).some((m) => m !== 'GET' && m !== 'HEAD');
}

const RATE_LIMIT_POLICY = rateLimitPolicyField(REQUEST_RATE);

/** The route of a request that matched none: one label value for all of them, whatever their URL. */
const UNMATCHED_ROUTE = 'unmatched';

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

/** A route option that may hold one hook, several, or none, as a list. */
function hookList<T>(hooks: T | T[] | undefined): T[] {
  if (hooks === undefined) return [];
  return Array.isArray(hooks) ? hooks : [hooks];
}

/** Builds the HTTP application; it never listens (src/main does). */
export async function buildApp(deps: AppDeps): Promise<Api> {
  const requestIds = new RequestIds();
  const app: Api = Fastify({
    loggerInstance: deps.logger,
    bodyLimit: BODY_LIMIT_BYTES,
    trustProxy: deps.trustProxy,
    requestTimeout: REQUEST_TIMEOUT_MS,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    http: { headersTimeout: HEADERS_TIMEOUT_MS, connectionsCheckingInterval: TIMEOUT_CHECK_MS },
    // Logged at trace as Fastify's own handler does (without the raw bytes: see src/main/logging.ts).
    clientErrorHandler: (error, socket) => {
      app.log.trace({ err: error }, 'client error');
      sendClientError(error, socket);
    },
    requestIdHeader: false,
    schemaController: { compilersFactory: { buildSerializer: serializerFactory } },
    childLoggerFactory: (logger, bindings, options) => new RequestLogger(logger, bindings, options),
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : requestIds.next();
    },
    // A 255-character external_id, URL-encoded, is up to 9 bytes a character.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 2400 },
    // The router's own refusals (a malformed %-escape, an over-long path parameter) get the error body too.
    frameworkErrors: (error, request, reply) => {
      setApiHeaders(request, reply);
      return sendError(error, request, reply);
    },
  }).withTypeProvider<TypeBoxTypeProvider>();

  // Node closes connections beyond this as they arrive (each costs a file descriptor and buffers); the
  // log says so at most once a minute, so a flood of connections does not become a flood of lines.
  app.server.maxConnections = deps.maxConnections;
  let dropped = 0;
  let droppedLoggedAtMs = 0;
  app.server.on('drop', () => {
    dropped++;
    if (Date.now() - droppedLoggedAtMs < 60_000) return;
    const fields = { dropped, maxConnections: deps.maxConnections };
    app.log.warn(fields, 'connection cap reached: new connections are closed');
    droppedLoggedAtMs = Date.now();
    dropped = 0;
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setErrorHandler((error, request, reply) => sendError(error, request, reply));
  app.setNotFoundHandler((request, reply) =>
    sendError(new AppError('not_found', `no route ${request.method} ${request.url.split('?')[0]}`), request, reply),
  );
  const observer = deps.observer;
  if (observer !== undefined) {
    // The route's template, never the URL: ids and share tokens stay out of the metrics, and their labels stay few.
    app.addHook('onResponse', (request, reply, done) => {
      // `routeOptions` builds a new object at each read: the onRequest hook read it once.
      const route = request.routeTemplate ?? request.routeOptions.url ?? UNMATCHED_ROUTE;
      observer.httpRequest(request.method, route, reply.statusCode, reply.elapsedTime / 1000);
      done();
    });
  }

  // Only JSON bodies; an empty body counts as none, since POSTs such as usage reset carry nothing.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text === '') return done(null, undefined);
    parseJson(request, text, (error, parsed) => {
      if (error !== null) return done(error, undefined);
      // Whatever runs next (validation, the idempotency fingerprint, a route without a body schema)
      // may walk the body recursively: a deeper one is refused here, naming its top-level field.
      const deep = pathBeyondDepth(parsed, BODY_MAX_DEPTH);
      if (deep === undefined) return done(null, parsed);
      const field = deep[0] ?? 'body';
      const fields = { [field]: 'nested too deep' };
      done(new AppError('validation_failed', `${field} nests deeper than ${BODY_MAX_DEPTH} levels`, fields), undefined);
    });
  });

  app.decorateRequest('principal', null);
  app.decorateRequest('idempotencyClaim', null);
  app.decorateRequest('routeTemplate', null);
  app.decorateRequest('sessionCookieName', sessionCookieName(deps.secureCookies));
  for (const schema of [
    ErrorSchema,
    ServerSchema,
    NodeSchema,
    EventSchema,
    DeviceSchema,
    GroupSchema,
    UsageReportSchema,
    FleetUsageSchema,
    WebhookSchema,
    DeliverySchema,
    ApiKeySchema,
    ConsoleUserSchema,
    ActivityEntrySchema,
  ])
    app.addSchema(schema);

  const consoleHosts: ReadonlySet<string> = new Set(deps.consoleHostNames);
  const authenticator = new Authenticator(deps.apiKeys, deps.consoleSessions, deps.unauthenticatedLimiter);

  /**
   * Refuses a request made with a console session at a foreign Host, or a change made with one that fails the
   * CSRF check; counts the request against its caller's limit (an API key's, or a console user's: REQUEST_RATE
   * either way) and checks the scope; a promise only when the limiter answers later.
   */
  const admit = (
    request: FastifyRequest,
    reply: FastifyReply,
    scope: Requirement,
    principal: Principal,
  ): Promise<void> | undefined => {
    request.principal = principal;
    if (principal.kind === 'console_user') {
      checkConsoleHost(request, consoleHosts);
      if (changesState(request.method)) checkConsoleWrite(request, deps.panelOrigin);
    }
    const decision = principal.rateLimitExempt ? undefined : deps.rateLimiter.take(principal.rateLimitId);
    if (decision instanceof Promise) return decision.then((d) => enforce(reply, principal, scope, d));
    enforce(reply, principal, scope, decision);
    return undefined;
  };

  /**
   * Who the caller is, its rate limit and the scope; `done` goes on with the request or answers the refusal.
   * Callback style: with a key seen before and a limiter in process, a request is admitted without a promise
   * (each one is a turn of the microtask queue on every request).
   */
  const authorize = (arrival: Arrival) => {
    const { request, reply, scope, done } = arrival;
    const refuse = (error: unknown) => done(error instanceof Error ? error : new Error(String(error)));
    let admitted: Promise<void> | undefined;
    try {
      const principal = authenticator.principalOf(request);
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

  // Before the hook below, which may refuse the request.
  apiHeaders(app);

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

  // Hooks that only some routes need are attached to those routes alone, so a plain GET runs none.
  const absentBodyIsEmpty = async (request: FastifyRequest) => {
    // All-optional bodies may be left out, and a missing required field is named instead of
    // "body must be object".
    if (request.body === undefined) request.body = {};
  };
  const beginIdempotency = async (request: FastifyRequest, reply: FastifyReply) => {
    const key = request.headers['idempotency-key'];
    if (request.principal === null || typeof key !== 'string') return;
    if (request.principal.kind === 'console_user') {
      const message = 'Idempotency-Key is kept per API key; a request made with a console session cannot use it';
      throw new AppError('bad_request', message, { 'idempotency-key': 'API keys only' });
    }
    const begun = await deps.idempotency.begin(request.principal.keyId, key, requestFingerprint(request));
    if (begun.kind === 'replay') return sendReplay(reply, begun.statusCode, begun.body);
    request.idempotencyClaim = begun.claim;
  };
  const finishIdempotency = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const claim = request.idempotencyClaim;
    if (claim !== null && typeof payload === 'string') {
      request.idempotencyClaim = null;
      await deps.idempotency.finish(claim, reply.statusCode, payload);
    }
    return payload;
  };
  app.addHook('onRoute', (route) => {
    if (route.schema?.body !== undefined) route.preValidation = [...hookList(route.preValidation), absentBodyIsEmpty];
    // Changes record the request's id (activity log, mails); reads skip this and pay nothing for it.
    if (changesState(route.method)) {
      const handler = route.handler;
      route.handler = function (request, reply) {
        return withRequestId(request.id, () => handler.call(this, request, reply));
      };
    }
    if (route.config?.idempotent === true) {
      route.preHandler = [...hookList(route.preHandler), beginIdempotency];
      route.onSend = [...hookList(route.onSend), finishIdempotency];
    }
  });

  // A keep-alive socket left idle by a request in flight at close() would hold it open until its
  // timeout (72 s): while closing, sockets close as soon as their answer is sent.
  app.addHook('preClose', async () => {
    app.server.keepAliveTimeout = 1;
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'vpn-panel API',
        version: '1.2',
        description: 'Manage WireGuard devices, groups, servers, events and webhooks with scoped API keys.',
      },
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description: 'An API key `vpnk_…` made with `vpn-panel keys create`.',
          },
          consoleSession: {
            type: 'apiKey',
            in: 'cookie',
            name: sessionCookieName(deps.secureCookies),
            description:
              'A console session, made by `POST /console/session` (the cookie is `__Host-vpn_panel_session` when ' +
              '`PANEL_URL` is https; two of them in a request are refused 400 `bad_request`). An admin has every ' +
              'scope, a viewer the read scopes (`devices:read`, `servers:read`, `events:read`). A change (POST, ' +
              'PUT, PATCH, DELETE) made with it also needs the header `X-Console-Request: 1` and, when an `Origin` ' +
              "header is sent, the panel's own origin; otherwise 403 `csrf_check_failed`, as at a Host that is not " +
              "the panel's (an IP address, localhost, or PANEL_URL's, PUBLIC_HOST's or HOST's name). An " +
              '`Authorization` header wins over it.',
          },
        },
      },
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
  });

  metaRoutes(app, deps);
  sharePageRoutes(app, deps);
  // The console's pages and session answer only at the panel's own names (no DNS rebinding); the API at any.
  await app.register(async (consoleContext) => {
    guardConsoleHosts(consoleContext, consoleHosts);
    consoleSessionRoutes(consoleContext, { ...deps, authenticator, timeZone: deps.usage.calendar.timeZone });
    consoleRoutes(consoleContext);
  });
  await app.register(
    async (api) => {
      openApiRoute(api);
      serverRoutes(api, deps);
      deviceRoutes(api, deps.devices);
      usageRoutes(api, deps.usage);
      groupRoutes(api, deps);
      shareLinkRoutes(api, deps.shareLinks);
      webhookRoutes(api, deps.webhooks);
      eventRoutes(api, deps.events);
      activityRoutes(api, deps.activity);
      apiKeyRoutes(api, deps.apiKeys);
      consoleUserRoutes(api, deps.consoleUsers);
    },
    { prefix: '/api/v1' },
  );
  return app;
}
