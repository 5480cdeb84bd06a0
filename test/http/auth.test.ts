import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SCOPES, type Scope } from '../../src/domain/api-keys.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';
import {
  type ApiBody,
  type ApiMethod,
  type ApiPath,
  callApi,
  callApiUnchecked,
  type PanelProcess,
  startPanel,
} from '../support/panel.ts';

/** Every guarded operation and the scope docs/api.md "Keys and scopes" gives it; each issue adds its routes here. */
const OPERATIONS: { method: ApiMethod; path: string; scope: Scope; body?: unknown }[] = [
  { method: 'GET', path: '/servers', scope: 'servers:read' },
  { method: 'GET', path: '/servers/1', scope: 'servers:read' },
  { method: 'POST', path: '/servers', scope: 'servers:write', body: { name: 'auth-matrix' } },
  { method: 'PATCH', path: '/servers/1', scope: 'servers:write', body: { city: 'Berlin' } },
  { method: 'GET', path: '/nodes', scope: 'servers:read' },
  { method: 'GET', path: '/nodes/1', scope: 'servers:read' },
  { method: 'GET', path: '/events', scope: 'events:read' },
  { method: 'GET', path: '/devices', scope: 'devices:read' },
  { method: 'GET', path: '/devices/1', scope: 'devices:read' },
  { method: 'GET', path: '/devices/1/config', scope: 'devices:read' },
  { method: 'GET', path: '/devices/1/usage', scope: 'devices:read' },
  { method: 'POST', path: '/devices', scope: 'devices:write', body: { server_id: 1 } },
  { method: 'PATCH', path: '/devices/1', scope: 'devices:write', body: { metadata: { seen: true } } },
  { method: 'POST', path: '/devices/1/usage/reset', scope: 'devices:write' },
  { method: 'GET', path: '/groups/g', scope: 'devices:read' },
  { method: 'PATCH', path: '/groups/g', scope: 'devices:write', body: { speed_limit: 0 } },
  { method: 'POST', path: '/groups/g/usage/reset', scope: 'devices:write' },
  { method: 'POST', path: '/devices/1/move', scope: 'devices:write', body: { server_id: 'auto' } },
  { method: 'GET', path: '/devices/1/share', scope: 'devices:read' },
  { method: 'POST', path: '/devices/1/share', scope: 'devices:write' },
  { method: 'GET', path: '/webhooks', scope: 'webhooks:write' },
  { method: 'GET', path: '/webhooks/1', scope: 'webhooks:write' },
  { method: 'GET', path: '/webhooks/1/deliveries', scope: 'webhooks:write' },
  { method: 'POST', path: '/webhooks/1/ping', scope: 'webhooks:write' },
];

/** Paths here are under /api/v1, as in OPERATIONS. */
function call<M extends ApiMethod, P extends ApiPath<M>>(
  panel: PanelProcess,
  method: M,
  path: P,
  key: string | undefined,
  body?: ApiBody<M, P>,
) {
  return callApi(panel.url, key, method, path, body);
}

