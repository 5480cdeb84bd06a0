import Type, { type Static } from 'typebox';
import { SPEED_LIMIT_MAX_KBPS } from '../../domain/devices.ts';
import { DURATION_DAYS_MAX, EXPIRY_STARTS, MAX_DEVICES_MAX, PLAN_NAME_MAX } from '../../domain/plans.ts';
import { DateTime, PlainText } from './common.ts';
import { LimitPeriod, QuotaAction, ThrottleSpeed } from './devices.ts';

const ExpiryStarts = Type.Enum(EXPIRY_STARTS, {
  description: "when duration_days starts: at the device's creation or at its client's first handshake",
});
const DurationDays = Type.Union([Type.Integer({ minimum: 1, maximum: DURATION_DAYS_MAX }), Type.Null()], {
  description: 'days from the start to expires_at; null: devices from the plan never expire',
});
const MaxDevices = Type.Union([Type.Integer({ minimum: 1, maximum: MAX_DEVICES_MAX }), Type.Null()], {
  description: 'devices per customer (external_id group); null: no cap',
});

export const PlanSchema = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    data_limit: Type.Integer({ description: 'bytes, downloads and uploads together; 0 means no limit' }),
    limit_period: LimitPeriod,
    speed_limit: Type.Integer({ description: 'kbit/s each way; 0 means no limit' }),
    duration_days: DurationDays,
    max_devices: MaxDevices,
    quota_action: QuotaAction,
    throttle_speed: ThrottleSpeed,
    expiry_starts: ExpiryStarts,
    created_at: DateTime,
    updated_at: DateTime,
  },
  { $id: 'Plan', title: 'Plan' },
);

const planSettings = {
  data_limit: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })),
  limit_period: Type.Optional(LimitPeriod),
  speed_limit: Type.Optional(Type.Integer({ minimum: 0, maximum: SPEED_LIMIT_MAX_KBPS })),
  duration_days: Type.Optional(DurationDays),
  max_devices: Type.Optional(MaxDevices),
  quota_action: Type.Optional(QuotaAction),
  throttle_speed: Type.Optional(ThrottleSpeed),
  expiry_starts: Type.Optional(ExpiryStarts),
};
const Name = PlainText({ minLength: 1, maxLength: PLAN_NAME_MAX, description: 'unique among plans' });

export const PlanCreateBody = Type.Object({ name: Name, ...planSettings }, { additionalProperties: false });
export const PlanPatchBody = Type.Object(
  { name: Type.Optional(Name), ...planSettings },
  { additionalProperties: false },
);

export const RenewBody = Type.Object(
  {
    days: Type.Optional(
      Type.Integer({ minimum: 1, maximum: DURATION_DAYS_MAX, description: 'added to max(now, expires_at)' }),
    ),
    until: Type.Optional(DateTime),
    plan_id: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: Number.MAX_SAFE_INTEGER,
        description: 'switch to this plan: its values, and its duration_days unless days or until is given',
      }),
    ),
    reset_usage: Type.Optional(
      Type.Boolean({ default: true, description: 'restart the count toward the data limit (default true)' }),
    ),
  },
  { additionalProperties: false },
);

export type RenewBodyFields = Static<typeof RenewBody>;
