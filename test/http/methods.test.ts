/**
 * A method the document does not list for a path the API has is answered 405 `method_not_allowed` with
 * `Allow` naming the path's methods (RFC 9110), before authentication and before any body is read; a path
 * the API does not have stays 404. schemathesis' `unsupported_method` check found the 404s and, for QUERY,
 * the 400 of a body-taking method sent without a content type (test/fuzz/schemathesis.test.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';

describe('methods a path does not take', () => {
  let database: TestDatabase;
  let panel: AppUnderTest;
  let key: string;

  before(async () => {
    database = await createTestDatabase('sqlite');
    panel = await buildTestApp(database);
    key = await panel.createKey('methods', 'all');
  });

  after(async () => {
    await panel?.close();
    await database?.drop();
  });

  const cases = [
    { method: 'PUT', path: '/api/v1/devices/7', allow: 'DELETE, GET, HEAD, PATCH' },
    { method: 'TRACE', path: '/api/v1/devices/7/usage', allow: 'GET, HEAD' },
    { method: 'QUERY', path: '/api/v1/plans/1', allow: 'DELETE, GET, HEAD, PATCH' },
    { method: 'DELETE', path: '/api/v1/devices', allow: 'GET, HEAD, POST' },
    { method: 'PATCH', path: '/healthz', allow: 'GET, HEAD' },
  ] as const;
  for (const { method, path, allow } of cases) {
    for (const withKey of [true, false]) {
      it(`${method} ${path} ${withKey ? 'with' : 'without'} a key: 405 with Allow: ${allow}`, async () => {
        const answer = await panel.app.inject({
          method,
          url: path,
          headers: withKey ? { authorization: `Bearer ${key}` } : {},
        });
        assert.equal(answer.statusCode, 405, answer.body);
        assert.equal(answer.headers.allow, allow);
        assert.match(String(answer.headers['content-type']), /^application\/json/);
        assert.equal(answer.json().error.code, 'method_not_allowed');
        if (path.startsWith('/api/')) assert.equal(answer.headers['cache-control'], 'no-store');
      });
    }
  }

  it('a path the API does not have stays 404, whatever the method', async () => {
    for (const method of ['GET', 'PUT', 'TRACE'] as const) {
      const answer = await panel.app.inject({
        method,
        url: '/api/v1/nope/7',
        headers: { authorization: `Bearer ${key}` },
      });
      assert.equal(answer.statusCode, 404, `${method}: ${answer.body}`);
      assert.equal(answer.json().error.code, 'not_found');
    }
  });
});
