import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';
import { FakeAgent } from '../support/fake-agent.ts';
import { type ApiCall, callApi, freePort, logged, type PanelProcess, startPanel } from '../support/panel.ts';

/**
 * What the API answers when the node cannot apply a device change
 * (docs/decisions.md "Device changes and the node", "The panel owns the desired state").
 */
for (const kind of DATABASE_KINDS) {
  describe(`device changes a node cannot apply (${kind})`, () => {
    let db: TestDatabase;
    let panel: PanelProcess;
    let agent: FakeAgent;
    let key: string;
    let serverId: number;

    const call: ApiCall = (method, path, body) => callApi(panel.url, key, method, path, body);

    before(async () => {
      db = await createTestDatabase(kind);
      agent = new FakeAgent();
      await agent.start();
      panel = await startPanel({ database: db, env: { LOCAL_NODE: 'off' } });
      const added = await panel.cli(['nodes', 'add', '--name', 'fake', '--url', agent.url, '--token', agent.token]);
      assert.equal(added.code, 0, added.stderr);
      key = await panel.createKey('shop', 'all', ['--no-rate-limit']);
      serverId = (await call('POST', '/servers', { name: 'edge' })).expect(201).id;
    });
    after(async () => {
      await panel.stop();
      await agent.stop();
      await db.drop();
    });

    it('answers PATCH with 502 apply_failed and keeps the change saved', async () => {
      const device = (await call('POST', '/devices', { server_id: serverId, name: 'stubborn' })).expect(201);
      agent.failPeerChanges = true;
      const patched = await call('PATCH', `/devices/${device.id}`, { enabled: false });
      agent.failPeerChanges = false;
      assert.equal(patched.status, 502);
      assert.equal(patched.error?.code, 'apply_failed');
      const id = patched.headers.get('x-request-id');
      await logged(panel, (line) => line.reqId === id && line.level === 50 && line.msg === 'request failed');
      const saved = (await call('GET', `/devices/${device.id}`)).expect(200);
      assert.equal(saved.enabled, false, 'the change was saved');
      assert.equal(saved.status, 'disabled');
    });

    it('creates nothing when the node cannot take a new peer (502 deploy_failed)', async () => {
      agent.failPeerChanges = true;
      const refused = await call('POST', '/devices', { server_id: serverId, name: 'never' });
      agent.failPeerChanges = false;
      assert.equal(refused.status, 502);
      assert.equal(refused.error?.code, 'deploy_failed');
      const list = (await call('GET', `/devices?server_id=${serverId}&limit=200`)).expect(200);
      assert.ok(!list.data.some((d) => d.name === 'never'), 'no device row left behind');
      const events = (await call('GET', '/events?kind=device.created&limit=200')).expect(200);
      assert.ok(!events.data.some((e) => e.device_name === 'never'), 'no event left behind');
    });

    it('sends the node only the peer that changed, never the whole list', async () => {
      agent.peerChanges.length = 0;
      const device = (await call('POST', '/devices', { server_id: serverId, name: 'delta' })).expect(201);
      await call('PATCH', `/devices/${device.id}`, { enabled: false });
      const bodies = agent.peerChanges.map((c) => c.body);
      assert.equal(bodies.length, 2);
      assert.partialDeepStrictEqual(bodies, [
        {
          upsert: [
            { publicKey: device.public_key, allowedIp: `${device.address}/32`, deviceId: device.id, speedLimitKbps: 0 },
          ],
          remove: [],
        },
        { upsert: [], remove: [device.public_key] },
      ]);
    });

    it(
      'sends a changed speed limit as an upsert of the peer, ' +
        'from a device or a group PATCH; other changes send nothing',
      async () => {
        agent.peerChanges.length = 0;
        const body = { server_id: serverId, name: 'shaped', external_id: 'speed-group', speed_limit: 2000 };
        const device = (await call('POST', '/devices', body)).expect(201);
        const allowedIp = `${device.address}/32`;
        const peer = (kbps: number) => ({ publicKey: device.public_key, allowedIp, speedLimitKbps: kbps });
        const path = `/devices/${device.id}` as const;
        for (const [body, status] of [
          [{ name: 'shaped-2' }, 200],
          [{ speed_limit: 5000 }, 200],
          [{ speed_limit: 5000, metadata: { plan: 'pro' } }, 200],
        ] as const)
          assert.equal((await call('PATCH', path, body)).status, status);
        assert.equal((await call('PATCH', '/groups/speed-group', { speed_limit: 0 })).status, 200);
        // A disabled device is no peer: its new limit waits in the database until it is enabled again.
        assert.equal((await call('PATCH', path, { enabled: false, speed_limit: 100 })).status, 200);
        assert.equal((await call('PATCH', path, { speed_limit: 300 })).status, 200);
        assert.equal((await call('PATCH', path, { enabled: true })).status, 200);
        const bodies = agent.peerChanges.map((c) => c.body);
        assert.equal(bodies.length, 5, JSON.stringify(bodies));
        assert.partialDeepStrictEqual(bodies, [
          { upsert: [peer(2000)], remove: [] },
          { upsert: [peer(5000)], remove: [] },
          { upsert: [peer(0)], remove: [] },
          { upsert: [], remove: [device.public_key] },
          { upsert: [peer(300)], remove: [] },
        ]);

        agent.failPeerChanges = true;
        const refused = await call('PATCH', path, { speed_limit: 700 });
        agent.failPeerChanges = false;
        assert.equal(refused.status, 502);
        assert.equal(refused.error?.code, 'apply_failed');
        const saved = (await call('GET', path)).expect(200);
        assert.equal(saved.speed_limit, 700, 'the new limit is saved for the next resync');
      },
    );
  });
}

