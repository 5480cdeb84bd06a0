import Type from 'typebox';
import type { DeviceService, RenewalRequest } from '../../services/devices.ts';
import type { GroupService } from '../../services/groups.ts';
import type { Api } from '../api.ts';
import { actorOf } from '../auth.ts';
import { operation } from '../operation.ts';
import { IdParams } from '../schemas/common.ts';
import { GroupParams } from '../schemas/devices.ts';
import { RenewBody, type RenewBodyFields } from '../schemas/plans.ts';

const DESCRIPTION =
  'The expiry moves to max(now, expires_at) + days, or to until; plan_id switches to that plan (its values, and ' +
  'its duration_days unless days or until is given). The usage count restarts unless reset_usage is false. A ' +
  'device cut off at its limit or expiry connects again. Posts device.renewed. With an Idempotency-Key a ' +
  'repeated call renews once.';

function renewal(b: RenewBodyFields): RenewalRequest {
  return { days: b.days, until: b.until, planId: b.plan_id, resetUsage: b.reset_usage ?? true };
}

/** Renewals of a device and of a group, and top-ups (docs/api.md "Renewal", "Top-up"). */
export function renewalRoutes(api: Api, services: { devices: DeviceService; groups: GroupService }): void {
  const { devices, groups } = services;

  api.post(
    '/devices/:id/renew',
    operation(
      'devices:write',
      {
        summary: 'Renew a device: extend its expiry, optionally switch plans, restart its usage count',
        description: DESCRIPTION,
        tags: ['devices'],
        params: IdParams,
        body: RenewBody,
        response: { 200: Type.Ref('Device') },
      },
      { idempotent: true },
    ),
    async (request) => {
      const claim = request.idempotencyClaim;
      const placed = await devices.renew(
        request.params.id,
        renewal(request.body),
        actorOf(request),
        claim ? (tx, result) => claim.storeReply(tx, 200, devices.body(result)) : undefined,
      );
      return devices.body(placed);
    },
  );

  api.post(
    '/devices/:id/top-up',
    operation(
      'devices:write',
      {
        summary: "Add bytes to the allowance of the device's current period",
        description:
          'A device at its data limit connects again at once. The top-up lapses at the next monthly reset (a ' +
          '`total` count keeps it until a usage reset). Posts device.topped_up.',
        tags: ['devices'],
        params: IdParams,
        body: Type.Object(
          { bytes: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }) },
          { additionalProperties: false },
        ),
        response: { 200: Type.Ref('Device') },
      },
      { idempotent: true },
    ),
    async (request) => {
      const claim = request.idempotencyClaim;
      const placed = await devices.topUp(
        request.params.id,
        request.body.bytes,
        actorOf(request),
        claim ? (tx, result) => claim.storeReply(tx, 200, devices.body(result)) : undefined,
      );
      return devices.body(placed);
    },
  );

  api.post(
    '/groups/:external_id/renew',
    operation(
      'devices:write',
      {
        summary: 'Renew every device of the group, each from its own expiry',
        description: `${DESCRIPTION} Answers the group after it with the first page of its devices.`,
        tags: ['groups'],
        params: GroupParams,
        body: RenewBody,
        response: { 200: Type.Ref('Group') },
      },
      { idempotent: true },
    ),
    (request) => {
      const claim = request.idempotencyClaim;
      return groups.renew(
        request.params.external_id,
        renewal(request.body),
        actorOf(request),
        claim ? (tx, result) => claim.storeReply(tx, 200, result) : undefined,
      );
    },
  );
}
