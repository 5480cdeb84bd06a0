import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import Type from 'typebox';
import { nullableAsTypeList, pageBytes, serializerFactory, withListBytes } from '../../src/http/serialization.ts';
import { Page } from '../../src/http/schemas/common.ts';
import { EventSchema } from '../../src/http/schemas/events.ts';

const route = { method: 'GET', url: '/events', httpStatus: '200', schema: Type.Array(Type.Ref('Event')) };

const events = [
  {
    id: 1,
    kind: 'device.created',
    created_at: '2026-01-01T00:00:00.000Z',
    server_id: 3,
    server_name: 'de-1 "quoted"',
    device_id: 7,
    device_name: 'phone\n',
    node_name: 'local',
    ip: '10.0.0.2',
    country: 'DE',
    detail: 'ok',
    actor: 'admin',
  },
  {
    id: 2,
    kind: 'server.deleted',
    created_at: '2026-01-01T00:00:01.000Z',
    server_id: null,
    server_name: null,
    device_id: null,
    device_name: null,
    node_name: null,
    ip: null,
    country: null,
    detail: '',
    actor: 'system',
    extra: 'left out by the schema',
  },
];

describe('response serialization', () => {
  it("writes exactly what Fastify's own serializer writes, nulls and values alike", () => {
    const own = SerializerSelector()({ Event: EventSchema })(route);
    const ours = serializerFactory({ Event: EventSchema })(route);
    assert.equal(ours(events), own(events));
    const { extra: _, ...second } = events[1] ?? {};
    assert.deepEqual(JSON.parse(ours(events)), [events[0], second]);
  });

  it('turns nullable scalars into type lists and literal unions into an enum, and leaves other unions', () => {
    const schema = Type.Object({
      a: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
      b: Type.Union([Type.Literal('x'), Type.Literal('y')]),
      c: Type.Union([Type.Object({}), Type.Null()]),
    });
    assert.deepEqual(nullableAsTypeList(schema), {
      type: 'object',
      required: ['a', 'b', 'c'],
      properties: {
        a: { type: ['string', 'null'], format: 'date-time' },
        b: { type: 'string', enum: ['x', 'y'] },
        c: { anyOf: [{ type: 'object', properties: {} }, { type: 'null' }] },
      },
    });
  });

  it("writes a page from its items' JSON exactly as the page schema serialises it", () => {
    const serializer = (schema: unknown) => serializerFactory({ Event: EventSchema })({ ...route, schema });
    const item = serializer(Type.Ref('Event'));
    const page = serializer(Page(Type.Ref('Event')));
    const items = events.map((event) => Buffer.from(item(event)));
    for (const hasMore of [true, false]) {
      assert.equal(pageBytes(items, hasMore).toString(), page({ data: events, has_more: hasMore }));
      assert.equal(pageBytes([], hasMore).toString(), page({ data: [], has_more: hasMore }));
    }
  });

  it("writes an object from its list items' JSON exactly as the object's schema serialises it", () => {
    const schema = Type.Object({
      name: Type.String(),
      inner: Type.Object({ events: Type.Array(Type.String()) }),
      events: Type.Array(Type.Ref('Event')),
      more: Type.Boolean(),
    });
    const serializer = (s: unknown) => serializerFactory({ Event: EventSchema })({ ...route, schema: s });
    const item = serializer(Type.Ref('Event'));
    const whole = serializer(schema);
    const items = events.map((event) => Buffer.from(item(event)));
    // Strings that read like the list's key, escaped quotes and backslashes included.
    for (const name of ['plain', '"events":[]', 'x\\"events":[]']) {
      const object = { name, inner: { events: ['"events":[]'] }, events, more: true };
      const envelope = whole({ ...object, events: [] });
      assert.equal(withListBytes(envelope, 'events', items).toString(), whole(object));
      assert.equal(withListBytes(envelope, 'events', []).toString(), envelope);
    }
    const full = whole({ name: 'n', inner: { events: ['a'] }, events, more: false });
    assert.throws(() => withListBytes(full, 'events', items), /no empty list events/);
  });
});
