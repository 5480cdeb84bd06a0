/**
 * What the console's API keys, Users and Activity pages call (routes/api-keys.ts, console-users.ts,
 * activity.ts), in process on both databases: only an admin's console session manages keys and users (an
 * API key with every scope and a viewer get 403), a key made there is shown once and works, a revoked key
 * stops at its next request although the panel had it in memory, the last admin stays, a new password or a
 * removal ends that user's sessions at once, and the activity log is filtered and paged like the CLI's.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { ADMIN_ACTOR } from '../../src/domain/activity.ts';
import { systemClock } from '../../src/domain/clock.ts';
import { quietPublisher } from '../../src/services/changes.ts';
import { NodeService } from '../../src/services/nodes.ts';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';

const PASSWORD = 'correct horse battery';
const PIN = 'ab'.repeat(32);

interface ActivityPage {
  data: {
    id: number;
    resource: string;
    resource_id: string;
    action: string;
    summary: string;
    before: Record<string, unknown> | null;
    after: Record<string, unknown> | null;
  }[];
  has_more: boolean;
}
const WRITE = { 'x-console-request': '1' };

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** A client address of its own, so that no test spends another's sign-in budget. */
function someAddress(): string {
  return `2001:db8:${randomBytes(2).toString('hex')}:${randomBytes(2).toString('hex')}::1`;
}

async function call(
  t: AppUnderTest,
  method: Method,
  url: string,
  options: { cookie?: string; key?: string; body?: unknown } = {},
): Promise<LightMyRequestResponse> {
  const headers: Record<string, string> = method === 'GET' ? {} : { ...WRITE };
  if (options.cookie !== undefined) headers.cookie = options.cookie;
  if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  return t.app.inject({
    method,
    url,
    headers,
    ...(options.body === undefined ? {} : { payload: JSON.stringify(options.body) }),
    remoteAddress: '127.0.0.1',
  });
}

async function session(t: AppUnderTest, user: string, password = PASSWORD): Promise<string> {
  const response = await t.app.inject({
    method: 'POST',
    url: '/console/session',
    headers: { 'content-type': 'application/json', ...WRITE },
    payload: JSON.stringify({ user, password }),
    remoteAddress: someAddress(),
  });
  assert.equal(response.statusCode, 204, response.body);
  return String(response.headers['set-cookie']).split(';')[0] ?? '';
}

function expect(response: LightMyRequestResponse, status: number) {
  assert.equal(response.statusCode, status, response.body);
  return response.body === '' ? null : response.json();
}

function errorOf(response: LightMyRequestResponse, status: number): { code: string; fields: Record<string, string> } {
  return expect(response, status).error;
}

async function userId(t: AppUnderTest, admin: string, name: string): Promise<number> {
  const list: { data: { id: number; name: string }[] } = expect(
    await call(t, 'GET', '/api/v1/console-users', { cookie: admin }),
    200,
  );
  const user = list.data.find((one) => one.name === name);
  assert.ok(user !== undefined, `${name} is listed`);
  return user.id;
}

