import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Api } from './api.ts';

/**
 * What every answer of the API carries: no cache keeps it (a device's config holds its private key, `POST
 * /api-keys` the new key), no browser guesses another type for it, and as a page it may load and frame nothing.
 * A route that sends its own `Cache-Control` replaces the default.
 */
const API_HEADERS = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
};

/** The API's headers on a request under `/api/` (unknown paths there included); other paths get none. */
export function setApiHeaders(request: FastifyRequest, reply: FastifyReply): void {
  if (request.url.startsWith('/api/')) reply.headers(API_HEADERS);
}

/**
 * Sets them as a request arrives, before anything can refuse it: errors, 401s and 429s carry them too, and a
 * route's own `Cache-Control` set later wins.
 */
export function apiHeaders(app: Api): void {
  app.addHook('onRequest', (request, reply, done) => {
    setApiHeaders(request, reply);
    done();
  });
}
