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
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
  });
}