/** 5xx answers name a node by its name; its URL and the underlying error go to the panel's log only. */
describe('an unreachable node in 502 answers', () => {
  let db: TestDatabase;
  let panel: PanelProcess;
  let agent: FakeAgent;
  let key: string;

  const call: ApiCall = (method, path, body) => callApi(panel.url, key, method, path, body);
  const nodeId = async (name: string): Promise<number> => {
    const node = (await call('GET', '/nodes')).expect(200).data.find((n) => n.name === name);
    assert.ok(node, `node ${name} is listed`);
    return node.id;
  };

  before(async () => {
    db = await createTestDatabase('sqlite');
    agent = new FakeAgent();
    await agent.start();
    panel = await startPanel({ database: db, env: { LOCAL_NODE: 'off' } });
    key = await panel.createKey('shop', 'all', ['--no-rate-limit']);
  });
  after(async () => {
    await panel.stop();
    await agent.stop();
    await db.drop();
  });

  it('answers a deploy on a node nobody listens for with deploy_failed naming the node, not its URL', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    assert.equal((await panel.cli(['nodes', 'add', '--name', 'gone', '--url', url, '--token', agent.token])).code, 0);
    const refused = await call('POST', '/servers', { name: 'nowhere', node_id: await nodeId('gone') });
    assert.equal(refused.status, 502);
    assert.equal(refused.error?.code, 'deploy_failed');
    assert.match(refused.error?.message ?? '', /node 'gone' is unreachable/);
    const body = JSON.stringify(refused.json);
    for (const internal of ['127.0.0.1', String(port), 'http://']) assert.ok(!body.includes(internal), body);
    const id = refused.headers.get('x-request-id');
    await logged(panel, (line) => line.reqId === id && line.level === 50 && JSON.stringify(line.err).includes(url));
  });

  it('answers a new device on a node that went away with deploy_failed naming the node, not its URL', async () => {
    const added = await panel.cli(['nodes', 'add', '--name', 'fake', '--url', agent.url, '--token', agent.token]);
    assert.equal(added.code, 0, added.stderr);
    const server = (await call('POST', '/servers', { name: 'edge', node_id: await nodeId('fake') })).expect(201);
    const url = agent.url;
    await agent.stop();
    const refused = await call('POST', '/devices', { server_id: server.id, name: 'stranded' });
    assert.equal(refused.status, 502);
    assert.equal(refused.error?.code, 'deploy_failed');
    assert.match(refused.error?.message ?? '', /node 'fake' is unreachable/);
    assert.ok(!JSON.stringify(refused.json).includes(new URL(url).host), JSON.stringify(refused.json));
  });
});
