import Type from 'typebox';
import { AppError } from '../../domain/errors.ts';
import { EVENT_KINDS, isEventKind, oneOfKinds } from '../../domain/events.ts';
import type { PanelEvent } from '../../domain/events.ts';
import type { EventService } from '../../services/events.ts';
import type { Api } from '../api.ts';
import { operation } from '../operation.ts';
import { PageQueryFields, pageRequest } from '../paging.ts';
import { Id, Page } from '../schemas/common.ts';
import { PageWriter } from '../serialization.ts';

const KIND = oneOfKinds(EVENT_KINDS);
/**
 * `kind`: event kinds separated by commas, each with spaces around it or none; empty items are skipped. The
 * query's schema says exactly that, so a client of the document (schemathesis) knows which values are taken.
 */
const KIND_LIST_PATTERN = `^ *${KIND}? *(?:, *${KIND}? *)*$`;

function parseKinds(text: string | undefined) {
  if (text === undefined) return undefined;
  const kinds = text
    .split(',')
    .map((k) => k.replace(/^ +| +$/g, ''))
    .filter((k) => k !== '');
  const unknown = kinds.filter((k) => !isEventKind(k));
  if (unknown.length > 0)
    throw new AppError('bad_request', `unknown event kind ${unknown.join(', ')}; kinds are ${EVENT_KINDS.join(', ')}`, {
      kind: `unknown: ${unknown.join(', ')}`,
    });
  return kinds.filter(isEventKind);
}

export function eventRoutes(api: Api, events: EventService): void {
  // Event pages are kept pages (EventService.page): each is serialised once.
  const eventPages = new PageWriter<PanelEvent>('Event');
  api.get(
    '/events',
    operation('events:read', {
      summary: 'List events, oldest first',
      description: 'Keep the last event id seen and ask again with after=<id>.',
      tags: ['events'],
      querystring: Type.Object(
        {
          ...PageQueryFields,
          server_id: Type.Optional(Id),
          device_id: Type.Optional(Id),
          kind: Type.Optional(
            Type.String({ maxLength: 2000, pattern: KIND_LIST_PATTERN, description: 'comma-separated event kinds' }),
          ),
        },
        { additionalProperties: false },
      ),
      response: { 200: Page(Type.Ref('Event')) },
    }),
    async (request, reply) => {
      const { server_id: serverId, device_id: deviceId, kind } = request.query;
      const page = await events.page({ serverId, deviceId, kinds: parseKinds(kind) }, pageRequest(request.query));
      return eventPages.send(reply, page);
    },
  );
}
