import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { type ApiCall, callApi, freePort, type PanelProcess, ROOT, runCli, startPanel } from '../support/panel.ts';

const TOKEN = 'restore-resync-node-token';

/** What the node runs: its servers and each one's peers, as the agent reports them. */
async function nodeState(agentUrl: string): Promise<Record<number, string[]>> {
  const headers = { authorization: `Bearer ${TOKEN}` };
  const state: { servers: { serverId: number; peers: string[] }[] } = await (
    await fetch(`${agentUrl}/v1/peers`, { headers })
  ).json();
  return Object.fromEntries(state.servers.map((s) => [s.serverId, s.peers]));
}

describe('after a restore, the panel brings its nodes to the restored state', () => {
  let database: TestDatabase;
  let agent: ChildProcess;
  let agentUrl: string;
  let panel: PanelProcess;
  let key: string;

  before(async () => {
    database = await createTestDatabase('sqlite');
    // A node that outlives the panel: `vpn-panel node` as its own process, with the dry-run driver,
    // over plain HTTP so the test reads its state directly (test/main/agent-tls.test.ts covers TLS).
    const port = await freePort();
    agentUrl = `http://127.0.0.1:${port}`;
    agent = spawn(process.execPath, [join(ROOT, 'bin/vpn-panel.js'), 'node'], {
      env: {
        ...process.env,
        AGENT_TOKEN: TOKEN,
        AGENT_PORT: String(port),
        AGENT_HOST: '127.0.0.1',
        NODE_DRIVER: 'dry-run',
        PUBLIC_HOST: '192.0.2.7',
        LOG_LEVEL: 'warn',
        DATA_DIR: join(database.dataDir, 'node'),
        AGENT_TLS: 'off',
        // No metrics listener: another test's process may hold the default port.
        METRICS_PORT: '0',
      },
      stdio: 'ignore',
    });
    for (let tries = 0; ; tries++) {
      const answer = await fetch(`${agentUrl}/v1/status`, { headers: { authorization: `Bearer ${TOKEN}` } }).catch(
        () => undefined,
      );
      if (answer?.ok) break;
      assert.ok(tries < 300, 'the agent did not start');
      await new Promise((r) => setTimeout(r, 50));
    }
    panel = await startPanel({ database, env: { LOCAL_NODE: 'off' } });
    const tokenFile = join(database.dataDir, 'node-token');
    writeFileSync(tokenFile, TOKEN, { mode: 0o600 });
    const added = await panel.cli(['nodes', 'add', '--name', 'remote', '--url', agentUrl, '--token-file', tokenFile]);
    assert.equal(added.code, 0, added.stderr);
    key = await panel.createKey('ops', 'all', ['--no-rate-limit']);
  });
  after(async () => {
    await panel.stop();
    const exited = once(agent, 'exit');
    agent.kill('SIGTERM');
    await exited;
    await database.drop();
  });

  it('adds the servers and peers the node lost and removes the ones the backup does not have', async () => {
    const call: ApiCall = (method, path, body) => callApi(panel.url, key, method, path, body);
    const kept = (await call('POST', '/servers', { name: 'kept' })).expect(201);
    const deletedLater = (await call('POST', '/servers', { name: 'deleted-later' })).expect(201);
    const d1 = (await call('POST', '/devices', { server_id: kept.id })).expect(201);
    const d2 = (await call('POST', '/devices', { server_id: deletedLater.id })).expect(201);
    const file = join(database.dataDir, 'state.vpb');
    assert.equal((await panel.cli(['backup', file])).code, 0);

    const madeLater = (await call('POST', '/servers', { name: 'made-later' })).expect(201);
    const d3 = (await call('POST', '/devices', { server_id: kept.id })).expect(201);
    assert.equal((await call('DELETE', `/servers/${deletedLater.id}?force=true`)).status, 204);
    assert.deepEqual(
      await nodeState(agentUrl),
      { [kept.id]: [d1.public_key, d3.public_key].sort(), [madeLater.id]: [] },
      'the node as the panel left it',
    );

    await panel.stop();
    const restored = await runCli(['restore', '--replace', file], database.env);
    assert.equal(restored.code, 0, restored.stderr);
    assert.match(restored.stdout, /first round resyncs each node/);
    assert.deepEqual(
      await nodeState(agentUrl),
      { [kept.id]: [d1.public_key, d3.public_key].sort(), [madeLater.id]: [] },
      'a restore alone does not touch nodes',
    );

    // The panel's first round, before it answers, resyncs every node to the database.
    panel = await startPanel({ database, env: { LOCAL_NODE: 'off' } });
    assert.deepEqual(await nodeState(agentUrl), { [kept.id]: [d1.public_key], [deletedLater.id]: [d2.public_key] });
    const added = await callApi(panel.url, key, 'POST', '/devices', { server_id: deletedLater.id });
    assert.equal(added.status, 201, 'the restored server runs on the node with its own key');
    const addedKey = added.expect(201).public_key;
    assert.deepEqual((await nodeState(agentUrl))[deletedLater.id], [d2.public_key, addedKey].sort());
  });
});
