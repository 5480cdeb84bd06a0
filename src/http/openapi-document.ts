import swagger from '@fastify/swagger';
import type { Api } from './api.ts';
import { sessionCookieName } from './auth.ts';

/**
 * The served OpenAPI 3.1 document (`GET /api/v1/openapi.json`), made from the routes' own schemas: registered
 * before the routes, so it sees each of them.
 */
export async function describeApi(app: Api, secureCookies: boolean): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'vpn-panel API',
        version: '1.2',
        description: 'Manage WireGuard devices, groups, servers, events and webhooks with scoped API keys.',
      },
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description: 'An API key `vpnk_…` made with `vpn-panel keys create`.',
          },
          consoleSession: {
            type: 'apiKey',
            in: 'cookie',
            name: sessionCookieName(secureCookies),
            description:
              'A console session, made by `POST /console/session` (the cookie is `__Host-vpn_panel_session` when ' +
              '`PANEL_URL` is https; two of them in a request are refused 400 `bad_request`). An admin has every ' +
              'scope, a viewer the read scopes (`devices:read`, `servers:read`, `events:read`). A change (POST, ' +
              'PUT, PATCH, DELETE) made with it also needs the header `X-Console-Request: 1` and, when an `Origin` ' +
              "header is sent, the panel's own origin; otherwise 403 `csrf_check_failed`, as at a Host that is not " +
              "the panel's (an IP address, localhost, or PANEL_URL's, PUBLIC_HOST's or HOST's name). An " +
              '`Authorization` header wins over it.',
          },
        },
      },
    },
    transformObject: (document) => {
      if (!('openapiObject' in document)) return document.swaggerObject;
      bodiesAsTaken(document.openapiObject.paths);
      return document.openapiObject;
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
  });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

/**
 * A body left out is read as `{}`, except a PATCH's, which is refused (src/http/route-hooks.ts), so the document
 * marks a body required only for a PATCH and where `{}` is refused, its schema naming a required field:
 * @fastify/swagger marks every body required, which `POST /devices/{id}/share` without one contradicted.
 */
function bodiesAsTaken(paths: unknown): void {
  if (!isRecord(paths)) return;
  for (const operations of Object.values(paths)) {
    if (!isRecord(operations)) continue;
    for (const [method, operation] of Object.entries(operations)) {
      const body = isRecord(operation) ? operation.requestBody : undefined;
      if (!isRecord(body) || !isRecord(body.content)) continue;
      const json = body.content['application/json'];
      const schema = isRecord(json) ? json.schema : undefined;
      const namesAField = isRecord(schema) && Array.isArray(schema.required) && schema.required.length > 0;
      body.required = method === 'patch' || namesAField;
    }
  }
}
