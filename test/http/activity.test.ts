import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';
import {
  type ApiAnswer,
  type ApiBody,
  type ApiMethod,
  type ApiOperation,
  type ApiPath,
  callApi,
  type PanelProcess,
  startPanel,
} from '../support/panel.ts';

interface Entry {
  id: number;
  created_at: string;
  actor: string;
  request_id: string | null;
  action: string;
  resource: string;
  resource_id: string;
  summary: string;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
}

/** What the log must say about one change: who, what, which, and the request that made it. */
interface Expected {
  actor: string;
  action: string;
  resource_id: string;
  request_id: string | null;
}

const SHOP = 'via API key shop';
const INFRA = 'via API key infra';
const NODE_TOKEN = 'edge-token-0123456789';

for (const kind of DATABASE_KINDS) {
  describe(`activity log after a scripted sequence of API and CLI changes (${kind})`, () => {
    let db: TestDatabase;
    let panel: PanelProcess;
    const keys = new Map<string, string>();
    const expected: Expected[] = [];
    /** Strings that must never reach the log: keys, private keys, webhook secrets, tokens. */
    const secrets: string[] = [NODE_TOKEN];
    let entries: Entry[] = [];
    let midpoint = '';

    async function activity(...args: string[]): Promise<{ data: Entry[]; has_more: boolean }> {
      const result = await panel.cli(['activity', '--json', ...args]);
      assert.equal(result.code, 0, result.stderr);
      return JSON.parse(result.stdout);
    }

    async function cli(args: string[], ...changes: Omit<Expected, 'actor' | 'request_id'>[]): Promise<string> {
      const result = await panel.cli(args);
      assert.equal(result.code, 0, result.stderr);
      for (const change of changes) expected.push({ actor: 'admin', request_id: null, ...change });
      return result.stdout;
    }

    async function createKey(name: string): Promise<void> {
      const key =
        (
          await cli(['keys', 'create', '--name', name, '--scopes', 'all', '--no-rate-limit'], {
            action: 'api_key.created',
            resource_id: String(keys.size + 1),
          })
        )
          .trim()
          .split('\n')
          .at(-1) ?? '';
      keys.set(name, key);
      secrets.push(key);
    }

    /** One API call that must succeed and be logged as `changes` (resource ids may come from the answer). */
    async function api<M extends ApiMethod, P extends ApiPath<M>>(
      keyName: string,
      method: M,
      path: P,
      body: ApiBody<M, P> | undefined,
      ...changes: ((answer: ApiAnswer<ApiOperation<M, P>>) => Omit<Expected, 'actor' | 'request_id'>)[]
    ): Promise<ApiAnswer<ApiOperation<M, P>>> {
      const answer = await callApi(panel.url, keys.get(keyName), method, path, body);
      assert.ok(answer.status < 300, `${method} ${path}: ${answer.status} ${JSON.stringify(answer.json)}`);
      const requestId = answer.headers.get('x-request-id');
      assert.ok(requestId);
      for (const change of changes)
        expected.push({ actor: `via API key ${keyName}`, request_id: requestId, ...change(answer) });
      return answer;
    }

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await startPanel({ database: db, env: { WEBHOOK_ALLOW_PRIVATE: '1' } });
      // The panel's own changes at its first start: the local node is made, then comes online.
      expected.push(
        { actor: 'system', action: 'node.added', resource_id: '1', request_id: null },
        { actor: 'system', action: 'node.online', resource_id: '1', request_id: null },
      );

      await createKey('shop');
      await createKey('infra');
      const serverCreated = (r: ApiAnswer<ApiOperation<'POST', '/servers'>>) => ({
        action: 'server.created',
        resource_id: String(r.expect(201).id),
      });
      const a = (await api('infra', 'POST', '/servers', { name: 'a' }, serverCreated)).expect(201).id;
      const b = (await api('infra', 'POST', '/servers', { name: 'b' }, serverCreated)).expect(201).id;
      await api('infra', 'PATCH', `/servers/${a}`, { mtu: 1400 }, () => ({
        action: 'server.updated',
        resource_id: String(a),
      }));

      // A client's own request id is kept, and recorded.
      const own = await fetch(`${panel.url}/api/v1/devices`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${keys.get('shop')}`,
          'content-type': 'application/json',
          'x-request-id': 'script-step-6',
        },
        body: JSON.stringify({ server_id: a, name: 'd1', external_id: 'cust' }),
      });
      assert.equal(own.status, 201);
      const d1 = (await own.json()).id;
      expected.push({ actor: SHOP, action: 'device.created', resource_id: String(d1), request_id: 'script-step-6' });
      const deviceCreated = (r: ApiAnswer<ApiOperation<'POST', '/devices'>>) => ({
        action: 'device.created',
        resource_id: String(r.expect(201).id),
      });
      const d2Body = { server_id: a, name: 'd2', external_id: 'cust' };
      const created = (await api('shop', 'POST', '/devices', d2Body, deviceCreated)).expect(201);
      const d2 = created.id;
      secrets.push(/PrivateKey = (\S+)/.exec(created.config)?.[1] ?? 'no private key in the config');

      // Reads and refused changes are not changes.
      assert.equal((await callApi(panel.url, keys.get('shop'), 'GET', `/devices/${d1}`)).status, 200);
      assert.equal(
        (await callApi(panel.url, keys.get('shop'), 'PATCH', `/devices/${d1}`, { data_limit: -1 })).status,
        422,
      );

      await api('shop', 'PATCH', `/devices/${d1}`, { enabled: false }, () => ({
        action: 'device.updated',
        resource_id: String(d1),
      }));
      await api('shop', 'POST', `/devices/${d1}/move`, { server_id: b }, () => ({
        action: 'device.moved',
        resource_id: String(d1),
      }));
      await api('shop', 'POST', `/devices/${d1}/usage/reset`, undefined, () => ({
        action: 'device.usage_reset',
        resource_id: String(d1),
      }));
      const share = await api('shop', 'POST', `/devices/${d1}/share`, {}, () => ({
        action: 'device.share_created',
        resource_id: String(d1),
      }));
      secrets.push(share.expect(201).url.split('/s/')[1] ?? 'no share token');
      await api('shop', 'DELETE', `/devices/${d1}/share`, undefined, () => ({
        action: 'device.share_deleted',
        resource_id: String(d1),
      }));
      // Entries carry milliseconds: the midpoint must be a later millisecond than the last entry before it.
      const lastBefore = Date.now();
      while (Date.now() <= lastBefore) await new Promise((resolve) => setImmediate(resolve));
      midpoint = new Date().toISOString();
      await api(
        'shop',
        'PATCH',
        '/groups/cust',
        { data_limit: 1000 },
        () => ({ action: 'device.updated', resource_id: String(d1) }),
        () => ({ action: 'device.updated', resource_id: String(d2) }),
      );
      await api(
        'shop',
        'POST',
        '/groups/cust/usage/reset',
        undefined,
        () => ({ action: 'device.usage_reset', resource_id: String(d1) }),
        () => ({ action: 'device.usage_reset', resource_id: String(d2) }),
      );

      // Its URL holds the receiver's secret, as many do: the log names the webhook by id and host only.
      const hookBody = { url: 'http://127.0.0.1:9/hook?token=RECEIVER-SECRET-123', events: ['device.created'] };
      secrets.push('RECEIVER-SECRET-123');
      const hook = await api('infra', 'POST', '/webhooks', hookBody, (r) => ({
        action: 'webhook.created',
        resource_id: String(r.expect(201).id),
      }));
      const { id: hookId, secret } = hook.expect(201);
      secrets.push(secret);
      const hookChange = (action: string) => () => ({ action, resource_id: String(hookId) });
      await api('infra', 'PATCH', `/webhooks/${hookId}`, { description: 'shop hook' }, hookChange('webhook.updated'));
      await api('infra', 'DELETE', `/webhooks/${hookId}`, undefined, hookChange('webhook.deleted'));

      await cli(['nodes', 'add', '--name', 'edge', '--url', 'http://127.0.0.1:9', '--token', NODE_TOKEN], {
        action: 'node.added',
        resource_id: '2',
      });
      await cli(['nodes', 'remove', 'edge'], { action: 'node.removed', resource_id: '2' });

      await api(
        'shop',
        'DELETE',
        '/groups/cust',
        undefined,
        () => ({ action: 'device.deleted', resource_id: String(d1) }),
        () => ({ action: 'device.deleted', resource_id: String(d2) }),
      );
      const d3 = (await api('shop', 'POST', '/devices', { server_id: b, name: 'd3' }, deviceCreated)).expect(201).id;
      await api(
        'infra',
        'DELETE',
        `/servers/${b}?force=true`,
        undefined,
        () => ({ action: 'device.deleted', resource_id: String(d3) }),
        () => ({ action: 'server.deleted', resource_id: String(b) }),
      );
      await cli(['keys', 'revoke', 'shop'], { action: 'api_key.revoked', resource_id: '1' });

      entries = (await activity('--limit', '200')).data;
    });
    after(async () => {
      await panel.stop();
      await db.drop();
    });

    it('lists exactly the changes made, in order, with their actors and request ids', () => {
      assert.deepEqual(
        entries.map((e) => ({
          actor: e.actor,
          action: e.action,
          resource_id: e.resource_id,
          request_id: e.request_id,
        })),
        expected,
      );
      assert.ok(entries.every((e) => e.action.startsWith(`${e.resource}.`)));
    });

    it('records the fields before and after, and never a secret', () => {
      const text = JSON.stringify(entries);
      for (const secret of secrets)
        assert.ok(!text.includes(secret), `a secret reached the log: ${secret.slice(0, 12)}…`);
      for (const field of ['private_key', 'secret', 'token', 'key_hash'])
        assert.ok(!text.includes(`"${field}"`), field);

      const disabled = entries.find((e) => e.action === 'device.updated' && e.actor === SHOP);
      assert.deepEqual(
        { before: disabled?.before, after: disabled?.after },
        { before: { enabled: true }, after: { enabled: false } },
      );
      const mtu = entries.find((e) => e.action === 'server.updated');
      assert.deepEqual({ before: mtu?.before, after: mtu?.after }, { before: { mtu: 1420 }, after: { mtu: 1400 } });
      const moved = entries.find((e) => e.action === 'device.moved');
      assert.deepEqual(Object.keys(moved?.after ?? {}).sort(), ['address', 'address6', 'server_id']);
      const device = entries.find((e) => e.action === 'device.created');
      assert.equal(device?.before, null);
      assert.equal(device?.after?.name, 'd1');
      const deletedServer = entries.find((e) => e.action === 'server.deleted');
      assert.equal(deletedServer?.after, null);
      assert.equal(deletedServer?.before?.name, 'b');
      const hook = entries.find((e) => e.action === 'webhook.created');
      assert.deepEqual(hook?.after?.events, ['device.created']);
      assert.equal(hook?.after?.enabled, true);
      assert.equal(hook?.summary, `webhook ${hook?.resource_id} to 127.0.0.1:9 created`);
      assert.equal(hook?.after?.url, 'http://127.0.0.1:9/…');
      // A node's agent URL is what `GET /nodes` hides: no entry keeps it.
      const edge = entries.filter((e) => e.resource === 'node' && e.resource_id === '2');
      assert.deepEqual(
        edge.map((e) => e.summary),
        ['node edge added', 'node edge removed'],
      );
      for (const e of edge) assert.ok(!('url' in { ...e.before, ...e.after }), e.action);
      const revoked = entries.find((e) => e.action === 'api_key.revoked');
      assert.equal(revoked?.before?.revoked_at, null);
      assert.equal(typeof revoked?.after?.revoked_at, 'string');
    });

    it('filters by actor, resource (and id) and since, and pages with --after and --limit', async () => {
      const shop = await activity('--actor', 'shop', '--limit', '200');
      assert.deepEqual(
        shop.data.map((e) => e.id),
        entries.filter((e) => e.actor === SHOP).map((e) => e.id),
      );
      const infra = await activity('--actor', INFRA, '--limit', '200');
      assert.deepEqual(
        infra.data.map((e) => e.id),
        entries.filter((e) => e.actor === INFRA).map((e) => e.id),
      );
      const admin = await activity('--actor', 'admin');
      assert.deepEqual(
        admin.data.map((e) => e.action),
        ['api_key.created', 'api_key.created', 'node.added', 'node.removed', 'api_key.revoked'],
      );

      const webhooks = await activity('--resource', 'webhook');
      assert.deepEqual(
        webhooks.data.map((e) => e.action),
        ['webhook.created', 'webhook.updated', 'webhook.deleted'],
      );
      const d1 = entries.find((e) => e.request_id === 'script-step-6')?.resource_id ?? '';
      const history = await activity('--resource', 'device', '--id', d1);
      assert.deepEqual(
        history.data.map((e) => e.action),
        [
          'device.created',
          'device.updated',
          'device.moved',
          'device.usage_reset',
          'device.share_created',
          'device.share_deleted',
          'device.updated',
          'device.usage_reset',
          'device.deleted',
        ],
      );

      const since = await activity('--since', midpoint, '--limit', '200');
      assert.deepEqual(
        since.data.map((e) => e.id),
        entries.filter((e) => e.created_at >= midpoint).map((e) => e.id),
      );
      assert.equal(since.data[0]?.action, 'device.updated');

      const first = await activity('--limit', '5');
      assert.equal(first.data.length, 5);
      assert.equal(first.has_more, true);
      const rest = await activity('--after', String(first.data.at(-1)?.id), '--limit', '200');
      assert.equal(rest.has_more, false);
      assert.deepEqual(
        [...first.data, ...rest.data].map((e) => e.id),
        entries.map((e) => e.id),
      );
    });

    it('prints a readable list, and refuses bad filters with a clear message', async () => {
      const listed = await panel.cli(['activity', '--actor', 'shop', '--resource', 'device', '--limit', '3']);
      assert.equal(listed.code, 0, listed.stderr);
      assert.match(
        listed.stdout,
        /via API key shop {2}device\.created {2}device \d+ {2}device d1 created on server a {2}request script-step-6/,
      );
      assert.match(listed.stdout, /enabled: true -> false/);
      assert.match(listed.stdout, /\(more: add --after \d+\)/);
      for (const [args, message] of [
        [['--resource', 'group'], /--resource must be one of device, server, webhook, node, api_key/],
        [['--since', 'yesterday'], /--since must be an ISO date/],
        [['--limit', '0'], /--limit must be a whole number from 1 to 200/],
        [['--id', '3'], /--id goes with --resource/],
      ] as const) {
        const refused = await panel.cli(['activity', ...args]);
        assert.equal(refused.code, 2);
        assert.match(refused.stderr, message);
        assert.doesNotMatch(refused.stderr, /\n\s+at /);
      }
    });
  });
}
