import type { FastifyRequest, FastifySchema } from 'fastify';
import Type, { type TSchema } from 'typebox';
import { CONSOLE_ADMIN, type Requirement, scopesOfRole } from '../domain/console-users.ts';
import type { Principal } from '../services/principals.ts';
import type { IdempotencyClaim } from '../services/idempotency.ts';

export { CONSOLE_ADMIN, type Requirement } from '../domain/console-users.ts';

/** Whether the principal meets the route's requirement. */
export function meets(principal: Principal, requirement: Requirement): boolean {
  if (requirement === CONSOLE_ADMIN) return principal.kind === 'console_user' && principal.role === 'admin';
  return principal.scopes.has(requirement);
}

/** What the request's caller meets; nothing without a caller (a route without a scope has none). */
export function callerMeets(request: FastifyRequest): (requirement: Requirement) => boolean {
  const { principal } = request;
  return (requirement) => principal !== null && meets(principal, requirement);
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** What the route asks of its caller (an API key's scope, or CONSOLE_ADMIN); routes without one are public. */
    scope?: Requirement;
    /** The route honours the Idempotency-Key header (docs/api.md "Idempotency"). */
    idempotent?: boolean;
  }
  interface FastifyRequest {
    principal: Principal | null;
    idempotencyClaim: IdempotencyClaim | null;
    /** The matched route's template, taken once as the request arrives; null before that. */
    routeTemplate: string | null;
    /** The session cookie's name in this panel (`sessionCookieName`): the same for every request. */
    sessionCookieName: string;
  }
}

const errorRef = Type.Ref('Error');

/** An OpenAPI security requirement: scheme name to the scopes it needs. */
type SecurityRequirement = Record<string, string[]>;

/**
 * One operation of the API: the scope it needs (enforced by the auth hook and stated in the OpenAPI
 * document's security requirement: an API key with the scope, or a console session), its schemas, and the
 * error body for every failure status.
 */
export function operation<S extends FastifySchema & { response: Record<number, TSchema> }>(
  scope: Requirement,
  schema: S,
  options: { idempotent?: boolean } = {},
) {
  const idempotent = options.idempotent ?? false;
  const replay = idempotent ? ' Honours the `Idempotency-Key` header (24 hours, per API key or console user).' : '';
  const { security, who } = whoMay(scope);
  return {
    config: { scope, idempotent },
    schema: {
      ...schema,
      description: `${schema.description ?? ''}\n\n${who}${replay}`.trim(),
      security,
      ...(idempotent
        ? { headers: Type.Object({ 'idempotency-key': Type.Optional(Type.String({ minLength: 1, maxLength: 255 })) }) }
        : {}),
      response: { ...schema.response, '4xx': errorRef, '5xx': errorRef },
    },
  };
}

/** The OpenAPI security requirement of a route and the sentence that says who may call it. */
function whoMay(scope: Requirement): { security: SecurityRequirement[]; who: string } {
  if (scope === CONSOLE_ADMIN) {
    const who =
      "Requires an admin's console session (`console:admin`); an API key, whatever its scopes, and a viewer " +
      'get 403 `insufficient_scope`.';
    return { security: [{ consoleSession: [] }], who };
  }
  const session = scopesOfRole('viewer').has(scope)
    ? 'a console session (admin or viewer)'
    : "an admin's console session";
  return {
    security: [{ bearerAuth: [scope] }, { consoleSession: [] }],
    who: `Requires an API key with the scope \`${scope}\`, or ${session}.`,
  };
}

/** A route anyone may call, without a key. */
export function publicOperation<S extends FastifySchema>(schema: S) {
  return { schema: { ...schema, security: [] } };
}
