import type { Server } from 'node:http';
import type { FastifyBaseLogger, FastifyHttpOptions } from 'fastify';
import type { Api } from './api.ts';
import { sendClientError, sendError } from './errors.ts';
import { setApiHeaders } from './api-headers.ts';
import { RequestIds } from './request-ids.ts';
import { RequestLogger } from './request-log.ts';
import { serializerFactory } from './serialization.ts';

/** Request bodies here are small JSON objects (metadata is at most 4 KB). */
const BODY_LIMIT_BYTES = 64 * 1024;
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

export interface ServerOptionsDeps {
  logger: FastifyBaseLogger;
  /** The proxies whose X-Forwarded-For names the client (config `TRUST_PROXY`); false = none. */
  trustProxy: false | string[];
}

/** Fastify's options for the panel: limits and timeouts, request ids, logging, serialising, the router. */
export function serverOptions(deps: ServerOptionsDeps): FastifyHttpOptions<Server> {
  const requestIds = new RequestIds();
  return {
    loggerInstance: deps.logger,
    bodyLimit: BODY_LIMIT_BYTES,
    trustProxy: deps.trustProxy,
    requestTimeout: REQUEST_TIMEOUT_MS,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    http: { headersTimeout: HEADERS_TIMEOUT_MS, connectionsCheckingInterval: TIMEOUT_CHECK_MS },
    // Logged at trace as Fastify's own handler does (without the raw bytes: see src/main/logging.ts).
    clientErrorHandler: (error, socket) => {
      deps.logger.trace({ err: error }, 'client error');
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
  };
}

/**
 * Node closes connections beyond `maxConnections` as they arrive (each costs a file descriptor and buffers); the
 * log says so at most once a minute, so a flood of connections does not become a flood of lines. While closing,
 * a keep-alive socket left idle by a request in flight would hold close() until its timeout (72 s): sockets
 * then close as soon as their answer is sent.
 */
export function manageConnections(app: Api, maxConnections: number): void {
  app.server.maxConnections = maxConnections;
  let dropped = 0;
  let droppedLoggedAtMs = 0;
  app.server.on('drop', () => {
    dropped++;
    if (Date.now() - droppedLoggedAtMs < 60_000) return;
    app.log.warn({ dropped, maxConnections }, 'connection cap reached: new connections are closed');
    droppedLoggedAtMs = Date.now();
    dropped = 0;
  });
  app.addHook('preClose', async () => {
    app.server.keepAliveTimeout = 1;
  });
}
