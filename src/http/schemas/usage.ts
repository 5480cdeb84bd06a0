import Type from 'typebox';
import { FLEET_DAYS_DEFAULT, FLEET_DAYS_MAX } from '../../services/usage.ts';
import { Usage, UsageBucket } from './devices.ts';

export const FleetUsageQuery = Type.Object(
  {
    days: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: FLEET_DAYS_MAX,
        default: FLEET_DAYS_DEFAULT,
        description: 'how many days, ending today, `daily` covers',
      }),
    ),
  },
  { additionalProperties: false },
);

export const FleetUsageSchema = Type.Object(
  {
    time_zone: Type.String({ description: 'the panel time zone (PANEL_TIMEZONE), an IANA name' }),
    today: Usage,
    this_month: Usage,
    daily: Type.Array(UsageBucket, { description: 'the days of the last `days` with usage, oldest first' }),
  },
  { $id: 'FleetUsage', title: 'FleetUsage' },
);
