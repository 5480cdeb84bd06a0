import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { FakeAgent } from '../support/fake-agent.ts';
import { type ApiCall, callApi, type PanelProcess, startPanel } from '../support/panel.ts';

/** Server subnets against the node's own networks, as its agent reports them (issue 11 item 5). */
describe("server subnets stay in private space and off the node's own networks", () => {
  let db: TestDatabase;
  let panel: PanelProcess;
  let agent: FakeAgent;
  let key: string;
  const call: ApiCall = (method, path, body) => callApi(panel.url, key, method, path, body);
  const serverCount = async () => (await call('GET', '/servers?limit=200')).expect(200).data.length as number;

  before(async () => {
    db = await createTestDatabase('sqlite');
    agent = new FakeAgent();
    agent.networks = ['127.0.0.1/8', '10.50.0.7/16', '192.0.2.20/24', 'fd00::1/64'];
    await agent.start();
    panel = await startPanel({ database: db, env: { LOCAL_NODE: 'off' } });
    const added = await panel.cli(['nodes', 'add', '--name', 'edge', '--url', agent.url, '--token', agent.token]);
    assert.equal(added.code, 0, added.stderr);
    key = await panel.createKey('infra', 'servers:read,servers:write', ['--no-rate-limit']);
  });
  after(async () => {
    await panel.stop();
    await agent.stop();
    await db.drop();
  });

  it("refuses an address on the node's own network with 422 naming address, and takes one beside it", async () => {
    for (const address of ['10.50.3.1/24', '10.50.0.1/16', '10.50.200.5/30']) {
      const refused = await call('POST', '/servers', { name: 'lan', address });
      assert.equal(refused.status, 422, `${address}: ${JSON.stringify(refused.json)}`);
      assert.deepEqual(Object.keys(refused.error?.fields ?? {}), ['address']);
      assert.match(refused.error?.message ?? '', /10\.50\.0\.0\/16/, 'names the network it overlaps');
    }
    const beside = (await call('POST', '/servers', { name: 'beside', address: '10.51.0.1/24' })).expect(201);
    assert.deepEqual(agent.applied, [beside.id]);
  });

  it('refuses loopback, link-local (cloud metadata) and public space naming address', async () => {
    for (const address of ['127.0.0.1/24', '169.254.169.1/24', '8.8.8.1/24', '203.0.113.1/24']) {
      const refused = await call('POST', '/servers', { name: 'odd', address });
      assert.equal(refused.status, 422, `${address}: ${JSON.stringify(refused.json)}`);
      assert.ok(Object.hasOwn(refused.error?.fields ?? {}, 'address'));
    }
  });

  it('makes no server on a node that cannot say its networks (too old, unreachable): 502, nothing saved', async () => {
    const before = await serverCount();
    agent.networks = undefined;
    const old = await call('POST', '/servers', { name: 'old-agent' });
    assert.equal(old.status, 502, JSON.stringify(old.json));
    assert.equal(old.error?.code, 'deploy_failed');
    agent.networks = ['10.50.0.7/16'];
    await agent.stop();
    const gone = await call('POST', '/servers', { name: 'unreachable' });
    assert.equal(gone.status, 502, JSON.stringify(gone.json));
    assert.equal(gone.error?.code, 'deploy_failed');
    assert.equal(await serverCount(), before, 'nothing was saved');
  });
});
