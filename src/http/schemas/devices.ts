import Type, { type Static } from 'typebox';
import {
  DEVICE_STATUSES,
  EXTERNAL_ID_MAX,
  METADATA_MAX_DEPTH,
  NAME_MAX,
  SPEED_LIMIT_MAX_KBPS,
} from '../../domain/devices.ts';
import { QUOTA_ACTIONS } from '../../domain/plans.ts';
import { DateTime, Id, PlainText } from './common.ts';

export const Usage = Type.Object({ rx_bytes: Type.Integer(), tx_bytes: Type.Integer(), total_bytes: Type.Integer() });
export const LimitPeriod = Type.Union([Type.Literal('monthly'), Type.Literal('total')]);
export const QuotaAction = Type.Enum(QUOTA_ACTIONS, {
  description: 'at the data limit: cut removes the peer, throttle keeps it at throttle_speed each way',
});
export const ThrottleSpeed = Type.Union([Type.Integer({ minimum: 1, maximum: SPEED_LIMIT_MAX_KBPS }), Type.Null()], {
  description: 'kbit/s each way at the data limit; required with quota_action throttle, null with cut',
});
const Status = Type.Union(DEVICE_STATUSES.map((s) => Type.Literal(s)));
const Metadata = Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()], {
  description: `any JSON object up to 4 KB, nested at most ${METADATA_MAX_DEPTH} levels; null clears it`,
});

export const DeviceSchema = Type.Object(
  {
    id: Type.Integer(),
    server_id: Type.Integer(),
    name: Type.String(),
    external_id: Type.Union([Type.String(), Type.Null()]),
    metadata: Metadata,
    address: Type.String({ description: "the device's IPv4 address on its server's subnet" }),
    address6: Type.Union([Type.String(), Type.Null()], {
      description:
        "the device's IPv6 address on its server's subnet6 (RFC 5952 text), reading like its IPv4 address where " +
        'it fits (10.128.0.77 is <subnet6>::77); null when the server has no IPv6',
    }),
    public_key: Type.String(),
    client_key: Type.Boolean({
      description:
        'true when the client made the key pair: the panel has no private key and the config has no PrivateKey line',
    }),
    enabled: Type.Boolean(),
    status: Status,
    online: Type.Boolean({ description: 'a handshake within the last 3 minutes' }),
    last_handshake: Type.Union([DateTime, Type.Null()]),
    data_limit: Type.Integer({ description: 'bytes, downloads and uploads together; 0 means no limit' }),
    limit_period: LimitPeriod,
    period_usage: Usage,
    usage_reset_at: DateTime,
    expires_at: Type.Union([DateTime, Type.Null()]),
    speed_limit: Type.Integer({ description: 'kbit/s each way; 0 means no limit' }),
    plan_id: Type.Union([Type.Integer(), Type.Null()], {
      description: 'the plan the device was made from; null: none, or the plan was deleted',
    }),
    quota_action: QuotaAction,
    throttle_speed: ThrottleSpeed,
    top_up_bytes: Type.Integer({
      description: "bytes added to this period's allowance by top-ups; they lapse at the next monthly reset",
    }),
    month_usage: Usage,
    created_at: DateTime,
    updated_at: DateTime,
    config: Type.String({ description: 'the wg-quick client config' }),
  },
  { $id: 'Device', title: 'Device' },
);

export const UsageBucket = Type.Object({
  start: Type.String({ format: 'date', description: 'first day of the day or month, in the panel time zone' }),
  rx_bytes: Type.Integer(),
  tx_bytes: Type.Integer(),
});

export const UsageReportSchema = Type.Object(
  {
    month_usage: Usage,
    period_usage: Usage,
    data_limit: Type.Integer(),
    limit_period: LimitPeriod,
    usage_reset_at: DateTime,
    daily: Type.Array(UsageBucket, { description: 'the last 90 days with usage, oldest first' }),
    monthly: Type.Array(UsageBucket, { description: 'the last 24 months with usage, oldest first' }),
  },
  { $id: 'UsageReport', title: 'UsageReport' },
);

const Name = PlainText({ minLength: 1, maxLength: NAME_MAX });
const ExternalId = PlainText({ minLength: 1, maxLength: EXTERNAL_ID_MAX });
const DataLimit = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER });
const SpeedLimit = Type.Integer({ minimum: 0, maximum: SPEED_LIMIT_MAX_KBPS });
const ExpiresAt = Type.Union([DateTime, Type.Null()]);

/** What a client may set on a device at creation and change later (docs/api.md "Creating a device"). */
const DeviceSettings = {
  name: Type.Optional(Name),
  external_id: Type.Optional(ExternalId),
  metadata: Type.Optional(Metadata),
  enabled: Type.Optional(Type.Boolean()),
  data_limit: Type.Optional(DataLimit),
  limit_period: Type.Optional(LimitPeriod),
  expires_at: Type.Optional(ExpiresAt),
  speed_limit: Type.Optional(SpeedLimit),
  quota_action: Type.Optional(QuotaAction),
  throttle_speed: Type.Optional(ThrottleSpeed),
};

export const DeviceCreateBody = Type.Object(
  {
    server_id: Type.Union([Id, Type.Literal('auto')]),
    country: Type.Optional(
      Type.String({ pattern: '^[A-Za-z]{2}$', description: 'only with server_id auto; ISO 3166-1 alpha-2' }),
    ),
    city: Type.Optional(PlainText({ minLength: 1, maxLength: 64, description: 'only with server_id auto' })),
    public_key: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    plan_id: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: Number.MAX_SAFE_INTEGER,
        description: 'the device takes the plan\'s values; fields given beside it win (docs/api.md "Plans")',
      }),
    ),
    ...DeviceSettings,
  },
  { additionalProperties: false },
);

export const DevicePatchBody = Type.Object(DeviceSettings, { additionalProperties: false });

export type DeviceSettingsBody = Static<typeof DevicePatchBody>;

export const DeviceListQuery = {
  server_id: Type.Optional(Id),
  external_id: Type.Optional(ExternalId),
  search: Type.Optional(
    PlainText({
      maxLength: EXTERNAL_ID_MAX,
      description:
        'devices whose name or external_id contains this text, ignoring case (on SQLite, of ASCII letters only); ' +
        '% and _ are plain characters; empty means no search',
    }),
  ),
  status: Type.Optional(Status),
};

export const GroupParams = Type.Object({
  external_id: PlainText({ minLength: 1, maxLength: EXTERNAL_ID_MAX, description: 'URL-encoded' }),
});

export const GroupPatchBody = Type.Object(
  {
    enabled: Type.Optional(Type.Boolean()),
    expires_at: Type.Optional(ExpiresAt),
    data_limit: Type.Optional(DataLimit),
    limit_period: Type.Optional(LimitPeriod),
    speed_limit: Type.Optional(SpeedLimit),
    metadata: Type.Optional(Metadata),
  },
  { additionalProperties: false },
);

export const GroupSchema = Type.Object(
  {
    external_id: Type.String(),
    device_count: Type.Integer(),
    month_usage: Usage,
    devices: Type.Array(Type.Ref('Device'), {
      description: 'a page of the devices, oldest first (GET takes `after` and `limit`; a change answers the first)',
    }),
    has_more: Type.Boolean({ description: 'more devices follow this page' }),
  },
  { $id: 'Group', title: 'Group' },
);
