import type { Api } from './api.ts';
import { methodNotAllowed } from '../domain/error-cases.ts';
import { sendError } from './errors.ts';

/** A route's path as a regular expression of the paths it matches: each `:parameter` one segment. */
function pathPattern(url: string): RegExp {
  const segments = url
    .split('/')
    .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  return new RegExp(`^${segments.join('/')}/?$`);
}

/**
 * A request for a path that has routes, by a method none of them takes, is answered 405 `method_not_allowed`
 * with `Allow` listing the path's methods (RFC 9110 15.5.5), not the 404 of a path nothing answers. It is
 * answered as it arrives, before authentication and before a body is read (a QUERY without a content type
 * would otherwise be refused 400 for that). Wildcard routes (the console's assets) are left out: every
 * other path would match them.
 */
export function refuseOtherMethods(app: Api): void {
  const methodsByPath = new Map<string, { pattern: RegExp; methods: Set<string> }>();
  app.addHook('onRoute', (route) => {
    if (route.url.includes('*')) return;
    const entry = methodsByPath.get(route.url) ?? { pattern: pathPattern(route.url), methods: new Set<string>() };
    for (const method of [route.method].flat()) entry.methods.add(method);
    methodsByPath.set(route.url, entry);
  });
  app.addHook('onRequest', (request, reply, done) => {
    if (!request.is404) return done();
    const path = request.url.split('?')[0] ?? '';
    const allowed = new Set<string>();
    for (const { pattern, methods } of methodsByPath.values()) {
      if (pattern.test(path)) for (const method of methods) allowed.add(method);
    }
    if (allowed.size === 0) return done();
    const methods = [...allowed].sort();
    reply.header('allow', methods.join(', '));
    sendError(methodNotAllowed(request.method, path, methods), request, reply);
  });
}
