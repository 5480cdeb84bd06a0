import Type from 'typebox';
import { EVENT_KINDS, oneOfKinds } from '../../domain/events.ts';
import { DateTime, PlainText } from './common.ts';

const Url = PlainText({
  minLength: 1,
  maxLength: 2048,
  description: 'http(s) URL; private and loopback targets are refused unless the panel allows them',
});
/** The kinds a webhook subscribes to, written into the document; ping is always delivered by the ping endpoint. */
const SUBSCRIBABLE = EVENT_KINDS.filter((kind) => kind !== 'ping');
const Kind = Type.String({
  pattern: `^${oneOfKinds(SUBSCRIBABLE)}$`,
  description: SUBSCRIBABLE.join(', '),
});
const Kinds = Type.Array(Kind, {
  minItems: 1,
  maxItems: EVENT_KINDS.length,
  description: 'event kinds to receive',
});
const Description = PlainText({ maxLength: 500 });
const NullableString = Type.Union([Type.String(), Type.Null()]);
const NullableInt = Type.Union([Type.Integer(), Type.Null()]);
const NullableTime = Type.Union([DateTime, Type.Null()]);

const webhookFields = {
  id: Type.Integer(),
  url: Type.String(),
  events: Type.Array(Type.String()),
  description: Type.String(),
  enabled: Type.Boolean({ description: 'a receiver answering 410 Gone turns this off' }),
  created_by: Type.String(),
  created_at: DateTime,
  updated_at: DateTime,
};

export const WebhookSchema = Type.Object(webhookFields, { $id: 'Webhook', title: 'Webhook' });

export const WebhookWithSecretSchema = Type.Object(
  {
    ...webhookFields,
    secret: Type.String({ description: 'whsec_…: verifies the webhook-signature header; shown only now' }),
  },
  { title: 'WebhookWithSecret' },
);

export const DeliverySchema = Type.Object(
  {
    id: Type.Integer(),
    webhook_id: Type.Integer(),
    event_id: Type.Integer(),
    kind: Type.String(),
    payload: Type.Ref('Event'),
    state: Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')]),
    attempts: Type.Integer(),
    next_attempt_at: NullableTime,
    last_attempt_at: NullableTime,
    response_status: NullableInt,
    error: NullableString,
    duration_ms: NullableInt,
    created_at: DateTime,
  },
  { $id: 'WebhookDelivery', title: 'WebhookDelivery' },
);

export const WebhookCreateBody = Type.Object(
  { url: Url, events: Kinds, description: Type.Optional(Description), enabled: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);

export const WebhookPatchBody = Type.Object(
  {
    url: Type.Optional(Url),
    events: Type.Optional(Kinds),
    description: Type.Optional(Description),
    enabled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
