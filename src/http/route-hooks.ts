import type { FastifyReply, FastifyRequest } from 'fastify';
import { bodyRequired } from '../domain/error-cases.ts';
import type { IdempotencyService } from '../services/idempotency.ts';
import { withRequestId } from '../services/request-context.ts';
import { changesState } from './admission.ts';
import type { Api } from './api.ts';
import { requestFingerprint, sendReplay } from './idempotency.ts';

/** A route option that may hold one hook, several, or none, as a list. */
function hookList<T>(hooks: T | T[] | undefined): T[] {
  if (hooks === undefined) return [];
  return Array.isArray(hooks) ? hooks : [hooks];
}

/**
 * All-optional bodies may be left out, and a missing required field is named instead of "body must be object".
 * A PATCH's body is the change itself (RFC 5789), so one without is refused rather than read as a change of
 * nothing: the OpenAPI document marks it required (src/http/openapi-document.ts).
 */
async function absentBodyIsEmpty(request: FastifyRequest): Promise<void> {
  if (request.body !== undefined) return;
  if (request.method === 'PATCH') throw bodyRequired();
  request.body = {};
}

/**
 * Hooks that only some routes need, attached to those routes alone so a plain GET runs none: an absent body
 * read as empty where there is a body schema; the request's id for the activity log and mails of a change;
 * the Idempotency-Key of the routes that take one (a replay answered before the handler, the answer kept after).
 */
export function attachRouteHooks(app: Api, idempotency: IdempotencyService): void {
  const beginIdempotency = async (request: FastifyRequest, reply: FastifyReply) => {
    const key = request.headers['idempotency-key'];
    if (request.principal === null || typeof key !== 'string') return;
    // Keys are kept per owner: a console user's never meet another user's or an API key's.
    const principal = request.principal;
    const owner = principal.kind === 'api_key' ? { apiKeyId: principal.keyId } : { consoleUserId: principal.userId };
    const begun = await idempotency.begin(owner, key, requestFingerprint(request));
    if (begun.kind === 'replay') return sendReplay(reply, begun.statusCode, begun.body);
    request.idempotencyClaim = begun.claim;
  };
  const finishIdempotency = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const claim = request.idempotencyClaim;
    if (claim !== null && typeof payload === 'string') {
      request.idempotencyClaim = null;
      await idempotency.finish(claim, reply.statusCode, payload);
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
}
