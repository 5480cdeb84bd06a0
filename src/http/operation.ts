import type { FastifySchema } from 'fastify';
import Type, { type TSchema } from 'typebox';
import type { Scope } from '../domain/api-keys.ts';
import type { Principal } from '../services/api-keys.ts';
import type { IdempotencyClaim } from '../services/idempotency.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The scope an API key needs for the route; routes without one are public. */
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

/**
 * One operation of the API: the scope it needs (enforced by the auth hook and stated in the OpenAPI
 * document's security requirement), its schemas, and the error body for every failure status.
 */
export function operation<S extends FastifySchema & { response: Record<number, TSchema> }>(
  scope: Scope,
  schema: S,
  options: { idempotent?: boolean } = {},
) {
  const idempotent = options.idempotent ?? false;
  return {
    config: { scope, idempotent },
    schema: {
      ...schema,
      description: `${schema.description ?? ''}\n\nRequires an API key with the scope \`${scope}\`.${
        idempotent ? ' Honours the `Idempotency-Key` header (24 hours, per API key).' : ''
      }`.trim(),
      security: [{ bearerAuth: [scope] }],
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
