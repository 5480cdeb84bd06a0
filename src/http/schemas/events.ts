import Type from 'typebox';
import { EVENT_KINDS } from '../../domain/events.ts';
import { DateTime } from './common.ts';

const NullableString = Type.Union([Type.String(), Type.Null()]);
const NullableId = Type.Union([Type.Integer(), Type.Null()]);

export const EventSchema = Type.Object(
  {
    id: Type.Integer(),
    kind: Type.Union(EVENT_KINDS.map((k) => Type.Literal(k))),
    created_at: DateTime,
    server_id: NullableId,
    server_name: NullableString,
    device_id: NullableId,
    device_name: NullableString,
    node_name: NullableString,
    ip: NullableString,
    country: NullableString,
    detail: Type.String(),
    actor: Type.String({ description: '`via API key <name>`, `admin` or `system`' }),
  },
  { $id: 'Event', title: 'Event' },
);
