import Type from 'typebox';
import { FLEET_DAYS_DEFAULT, type UsageService } from '../../services/usage.ts';
import type { Api } from '../api.ts';
import { operation } from '../operation.ts';
import { FleetUsageQuery } from '../schemas/usage.ts';

export function usageRoutes(api: Api, usage: UsageService): void {
  api.get(
    '/usage',
    operation('devices:read', {
      summary: "The whole fleet's usage: today, this month, and per day",
      description:
        "Days and months are those of the panel time zone (PANEL_TIMEZONE), as in a device's usage. The figures " +
        'are traffic that happened: they keep the bytes of deleted devices and do not change with usage resets.',
      tags: ['devices'],
      querystring: FleetUsageQuery,
      response: { 200: Type.Ref('FleetUsage') },
    }),
    async (request) => usage.fleetReport(request.query.days ?? FLEET_DAYS_DEFAULT),
  );
}
