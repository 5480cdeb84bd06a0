import Type from 'typebox';
import type { ApiKeyInfo, ApiKeyService } from '../../services/api-keys.ts';
import type { Api } from '../api.ts';
import { actorOf } from '../auth.ts';
import { CONSOLE_ADMIN, operation } from '../operation.ts';
import { ApiKeyCreateBody, ApiKeyWithSecretSchema } from '../schemas/console-admin.ts';
import { IdParams, Page } from '../schemas/common.ts';

const ApiKeyRef = Type.Ref('ApiKey');

function view(info: ApiKeyInfo) {
  return {
    id: info.id,
    name: info.name,
    scopes: info.scopes,
    rate_limit_exempt: info.rateLimitExempt,
    created_at: info.createdAt,
    last_used_at: info.lastUsedAt,
    revoked_at: info.revokedAt,
  };
}

/** The console's API keys page: the same keys as `vpn-panel keys`, for an admin's console session only. */
export function apiKeyRoutes(api: Api, keys: ApiKeyService): void {
  api.get(
    '/api-keys',
    operation(CONSOLE_ADMIN, {
      summary: 'List API keys, live and revoked, oldest first (never the keys themselves)',
      tags: ['api-keys'],
      response: { 200: Page(ApiKeyRef) },
    }),
    async () => ({ data: (await keys.list()).map(view), has_more: false }),
  );

  api.post(
    '/api-keys',
    operation(CONSOLE_ADMIN, {
      summary: 'Make an API key; the answer carries the key, shown only once',
      tags: ['api-keys'],
      body: ApiKeyCreateBody,
      response: { 201: ApiKeyWithSecretSchema },
    }),
    async (request, reply) => {
      const { name, scopes, rate_limit_exempt: rateLimitExempt } = request.body;
      const made = await keys.create({ name, scopes: scopes.join(','), rateLimitExempt }, actorOf(request));
      return reply.code(201).send({ ...view(made.info), key: made.key });
    },
  );

  api.delete(
    '/api-keys/:id',
    operation(CONSOLE_ADMIN, {
      summary: 'Revoke an API key: its next request is refused, on every panel',
      tags: ['api-keys'],
      params: IdParams,
      response: { 204: Type.Null() },
    }),
    async (request, reply) => {
      await keys.revoke(String(request.params.id), actorOf(request));
      return reply.code(204).send(null);
    },
  );
}
