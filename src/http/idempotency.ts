import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';

/** What makes two requests under one Idempotency-Key the same request: method, route, parameters and body. */
export function requestFingerprint(request: FastifyRequest): string {
  return createHash('sha256')
    .update(JSON.stringify([request.method, request.routeOptions.url, request.params, request.body ?? null]))
    .digest('hex');
}

/** Sends a stored reply through the route's serializer, marked as a replay. */
export function sendReplay(reply: FastifyReply, statusCode: number, body: unknown): FastifyReply {
  return reply.code(statusCode).header('idempotent-replayed', 'true').send(body);
}
