import Type from 'typebox';
import type { DeliveryView, WebhookService, WebhookView } from '../../services/webhooks.ts';
import type { Api } from '../api.ts';
import { actorOf } from '../auth.ts';
import { operation } from '../operation.ts';
import { PageQueryFields, pageRequest } from '../paging.ts';
import { IdParams, Page } from '../schemas/common.ts';
import { PageWriter } from '../serialization.ts';
import { WebhookCreateBody, WebhookPatchBody, WebhookWithSecretSchema } from '../schemas/webhooks.ts';

const WebhookRef = Type.Ref('Webhook');
const DeliveryRef = Type.Ref('WebhookDelivery');
const DESCRIPTION =
  'Deliveries are signed per the Standard Webhooks spec (webhook-id, webhook-timestamp, webhook-signature), ' +
  'sent at least once and retried after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h; ' +
  'receivers de-duplicate on webhook-id.';

export function webhookRoutes(api: Api, webhooks: WebhookService): void {
  // Webhook and delivery pages are kept pages (WebhookService): each is serialised once.
  const webhookPages = new PageWriter<WebhookView>('Webhook');
  const deliveryPages = new PageWriter<DeliveryView>('WebhookDelivery');
  api.get(
    '/webhooks',
    operation('webhooks:write', {
      summary: 'List webhooks',
      tags: ['webhooks'],
      querystring: Type.Object(PageQueryFields, { additionalProperties: false }),
      response: { 200: Page(WebhookRef) },
    }),
    async (request, reply) => webhookPages.send(reply, await webhooks.list(pageRequest(request.query))),
  );

  api.post(
    '/webhooks',
    operation('webhooks:write', {
      summary: 'Add a webhook; the answer carries its secret, shown only once',
      description: DESCRIPTION,
      tags: ['webhooks'],
      body: WebhookCreateBody,
      response: { 201: WebhookWithSecretSchema },
    }),
    async (request, reply) => reply.code(201).send(await webhooks.create(request.body, actorOf(request))),
  );

  api.get(
    '/webhooks/:id',
    operation('webhooks:write', {
      summary: 'Get a webhook',
      tags: ['webhooks'],
      params: IdParams,
      response: { 200: WebhookRef },
    }),
    (request) => webhooks.get(request.params.id),
  );

  api.patch(
    '/webhooks/:id',
    operation('webhooks:write', {
      summary: 'Change a webhook',
      tags: ['webhooks'],
      params: IdParams,
      body: WebhookPatchBody,
      response: { 200: WebhookRef },
    }),
    (request) => webhooks.update(request.params.id, request.body, actorOf(request)),
  );

  api.delete(
    '/webhooks/:id',
    operation('webhooks:write', {
      summary: 'Remove a webhook and its pending deliveries',
      tags: ['webhooks'],
      params: IdParams,
      response: { 204: Type.Null() },
    }),
    async (request, reply) => {
      await webhooks.delete(request.params.id, actorOf(request));
      return reply.code(204).send(null);
    },
  );

  api.get(
    '/webhooks/:id/deliveries',
    operation('webhooks:write', {
      summary: "A webhook's deliveries, oldest first",
      tags: ['webhooks'],
      params: IdParams,
      querystring: Type.Object(
        {
          ...PageQueryFields,
          state: Type.Optional(
            Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')]),
          ),
        },
        { additionalProperties: false },
      ),
      response: { 200: Page(DeliveryRef) },
    }),
    async (request, reply) => {
      const page = await webhooks.deliveries(request.params.id, request.query.state, pageRequest(request.query));
      return deliveryPages.send(reply, page);
    },
  );

  api.post(
    '/webhooks/:id/ping',
    operation('webhooks:write', {
      summary: 'Send a ping event to this webhook, whatever it subscribes to',
      tags: ['webhooks'],
      params: IdParams,
      response: { 200: DeliveryRef },
    }),
    (request) => webhooks.ping(request.params.id, actorOf(request)),
  );
}
