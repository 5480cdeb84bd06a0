import type { FastifyRequest } from 'fastify';

/** The actor of a request's changes: `via API key <name>`. Only routes with a scope reach here. */
export function actorOf(request: FastifyRequest): string {
  if (request.principal === null) throw new Error(`route ${request.routeOptions.url} has no scope, so no actor`);
  return request.principal.actor;
}
