import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger } from 'fastify';
import { routeNotFound } from '../domain/error-cases.ts';
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
import type { PlanService } from '../services/plans.ts';
import type { WebhookService } from '../services/webhooks.ts';
import type { NodeService } from '../services/nodes.ts';
import type { ServerService } from '../services/servers.ts';
import type { UsageService } from '../services/usage.ts';
import { admitRequests } from './admission.ts';
import type { Api } from './api.ts';
import { apiHeaders } from './api-headers.ts';
import { Authenticator, sessionCookieName } from './auth.ts';
import { guardConsoleHosts } from './console-hosts.ts';
import { sendError } from './errors.ts';
import { acceptJsonBodies } from './json-body.ts';
import { describeApi } from './openapi-document.ts';
import { refuseOtherMethods } from './allowed-methods.ts';
import { countAnswers } from './request-metrics.ts';
import { attachRouteHooks } from './route-hooks.ts';
import { manageConnections, serverOptions } from './server-options.ts';
import type { RateLimiter } from './rate-limiter.ts';
import { ErrorSchema } from './schemas/common.ts';
import { DeviceSchema, GroupSchema, UsageReportSchema } from './schemas/devices.ts';
import { ActivityEntrySchema, ApiKeySchema, ConsoleUserSchema } from './schemas/console-admin.ts';
import { EventSchema } from './schemas/events.ts';
import { FleetUsageSchema } from './schemas/usage.ts';
import { DeliverySchema, WebhookSchema } from './schemas/webhooks.ts';
import { PlanSchema } from './schemas/plans.ts';
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
import { planRoutes } from './routes/plans.ts';
import { renewalRoutes } from './routes/renewals.ts';

export interface AppDeps {
  events: EventService;
  apiKeys: ApiKeyService;
  servers: ServerService;
  nodes: NodeService;
  devices: DeviceService;
  groups: GroupService;
  shareLinks: ShareLinkService;
  webhooks: WebhookService;
  plans: PlanService;
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

/** The schemas the routes refer to by `$ref`, added once at the root (see jsonValidatorCompiler). */
const SHARED_SCHEMAS = [
  ErrorSchema,
  ServerSchema,
  NodeSchema,
  EventSchema,
  DeviceSchema,
  GroupSchema,
  PlanSchema,
  UsageReportSchema,
  FleetUsageSchema,
  WebhookSchema,
  DeliverySchema,
  ApiKeySchema,
  ConsoleUserSchema,
  ActivityEntrySchema,
];

/** Builds the HTTP application; it never listens (src/main does). */
export async function buildApp(deps: AppDeps): Promise<Api> {
  const app: Api = Fastify(serverOptions(deps)).withTypeProvider<TypeBoxTypeProvider>();
  manageConnections(app, deps.maxConnections);
  app.setValidatorCompiler(validatorCompiler);
  app.setErrorHandler((error, request, reply) => sendError(error, request, reply));
  app.setNotFoundHandler((request, reply) =>
    sendError(routeNotFound(request.method, request.url.split('?')[0] ?? ''), request, reply),
  );
  countAnswers(app, deps.observer);
  acceptJsonBodies(app);
  app.decorateRequest('principal', null);
  app.decorateRequest('idempotencyClaim', null);
  app.decorateRequest('routeTemplate', null);
  app.decorateRequest('sessionCookieName', sessionCookieName(deps.secureCookies));
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);

  const consoleHosts: ReadonlySet<string> = new Set(deps.consoleHostNames);
  const authenticator = new Authenticator(deps.apiKeys, deps.consoleSessions, deps.unauthenticatedLimiter);
  // Before admission, which may refuse the request.
  apiHeaders(app);
  admitRequests(app, { ...deps, authenticator, consoleHosts });
  refuseOtherMethods(app);
  attachRouteHooks(app, deps.idempotency);
  await describeApi(app, deps.secureCookies);

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
      planRoutes(api, deps.plans);
      renewalRoutes(api, deps);
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
