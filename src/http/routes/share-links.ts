import Type from 'typebox';
import type { ShareLinkService } from '../../services/share-links.ts';
import type { Api } from '../api.ts';
import { actorOf } from '../auth.ts';
import { operation } from '../operation.ts';
import { DateTime, IdParams } from '../schemas/common.ts';

const ShareLinkSchema = Type.Object(
  {
    url: Type.String({ description: 'the public page; anyone holding it can use the config' }),
    expires_at: Type.Union([DateTime, Type.Null()], { description: 'null when the link does not expire' }),
  },
  { title: 'ShareLink' },
);

/** `POST|GET|DELETE /devices/{id}/share` (docs/api.md "Share links", docs/decisions.md "Share links"). */
export function shareLinkRoutes(api: Api, links: ShareLinkService): void {
  api.post(
    '/devices/:id/share',
    operation('devices:write', {
      summary: "Make (or replace) the device's share link",
      description: 'One link per device: a new link replaces the old one, which stops working at once.',
      tags: ['share links'],
      params: IdParams,
      body: Type.Object({ expires_at: Type.Optional(DateTime) }, { additionalProperties: false }),
      response: { 201: ShareLinkSchema },
    }),
    async (request, reply) =>
      reply.code(201).send(await links.create(request.params.id, request.body.expires_at, actorOf(request))),
  );

  api.get(
    '/devices/:id/share',
    operation('devices:read', {
      summary: "The device's share link, expired or not",
      tags: ['share links'],
      params: IdParams,
      response: { 200: ShareLinkSchema },
    }),
    (request) => links.get(request.params.id),
  );

  api.delete(
    '/devices/:id/share',
    operation('devices:write', {
      summary: "Delete the device's share link; it stops working at once",
      description: 'Removing a missing link also succeeds.',
      tags: ['share links'],
      params: IdParams,
      response: { 204: Type.Null() },
    }),
    async (request, reply) => {
      await links.delete(request.params.id, actorOf(request));
      return reply.code(204).send(null);
    },
  );
}
