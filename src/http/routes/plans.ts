import Type, { type Static } from 'typebox';
import type { PlanInput, PlanService, PlanView } from '../../services/plans.ts';
import type { Api } from '../api.ts';
import { actorOf } from '../auth.ts';
import { operation } from '../operation.ts';
import { PageQueryFields, pageRequest } from '../paging.ts';
import { IdParams, Page } from '../schemas/common.ts';
import { PlanPatchBody, PlanCreateBody } from '../schemas/plans.ts';
import { PageWriter } from '../serialization.ts';

const PlanRef = Type.Ref('Plan');

/** A plan body's fields as PlanService takes them. */
function planInput(b: Static<typeof PlanPatchBody>): Partial<PlanInput> {
  return {
    name: b.name,
    dataLimit: b.data_limit,
    limitPeriod: b.limit_period,
    speedLimit: b.speed_limit,
    durationDays: b.duration_days,
    maxDevices: b.max_devices,
    quotaAction: b.quota_action,
    throttleSpeed: b.throttle_speed,
    expiryStarts: b.expiry_starts,
  };
}

/** Plans (docs/api.md "Plans"): read with devices:read, written with plans:write. */
export function planRoutes(api: Api, plans: PlanService): void {
  const planPages = new PageWriter<PlanView>('Plan');

  api.get(
    '/plans',
    operation('devices:read', {
      summary: 'List plans, oldest first',
      tags: ['plans'],
      querystring: Type.Object(PageQueryFields, { additionalProperties: false }),
      response: { 200: Page(PlanRef) },
    }),
    async (request, reply) => planPages.send(reply, await plans.list(pageRequest(request.query))),
  );

  api.post(
    '/plans',
    operation('plans:write', {
      summary: 'Create a plan',
      tags: ['plans'],
      body: PlanCreateBody,
      response: { 201: PlanRef },
    }),
    async (request, reply) => {
      const input = { ...planInput(request.body), name: request.body.name };
      return reply.code(201).send(await plans.create(input, actorOf(request)));
    },
  );

  api.get(
    '/plans/:id',
    operation('devices:read', { summary: 'Get a plan', tags: ['plans'], params: IdParams, response: { 200: PlanRef } }),
    (request) => plans.get(request.params.id),
  );

  api.patch(
    '/plans/:id',
    operation('plans:write', {
      summary: 'Change a plan',
      description: 'Devices made from the plan keep the values they took; new devices take the new ones.',
      tags: ['plans'],
      params: IdParams,
      body: PlanPatchBody,
      response: { 200: PlanRef },
    }),
    (request) => plans.update(request.params.id, planInput(request.body), actorOf(request)),
  );

  api.delete(
    '/plans/:id',
    operation('plans:write', {
      summary: 'Delete a plan',
      description: 'Devices made from the plan keep the values they took.',
      tags: ['plans'],
      params: IdParams,
      response: { 204: Type.Null() },
    }),
    async (request, reply) => {
      await plans.delete(request.params.id, actorOf(request));
      return reply.code(204).send(null);
    },
  );
}
