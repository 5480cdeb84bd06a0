import type { FastifySchema } from 'fastify';
import Type, { type TSchema } from 'typebox';
import type { Scope } from '../domain/api-keys.ts';
import { scopesOfRole } from '../domain/console-users.ts';
import type { Principal } from '../services/principals.ts';
import type { IdempotencyClaim } from '../services/idempotency.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The scope an API key (or a console session's role) needs for the route; routes without one are public. */
    scope?: Scope;
    /** The route honours the Idempotency-Key header (spec §4.1). */
    idempotent?: boolean;
  }
  interface FastifyRequest {
    principal: Principal | null;
    idempotencyClaim: IdempotencyClaim | null;
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
  scope: Scope,
  schema: S,
  options: { idempotent?: boolean } = {},
) {
  const idempotent = options.idempotent ?? false;
  const security: SecurityRequirement[] = [{ bearerAuth: [scope] }, { consoleSession: [] }];
  const session = scopesOfRole('viewer').has(scope)
    ? 'a console session (admin or viewer)'
    : "an admin's console session";
  const replay = idempotent
    ? ' Honours the `Idempotency-Key` header (24 hours, per API key; refused with a console session).'
    : '';
  return {
    config: { scope, idempotent },
    schema: {
      ...schema,
      description: (
        `${schema.description ?? ''}\n\nRequires an API key with the scope \`${scope}\`, ` + `or ${session}.${replay}`
      ).trim(),
      security,
      ...(idempotent
        ? { headers: Type.Object({ 'idempotency-key': Type.Optional(Type.String({ minLength: 1, maxLength: 255 })) }) }
        : {}),
      response: { ...schema.response, '4xx': errorRef, '5xx': errorRef },
    },
  };
}

/** A route anyone may call, without a key. */
export function publicOperation<S extends FastifySchema>(schema: S) {
  return { schema: { ...schema, security: [] } };
}
