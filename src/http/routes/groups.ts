import Type from 'typebox';
import type { DeviceBody } from '../../services/device-views.ts';
import type { GroupService } from '../../services/groups.ts';
import type { Api } from '../api.ts';
import { actorOf } from '../auth.ts';
import { operation } from '../operation.ts';
import { PageQueryFields, pageRequest } from '../paging.ts';
import { PageWriter } from '../serialization.ts';
import { GroupParams, GroupPatchBody } from '../schemas/devices.ts';

const GroupRef = Type.Ref('Group');

/** Groups (docs/api.md "Groups"). */
export function groupRoutes(api: Api, services: { groups: GroupService }): void {
  const { groups } = services;
  // A group shown again serialises only its own fields; its page of devices is the device list's kept page.
  const devicePages = new PageWriter<DeviceBody>('Device');

  api.get(
    '/groups/:external_id',
    operation('devices:read', {
      summary: 'Get a group: its totals and a page of its devices (every device with this external_id), oldest first',
      tags: ['groups'],
      params: GroupParams,
      querystring: Type.Object(PageQueryFields, { additionalProperties: false }),
      response: { 200: GroupRef },
    }),
    async (request, reply) => {
      const { devices: members, ...group } = await groups.get(request.params.external_id, pageRequest(request.query));
      return devicePages.sendWithin(reply, 'Group', group, 'devices', members);
    },
  );

  api.patch(
    '/groups/:external_id',
    operation('devices:write', {
      summary: 'Set fields on every device of the group',
      description:
        'Every value is checked before any device changes: a value wrong for one device changes none. ' +
        'Answers the group after it with the first page of its devices.',
      tags: ['groups'],
      params: GroupParams,
      body: GroupPatchBody,
      response: { 200: GroupRef },
    }),
    async (request) => {
      const b = request.body;
      const group = await groups.update(
        request.params.external_id,
        {
          enabled: b.enabled,
          expiresAt: b.expires_at,
          dataLimit: b.data_limit,
          limitPeriod: b.limit_period,
          speedLimit: b.speed_limit,
          metadata: b.metadata,
        },
        actorOf(request),
      );
      return group;
    },
  );

  api.post(
    '/groups/:external_id/usage/reset',
    operation(
      'devices:write',
      {
        summary: 'Restart the count toward the data limit of every device of the group',
        tags: ['groups'],
        params: GroupParams,
        response: { 200: GroupRef },
      },
      { idempotent: true },
    ),
    async (request) => {
      const claim = request.idempotencyClaim;
      const group = await groups.resetUsage(
        request.params.external_id,
        actorOf(request),
        claim ? (tx, result) => claim.storeReply(tx, 200, result) : undefined,
      );
      return group;
    },
  );

  api.delete(
    '/groups/:external_id',
    operation('devices:write', {
      summary: 'Delete every device of the group',
      tags: ['groups'],
      params: GroupParams,
      response: { 204: Type.Null() },
    }),
    async (request, reply) => {
      await groups.delete(request.params.external_id, actorOf(request));
      return reply.code(204).send(null);
    },
  );
}
