import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type SerializerFactory, SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import Fastify from 'fastify';
import Type from 'typebox';
import type { Page as PageOf } from '../../src/domain/paging.ts';
import {
  nullableAsTypeList,
  PageWriter,
  pageBytes,
  serializerFactory,
  withListBytes,
} from '../../src/http/serialization.ts';
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

  it('sends a page as its schema serialises it, made once per page object (a kept page: its identity)', async () => {
    const Item = Type.Object({ id: Type.Integer(), name: Type.String() }, { $id: 'Item' });
    const Holder = Type.Object(
      { label: Type.String(), items: Type.Array(Type.Ref('Item')), has_more: Type.Boolean() },
      { $id: 'Holder' },
    );
    let reads = 0;
    /** An item whose name counts its reads: each is a serialisation. */
    const item = (id: number) => ({
      id,
      get name() {
        reads++;
        return `item "${id}"`;
      },
    });
    const kept: PageOf<{ id: number; name: string }> = { data: [item(1), item(2)], has_more: true };
    let compiled = 0;
    const counting: SerializerFactory = (external, options) => {
      const build = serializerFactory(external, options);
      return (route) => {
        compiled++;
        return build(route);
      };
    };
    const app = Fastify({ schemaController: { compilersFactory: { buildSerializer: counting } } });
    app.addSchema(Item);
    app.addSchema(Holder);
    const writer = new PageWriter<{ id: number; name: string }>('Item');
    let current = kept;
    let label = 'first';
    app.get('/page', { schema: { response: { 200: Page(Type.Ref('Item')) } } }, (_request, reply) =>
      writer.send(reply, current),
    );
    app.get('/holder', { schema: { response: { 200: Type.Ref('Holder') } } }, (_request, reply) =>
      writer.sendWithin(reply, 'Holder', { label, has_more: current.has_more }, 'items', current.data),
    );
    const expected = '{"data":[{"id":1,"name":"item \\"1\\""},{"id":2,"name":"item \\"2\\""}],"has_more":true}';
    try {
      const first = await app.inject({ url: '/page' });
      assert.equal(first.body, expected);
      assert.equal(first.headers['content-type'], 'application/json; charset=utf-8');
      assert.equal((await app.inject({ url: '/page' })).body, expected);
      assert.equal(reads, 2, 'the same page object again: its body as made the first time');
      current = { data: [...kept.data], has_more: true };
      assert.equal((await app.inject({ url: '/page' })).body, expected);
      assert.equal(reads, 4, 'another page object is serialised anew');

      const holder = await app.inject({ url: '/holder' });
      assert.deepEqual(JSON.parse(holder.body), { label: 'first', items: JSON.parse(expected).data, has_more: true });
      label = 'second';
      assert.equal(JSON.parse((await app.inject({ url: '/holder' })).body).label, 'second');
      assert.equal(reads, 6, "a list's items are serialised once per list, its holder's own fields every time");
      const serializers = compiled;
      for (let i = 0; i < 3; i++) assert.equal((await app.inject({ url: '/holder' })).statusCode, 200);
      assert.equal(compiled, serializers, "the holder's schema is compiled once, not on every request");
    } finally {
      await app.close();
    }
  });
});