for (const kind of DATABASE_KINDS) {
  describe(`console admin API: keys, users, activity (${kind})`, () => {
    let db: TestDatabase;
    let t: AppUnderTest;
    let admin: string;
    let viewer: string;
    let allKey: string;

    before(async () => {
      db = await createTestDatabase(kind);
      t = await buildTestApp(db);
      await t.createUser('alice', 'admin', PASSWORD);
      await t.createUser('victor', 'viewer', PASSWORD);
      admin = await session(t, 'alice');
      viewer = await session(t, 'victor');
      allKey = await t.createKey('everything', 'all');
    });
    after(async () => {
      await t.close();
      await db.drop();
    });

    it('refuses keys and users to a key with every scope and to a viewer: 403 console:admin required', async () => {
      const attempts: [Method, string, unknown][] = [
        ['GET', '/api/v1/api-keys', undefined],
        ['POST', '/api/v1/api-keys', { name: 'minted', scopes: ['all'] }],
        ['DELETE', '/api/v1/api-keys/1', undefined],
        ['GET', '/api/v1/console-users', undefined],
        ['POST', '/api/v1/console-users', { name: 'mallory', password: 'long enough password' }],
        ['PATCH', '/api/v1/console-users/1', { role: 'viewer' }],
        ['PUT', '/api/v1/console-users/1/password', { password: 'long enough password' }],
        ['DELETE', '/api/v1/console-users/1', undefined],
      ];
      for (const [method, url, body] of attempts) {
        for (const [who, credentials] of [
          ['a key with scope all', { key: allKey }],
          ['a viewer', { cookie: viewer }],
        ] as const) {
          const error = errorOf(await call(t, method, url, { ...credentials, body }), 403);
          assert.equal(error.code, 'insufficient_scope', `${method} ${url} by ${who}`);
          assert.deepEqual(error.fields, { scope: 'console:admin required' }, `${method} ${url} by ${who}`);
        }
      }
      const keys = await t.store.db.selectFrom('api_keys').select('name').execute();
      assert.deepEqual(
        keys.map((k) => k.name),
        ['everything'],
        'nothing was made',
      );
    });

    it('an admin makes a key with chosen scopes, shown once, that works; the list never shows it', async () => {
      const made = expect(
        await call(t, 'POST', '/api/v1/api-keys', {
          cookie: admin,
          body: { name: 'shop', scopes: ['servers:read', 'devices:read'] },
        }),
        201,
      );
      assert.match(made.key, /^vpnk_[0-9A-Za-z]{38}$/);
      assert.deepEqual(made.scopes, ['devices:read', 'servers:read']);
      assert.equal(made.revoked_at, null);
      expect(await call(t, 'GET', '/api/v1/servers', { key: made.key }), 200);
      assert.equal(
        errorOf(await call(t, 'POST', '/api/v1/servers', { key: made.key, body: {} }), 403).code,
        'insufficient_scope',
      );
      const list = await call(t, 'GET', '/api/v1/api-keys', { cookie: admin });
      assert.doesNotMatch(list.body, /vpnk_/);
      const shop = expect(list, 200).data.find((k: { name: string }) => k.name === 'shop');
      assert.equal(shop.id, made.id);
      const activity = await t.store.db
        .selectFrom('activity')
        .select('actor')
        .where('action', '=', 'api_key.created')
        .where('resource_id', '=', String(made.id))
        .executeTakeFirstOrThrow();
      assert.equal(activity.actor, 'via console user alice');
    });

    it('names the field of a refused key: unknown scope, no scope, a name taken', async () => {
      const unknown = errorOf(
        await call(t, 'POST', '/api/v1/api-keys', { cookie: admin, body: { name: 'x', scopes: ['devices:delete'] } }),
        422,
      );
      assert.ok(
        Object.keys(unknown.fields).some((field) => field.startsWith('scopes')),
        JSON.stringify(unknown),
      );
      const none = errorOf(
        await call(t, 'POST', '/api/v1/api-keys', { cookie: admin, body: { name: 'x', scopes: [] } }),
        422,
      );
      assert.ok(
        Object.keys(none.fields).some((field) => field.startsWith('scopes')),
        JSON.stringify(none),
      );
      const taken = errorOf(
        await call(t, 'POST', '/api/v1/api-keys', { cookie: admin, body: { name: 'everything', scopes: ['all'] } }),
        409,
      );
      assert.deepEqual(taken, { ...taken, code: 'name_taken', fields: { name: 'taken' } });
    });

    it('a revoked key stops at its very next request, though the panel had it in memory', async () => {
      const made = expect(
        await call(t, 'POST', '/api/v1/api-keys', { cookie: admin, body: { name: 'soon-gone', scopes: ['all'] } }),
        201,
      );
      // Used twice: the second request is answered from the panel's memory of the key.
      expect(await call(t, 'GET', '/api/v1/servers', { key: made.key }), 200);
      expect(await call(t, 'GET', '/api/v1/servers', { key: made.key }), 200);
      expect(await call(t, 'DELETE', `/api/v1/api-keys/${made.id}`, { cookie: admin }), 204);
      assert.equal(errorOf(await call(t, 'GET', '/api/v1/servers', { key: made.key }), 401).code, 'unauthorized');
      const listed = expect(await call(t, 'GET', '/api/v1/api-keys', { cookie: admin }), 200).data;
      assert.notEqual(listed.find((k: { id: number }) => k.id === made.id).revoked_at, null);
      assert.equal(
        errorOf(await call(t, 'DELETE', `/api/v1/api-keys/${made.id}`, { cookie: admin }), 404).code,
        'not_found',
      );
    });

    it('adds a user (password of 12 characters at least), changes the role, which applies at once', async () => {
      const short = errorOf(
        await call(t, 'POST', '/api/v1/console-users', { cookie: admin, body: { name: 'bob', password: 'too short' } }),
        422,
      );
      assert.deepEqual(Object.keys(short.fields), ['password']);
      const bob = expect(
        await call(t, 'POST', '/api/v1/console-users', {
          cookie: admin,
          body: { name: 'bob', role: 'viewer', password: 'bob password 123' },
        }),
        201,
      );
      assert.deepEqual(bob, { ...bob, name: 'bob', role: 'viewer', last_sign_in_at: null });
      assert.equal('password_hash' in bob, false);
      const bobSession = await session(t, 'bob', 'bob password 123');
      assert.equal(
        errorOf(await call(t, 'GET', '/api/v1/console-users', { cookie: bobSession }), 403).code,
        'insufficient_scope',
      );
      const promoted = expect(
        await call(t, 'PATCH', `/api/v1/console-users/${bob.id}`, { cookie: admin, body: { role: 'admin' } }),
        200,
      );
      assert.equal(promoted.role, 'admin');
      expect(await call(t, 'GET', '/api/v1/console-users', { cookie: bobSession }), 200);
      const taken = errorOf(
        await call(t, 'POST', '/api/v1/console-users', {
          cookie: admin,
          body: { name: 'BOB', password: 'bob password 456' },
        }),
        409,
      );
      assert.equal(taken.code, 'name_taken');
      const changed = await t.store.db
        .selectFrom('activity')
        .select(['actor', 'summary'])
        .where('action', '=', 'console_user.role_changed')
        .executeTakeFirstOrThrow();
      assert.deepEqual(changed, { actor: 'via console user alice', summary: 'console user bob: role viewer -> admin' });
    });

    it('a new password or a removal ends that user’s sessions at once', async () => {
      const carol = expect(
        await call(t, 'POST', '/api/v1/console-users', {
          cookie: admin,
          body: { name: 'carol', role: 'viewer', password: 'carol password 1' },
        }),
        201,
      );
      const first = await session(t, 'carol', 'carol password 1');
      expect(await call(t, 'GET', '/api/v1/servers', { cookie: first }), 200);
      expect(
        await call(t, 'PUT', `/api/v1/console-users/${carol.id}/password`, {
          cookie: admin,
          body: { password: 'carol password 2' },
        }),
        200,
      );
      assert.equal(errorOf(await call(t, 'GET', '/api/v1/servers', { cookie: first }), 401).code, 'unauthorized');
      const second = await session(t, 'carol', 'carol password 2');
      expect(await call(t, 'GET', '/api/v1/servers', { cookie: second }), 200);
      expect(await call(t, 'DELETE', `/api/v1/console-users/${carol.id}`, { cookie: admin }), 204);
      assert.equal(errorOf(await call(t, 'GET', '/api/v1/servers', { cookie: second }), 401).code, 'unauthorized');
      assert.equal(
        errorOf(await call(t, 'DELETE', `/api/v1/console-users/${carol.id}`, { cookie: admin }), 404).code,
        'not_found',
      );
    });

    it('keeps the last admin (409 last_admin), and allows it while another admin remains', async () => {
      const bob = await userId(t, admin, 'bob');
      // bob is an admin since the role test: demote him, then alice is the last admin.
      expect(await call(t, 'PATCH', `/api/v1/console-users/${bob}`, { cookie: admin, body: { role: 'viewer' } }), 200);
      const alice = await userId(t, admin, 'alice');
      const demote = errorOf(
        await call(t, 'PATCH', `/api/v1/console-users/${alice}`, { cookie: admin, body: { role: 'viewer' } }),
        409,
      );
      assert.equal(demote.code, 'last_admin');
      assert.deepEqual(Object.keys(demote.fields), ['role']);
      assert.equal(
        errorOf(await call(t, 'DELETE', `/api/v1/console-users/${alice}`, { cookie: admin }), 409).code,
        'last_admin',
      );
      const users = expect(await call(t, 'GET', '/api/v1/console-users', { cookie: admin }), 200).data;
      assert.equal(users.find((u: { id: number }) => u.id === alice).role, 'admin', 'still an admin');
      expect(await call(t, 'PATCH', `/api/v1/console-users/${bob}`, { cookie: admin, body: { role: 'admin' } }), 200);
      expect(
        await call(t, 'PATCH', `/api/v1/console-users/${alice}`, { cookie: admin, body: { role: 'viewer' } }),
        200,
      );
      // Demoted, alice's own session lost the admin's reach at once; bob puts her back.
      assert.equal(
        errorOf(await call(t, 'GET', '/api/v1/console-users', { cookie: admin }), 403).code,
        'insufficient_scope',
      );
      const bobSession = await session(t, 'bob', 'bob password 123');
      expect(
        await call(t, 'PATCH', `/api/v1/console-users/${alice}`, { cookie: bobSession, body: { role: 'admin' } }),
        200,
      );
    });

    it('reads the activity log with events:read or any console user; other keys get 403', async () => {
      const reader = await t.createKey('reader', 'events:read');
      const devicesOnly = await t.createKey('devices-only', 'devices:read');
      expect(await call(t, 'GET', '/api/v1/activity', { key: reader }), 200);
      expect(await call(t, 'GET', '/api/v1/activity', { cookie: viewer }), 200);
      const refused = errorOf(await call(t, 'GET', '/api/v1/activity', { key: devicesOnly }), 403);
      assert.deepEqual(refused.fields, { scope: 'events:read required' });
    });

    it('shows each caller the entries of what it may read only, and no URL or pin of a node or webhook', async () => {
      const hookBody = { url: 'https://1.1.1.1/hook?token=RECEIVER-SECRET-123', events: ['node.offline'] };
      const hookId = expect(await call(t, 'POST', '/api/v1/webhooks', { cookie: admin, body: hookBody }), 201).id;
      const moved = { url: 'https://1.1.1.1:8443/services/T1/B2/CHAT-SECRET-456' };
      expect(await call(t, 'PATCH', `/api/v1/webhooks/${hookId}`, { cookie: admin, body: moved }), 200);
      const edge = { name: 'edge', url: 'https://10.20.30.40:7000', token: 'edge-token-0123456789' };
      await new NodeService(t.store.db, systemClock, quietPublisher(t.store.db, systemClock)).add(
        { ...edge, publicHost: 'edge.example.net', certSha256: PIN },
        ADMIN_ACTOR,
      );
      const server = expect(await call(t, 'POST', '/api/v1/servers', { cookie: admin, body: { name: 'log' } }), 201);
      const device = { server_id: server.id, name: 'logged', metadata: { plan: 'pro' } };
      expect(await call(t, 'POST', '/api/v1/devices', { cookie: admin, body: device }), 201);

      const devicesReader = await t.createKey('devices-reader', 'events:read,devices:read');
      const eventsOnly = await t.createKey('events-only', 'events:read');
      const everyScope = { key: allKey };
      const entries = async (credentials: { cookie?: string; key?: string }, query = 'limit=200') =>
        expect(await call(t, 'GET', `/api/v1/activity?${query}`, credentials), 200) as ActivityPage;
      const kinds = (page: ActivityPage) => [...new Set(page.data.map((entry) => entry.resource))].sort();

      const ofAdmin = await entries({ cookie: admin });
      assert.deepEqual(kinds(ofAdmin), ['api_key', 'console_user', 'device', 'node', 'server', 'webhook']);
      assert.deepEqual(kinds(await entries(everyScope)), ['device', 'node', 'server', 'webhook']);
      const ofViewer = await entries({ cookie: viewer });
      assert.deepEqual(kinds(ofViewer), ['device', 'node', 'server']);
      assert.deepEqual(kinds(await entries({ key: devicesReader })), ['device']);
      assert.deepEqual(await entries({ key: eventsOnly }), { data: [], has_more: false });
      const hidden = new Set(['api_key', 'console_user', 'webhook']);
      assert.deepEqual(
        ofViewer.data.map((entry) => entry.id),
        ofAdmin.data.filter((entry) => !hidden.has(entry.resource)).map((entry) => entry.id),
        'the viewer sees every other entry',
      );

      // Not even an admin reads a webhook's URL (only its host and origin), nor a node's agent URL or pin.
      const text = JSON.stringify(ofAdmin);
      for (const secret of ['RECEIVER-SECRET', 'CHAT-SECRET', '/hook', '/services/', '10.20.30.40', PIN])
        assert.ok(!text.includes(secret), `${secret} is not in the log`);
      const hook = ofAdmin.data.filter((entry) => entry.resource === 'webhook' && entry.resource_id === String(hookId));
      assert.deepEqual(
        hook.map((entry) => [entry.summary, entry.before?.url, entry.after?.url]),
        [
          [`webhook ${hookId} to 1.1.1.1 created`, undefined, 'https://1.1.1.1/…'],
          [`webhook ${hookId} to 1.1.1.1:8443 updated`, 'https://1.1.1.1/…', 'https://1.1.1.1:8443/…'],
        ],
      );
      const added = ofViewer.data.find((entry) => entry.action === 'node.added' && entry.summary.includes('edge'));
      assert.equal(added?.summary, 'node edge added');
      for (const field of ['url', 'cert_sha256', 'last_error', 'token']) assert.ok(!(field in (added?.after ?? {})));
      assert.equal(added?.after?.public_host, 'edge.example.net');

      // Asking for a resource the caller may not read is refused as its routes refuse it.
      for (const [credentials, resource, requirement] of [
        [{ cookie: viewer }, 'webhook', 'webhooks:write'],
        [{ cookie: viewer }, 'api_key', 'console:admin'],
        [everyScope, 'console_user', 'console:admin'],
        [{ key: eventsOnly }, 'device', 'devices:read'],
        [{ key: devicesReader }, 'node', 'servers:read'],
      ] as const) {
        const refused = errorOf(await call(t, 'GET', `/api/v1/activity?resource=${resource}`, credentials), 403);
        assert.deepEqual([refused.code, refused.fields], ['insufficient_scope', { scope: `${requirement} required` }]);
      }

      // Filtered before the page is cut: every page but the last is full.
      const pages: number[] = [];
      let after = 0;
      for (;;) {
        const page = await entries({ cookie: viewer }, `limit=2&after=${after}`);
        pages.push(...page.data.map((entry) => entry.id));
        const last = page.data.at(-1);
        if (!page.has_more || last === undefined) break;
        assert.equal(page.data.length, 2, 'a full page while more follow');
        after = last.id;
      }
      assert.deepEqual(
        pages,
        ofViewer.data.map((entry) => entry.id),
      );
    });

    it('filters the activity by actor, resource, resource id and since, and pages it with after/limit', async () => {
      const reader = await t.createKey('pager', 'events:read');
      const read = async (query: string) =>
        expect(await call(t, 'GET', `/api/v1/activity?${query}`, { cookie: admin }), 200) as {
          data: {
            id: number;
            actor: string;
            resource: string;
            resource_id: string;
            created_at: string;
            action: string;
          }[];
          has_more: boolean;
        };
      const byAlice = await read(`actor=${encodeURIComponent('via console user alice')}&limit=200`);
      assert.ok(byAlice.data.length >= 5, `alice made several changes: ${byAlice.data.length}`);
      assert.ok(byAlice.data.every((entry) => entry.actor === 'via console user alice'));
      // An API key's bare name, as the CLI takes it.
      const byKeyName = await read('actor=everything');
      assert.ok(byKeyName.data.every((entry) => entry.actor === 'via API key everything'));
      const keysOnly = await read('resource=api_key&limit=200');
      assert.ok(keysOnly.data.length >= 3 && keysOnly.data.every((entry) => entry.resource === 'api_key'));
      const one = keysOnly.data[0];
      assert.ok(one !== undefined);
      const ofOne = await read(`resource=api_key&resource_id=${one.resource_id}`);
      assert.ok(ofOne.data.length >= 1 && ofOne.data.every((entry) => entry.resource_id === one.resource_id));
      const lonely = errorOf(await call(t, 'GET', `/api/v1/activity?resource_id=1`, { key: reader }), 400);
      assert.deepEqual(lonely.fields, { resource_id: 'needs resource' });
      const bad = errorOf(await call(t, 'GET', '/api/v1/activity?resource=planet', { key: reader }), 400);
      assert.ok(Object.keys(bad.fields).includes('resource'), JSON.stringify(bad));

      const all = await read('limit=200');
      const middle = all.data[Math.floor(all.data.length / 2)];
      assert.ok(middle !== undefined);
      const since = await read(`since=${encodeURIComponent(middle.created_at)}&limit=200`);
      assert.ok(since.data.every((entry) => entry.created_at >= middle.created_at));
      assert.ok(since.data.some((entry) => entry.id === middle.id));

      const pages: number[] = [];
      let after = 0;
      for (;;) {
        const page = await read(`limit=3&after=${after}`);
        assert.ok(page.data.length <= 3);
        pages.push(...page.data.map((entry) => entry.id));
        const last = page.data.at(-1);
        if (!page.has_more || last === undefined) break;
        after = last.id;
      }
      assert.deepEqual(
        pages,
        all.data.map((entry) => entry.id),
        'the pages hold every entry once, in order',
      );
    });
  });
}