for (const kind of DATABASE_KINDS) {
  describe(`API keys and scopes (${kind})`, () => {
    let db: TestDatabase;
    let panel: PanelProcess;
    let all: string;

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await startPanel({ database: db });
      all = await panel.createKey('shop', 'all', ['--no-rate-limit']);
      const created = await call(panel, 'POST', '/servers', all, { name: 'first' });
      assert.equal(created.status, 201);
      assert.equal((await call(panel, 'POST', '/devices', all, { server_id: 1 })).status, 201);
    });
    after(async () => {
      await panel.stop();
      await db.drop();
    });

    it(
      'answers 401 unauthorized without a key, ' + 'with a malformed key, and with an unknown well-formed key',
      async () => {
        const unknown = `vpnk_${'A'.repeat(38)}`;
        for (const [label, key] of [
          ['none', undefined],
          ['malformed', 'not-a-key'],
          ['unknown', unknown],
          ['bad checksum', `${all.slice(0, -1)}${all.endsWith('A') ? 'B' : 'A'}`],
        ] as const) {
          const { status, error } = await call(panel, 'GET', '/servers', key);
          assert.equal(status, 401, label);
          assert.equal(error?.code, 'unauthorized', label);
          assert.deepEqual(error?.fields, {});
        }
      },
    );

    it('lets a key with exactly the scope in, and refuses every other scope with 403 naming the scope', async () => {
      for (const scope of SCOPES) {
        const only = await panel.createKey(`only-${scope.replace(':', '-')}`, scope, ['--no-rate-limit']);
        for (const op of OPERATIONS) {
          const { status, json, error } = await callApiUnchecked(panel.url, only, op.method, op.path, op.body);
          if (op.scope === scope) {
            assert.ok(
              status !== 401 && status !== 403,
              `${op.method} ${op.path} with ${scope}: ${status} ${JSON.stringify(json)}`,
            );
          } else {
            assert.equal(status, 403, `${op.method} ${op.path} with ${scope}`);
            assert.equal(error?.code, 'insufficient_scope');
            assert.match(error?.message ?? '', new RegExp(op.scope));
          }
        }
      }
    });

    it('records the key name as the actor of its changes', async () => {
      const bot = await panel.createKey('chat bot', 'servers:write');
      assert.equal((await call(panel, 'POST', '/servers', bot, { name: 'by-bot' })).status, 201);
      const events = (await call(panel, 'GET', '/events?kind=server.created', all)).expect(200).data;
      const actorOf = (server: string) => events.find((e) => e.server_name === server)?.actor;
      assert.equal(actorOf('first'), 'via API key shop');
      assert.equal(actorOf('by-bot'), 'via API key chat bot');
    });

    it('stops a key revoked by the CLI at once, in the running panel', async () => {
      const key = await panel.createKey('short-lived', 'servers:read');
      assert.equal((await call(panel, 'GET', '/servers', key)).status, 200);
      const revoked = await panel.cli(['keys', 'revoke', 'short-lived']);
      assert.equal(revoked.code, 0, revoked.stderr);
      const after = await call(panel, 'GET', '/servers', key);
      assert.equal(after.status, 401);
      assert.equal(after.error?.code, 'unauthorized');
    });

    it('lists keys with name, scopes, created and last used, and never the key itself', async () => {
      const key = await panel.createKey('lister', 'events:read');
      await call(panel, 'GET', '/events', key);
      const listed = await panel.cli(['keys', 'list']);
      assert.equal(listed.code, 0);
      assert.ok(!listed.stdout.includes(key) && !listed.stdout.includes(all), 'no key in the listing');
      assert.doesNotMatch(listed.stdout, /vpnk_/);
      const json = await panel.cli(['keys', 'list', '--json']);
      const lister = JSON.parse(json.stdout).find((k: { name: string }) => k.name === 'lister');
      assert.deepEqual(lister.scopes, ['events:read']);
      assert.match(lister.createdAt, /^\d{4}-\d\d-\d\dT/);
      assert.match(lister.lastUsedAt, /^\d{4}-\d\d-\d\dT/, 'last used is recorded');
      assert.equal(lister.revokedAt, null);
    });

    it('makes keys vpnk_ with a checksum, printed once as the last line, and refuses unknown scopes', async () => {
      const made = await panel.cli(['keys', 'create', '--name', 'format', '--scopes', 'devices:read, events:read']);
      assert.equal(made.code, 0);
      assert.match(made.stdout.trim().split('\n').at(-1) ?? '', /^vpnk_[0-9A-Za-z]{38}$/);
      const bad = await panel.cli(['keys', 'create', '--name', 'bad', '--scopes', 'devices:rule']);
      assert.equal(bad.code, 1);
      assert.match(bad.stderr, /unknown scope devices:rule/);
      const twice = await panel.cli(['keys', 'create', '--name', 'format', '--scopes', 'all']);
      assert.equal(twice.code, 1, 'a live key name is unique');
    });
  });
}
