import Type from 'typebox';
import type { Api } from '../api.ts';
import { publicOperation } from '../operation.ts';

/** The API description (docs/api.md "Base URL and the OpenAPI document"), served under /api/v1 without a key. */
export function openApiRoute(api: Api): void {
  let document: unknown;
  api.get(
    '/openapi.json',
    publicOperation({ summary: 'The OpenAPI 3.1 description of this API', tags: ['meta'] }),
    async () => {
      document ??= api.swagger();
      return document;
    },
  );
}

/** `GET /healthz`: the process is up and its database answers; no key needed. */
export function metaRoutes(app: Api, deps: { checkHealth: () => Promise<void>; version: string }): void {
  app.get(
    '/healthz',
    publicOperation({
      summary: 'Liveness and database check',
      tags: ['meta'],
      response: { 200: Type.Object({ status: Type.Literal('ok'), version: Type.String() }) },
    }),
    async () => {
      await deps.checkHealth();
      return { status: 'ok' as const, version: deps.version };
    },
  );
}
