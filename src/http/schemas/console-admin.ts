import Type from 'typebox';
import { ACTIVITY_RESOURCES } from '../../domain/activity.ts';
import { SCOPES } from '../../domain/api-keys.ts';
import { CONSOLE_ROLES } from '../../domain/console-users.ts';
import { PASSWORD_MAX_CHARS, PASSWORD_MIN_CHARS } from '../../domain/passwords.ts';
import { DateTime, PlainText } from './common.ts';

const NullableTime = Type.Union([DateTime, Type.Null()]);
const Role = Type.Enum(CONSOLE_ROLES, {
  description: 'admin: everything; viewer: reads everything but webhooks, changes nothing',
});
/** Its length is the service's rule (in characters, which may be two UTF-16 units each): the schema only bounds it. */
const Password = Type.String({
  minLength: 1,
  maxLength: PASSWORD_MAX_CHARS * 2,
  description: `${PASSWORD_MIN_CHARS} to ${PASSWORD_MAX_CHARS} characters`,
});

const apiKeyFields = {
  id: Type.Integer(),
  name: Type.String(),
  scopes: Type.Array(Type.Enum(SCOPES)),
  rate_limit_exempt: Type.Boolean(),
  created_at: DateTime,
  last_used_at: NullableTime,
  revoked_at: Type.Union([DateTime, Type.Null()], { description: 'null while the key works' }),
};

export const ApiKeySchema = Type.Object(apiKeyFields, { $id: 'ApiKey', title: 'ApiKey' });

export const ApiKeyWithSecretSchema = Type.Object(
  { ...apiKeyFields, key: Type.String({ description: 'vpnk_…: the key itself, shown only now' }) },
  { title: 'ApiKeyWithSecret' },
);

export const ApiKeyCreateBody = Type.Object(
  {
    name: PlainText({ minLength: 1, maxLength: 64, description: 'letters, digits, spaces, dots, dashes, underscores' }),
    scopes: Type.Array(Type.Enum([...SCOPES, 'all']), {
      minItems: 1,
      maxItems: SCOPES.length + 1,
      description: 'the scopes (docs/api.md "Keys and scopes"), or all',
    }),
    rate_limit_exempt: Type.Optional(Type.Boolean({ default: false })),
  },
  { additionalProperties: false },
);

export const ConsoleUserSchema = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    role: Role,
    created_at: DateTime,
    last_sign_in_at: NullableTime,
  },
  { $id: 'ConsoleUser', title: 'ConsoleUser' },
);

export const ConsoleUserCreateBody = Type.Object(
  {
    name: PlainText({ minLength: 1, maxLength: 64, description: 'letters, digits, ., _, - or @' }),
    role: Type.Optional(Role),
    password: Password,
  },
  { additionalProperties: false },
);

export const ConsoleUserRoleBody = Type.Object({ role: Role }, { additionalProperties: false });

export const ConsoleUserPasswordBody = Type.Object({ password: Password }, { additionalProperties: false });

const Fields = Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()]);

export const ActivityEntrySchema = Type.Object(
  {
    id: Type.Integer(),
    created_at: DateTime,
    actor: Type.String({ description: 'admin, system, via API key NAME or via console user NAME' }),
    request_id: Type.Union([Type.String(), Type.Null()], { description: 'the X-Request-Id of the change' }),
    action: Type.String({ description: '<resource>.<verb>, e.g. device.updated' }),
    resource: Type.Enum(ACTIVITY_RESOURCES),
    resource_id: Type.String(),
    summary: Type.String(),
    before: Type.Union([Fields], { description: 'the fields the change touched, before it; null on create' }),
    after: Type.Union([Fields], { description: 'the same fields after it; null on delete' }),
  },
  { $id: 'ActivityEntry', title: 'ActivityEntry' },
);

/** The activity log's filters, spread into its querystring beside the paging fields. */
export const ActivityQueryFields = {
  actor: Type.Optional(
    PlainText({
      minLength: 1,
      maxLength: 200,
      description: 'admin, system, via API key NAME, via console user NAME, or an API key NAME',
    }),
  ),
  resource: Type.Optional(Type.Enum(ACTIVITY_RESOURCES)),
  resource_id: Type.Optional(PlainText({ minLength: 1, maxLength: 255, description: 'only with resource' })),
  since: Type.Optional(DateTime),
};
