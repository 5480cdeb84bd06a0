import type { ActivityLog } from '../../services/activity.ts';
import type { Api } from '../api.ts';
import Type from 'typebox';
import { callerMeets, operation } from '../operation.ts';
import { PageQueryFields, pageRequest } from '../paging.ts';
import { ActivityQueryFields } from '../schemas/console-admin.ts';
import { Page } from '../schemas/common.ts';

/** The activity log, filtered as `vpn-panel activity` filters it. */
export function activityRoutes(api: Api, activity: ActivityLog): void {
  api.get(
    '/activity',
    operation('events:read', {
      summary: 'The activity log: who changed what, oldest first',
      description:
        'Every change made through the API, the console, the CLI or by the panel itself, with the fields it ' +
        'touched (never a secret); kept 365 days. Keep the last id seen and ask again with after=<id>. A caller ' +
        'sees the entries of what it may read: devices and plans with `devices:read`, servers and nodes with ' +
        '`servers:read`, webhooks with `webhooks:write`, API keys and console users with `console:admin`; ' +
        'asking for another resource is refused (403 `insufficient_scope`).',
      tags: ['activity'],
      querystring: Type.Object({ ...PageQueryFields, ...ActivityQueryFields }, { additionalProperties: false }),
      response: { 200: Page(Type.Ref('ActivityEntry')) },
    }),
    (request) => {
      const { actor, resource, resource_id: resourceId, since } = request.query;
      return activity.page({ actor, resource, resourceId, since }, pageRequest(request.query), callerMeets(request));
    },
  );
}
