/**
 * Every answer of /api/v1 carries `Cache-Control: no-store`, `X-Content-Type-Options: nosniff` and a CSP that
 * allows nothing (issue 30 item 5): successes, errors, refusals of the auth hook and 429s alike.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { ManualClock } from '../../src/domain/clock.ts';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';

const API_HEADERS = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
};

function assertApiHeaders(response: LightMyRequestResponse, status: number, what: string): void {
  assert.equal(response.statusCode, status, `${what}: ${response.body}`);
  for (const [name, value] of Object.entries(API_HEADERS))
    assert.equal(response.headers[name], value, `${what}: ${name}`);
}

describe('the API answers uncacheable, unsniffable and unframeable', () => {
  let db: TestDatabase;
  let t: AppUnderTest;
  let key: string;

  before(async () => {
    db = await createTestDatabase('sqlite');
    // A clock that stands still: the rate limit's burst never refills during the test.
    t = await buildTestApp(db, {}, new ManualClock(Date.parse('2026-05-01T08:00:00Z')));
    key = await t.createKey('headers', 'all');
  });
  after(async () => {
    await t.close();
    await db.drop();
  });

  const get = (url: string, headers: Record<string, string> = { authorization: `Bearer ${key}` }) =>
    t.app.inject({ method: 'GET', url, headers });

  it('on a 200, a 4xx of a route, of the auth hook and of the router, and a 422', async () => {
    assertApiHeaders(await get('/api/v1/servers'), 200, 'a list');
    assertApiHeaders(await get('/api/v1/openapi.json', {}), 200, 'the OpenAPI document, without a key');
    assertApiHeaders(await get('/api/v1/servers/999'), 404, 'an unknown server');
    assertApiHeaders(await get('/api/v1/nope'), 404, 'an unknown path');
    assertApiHeaders(await get('/api/v1/servers', {}), 401, 'no key');
    assertApiHeaders(await get('/api/v1/devices/%zz'), 400, 'a malformed escape, refused by the router');
    const invalid = await t.app.inject({
      method: 'POST',
      url: '/api/v1/servers',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      payload: '[1,2]',
    });
    assertApiHeaders(invalid, 422, 'a body that is not an object');
  });

  it('on a 429', async () => {
    const limited = await t.createKey('limited', 'servers:read');
    let answer: LightMyRequestResponse | undefined;
    for (let i = 0; i < 61; i++) answer = await get('/api/v1/servers', { authorization: `Bearer ${limited}` });
    assert.ok(answer !== undefined);
    assertApiHeaders(answer, 429, 'the 61st request of a burst');
  });

  it('leaves the paths outside the API as they were', async () => {
    const health = await get('/healthz', {});
    assert.equal(health.statusCode, 200);
    assert.equal(health.headers['content-security-policy'], undefined);
    assert.equal(health.headers['cache-control'], undefined);
  });
});
