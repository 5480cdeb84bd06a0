import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { freePort, type PanelProcess, ROOT, startPanel } from '../support/panel.ts';

const CLI = join(ROOT, 'bin', 'vpn-panel.js');

/** A remote agent over HTTPS with its own certificate, trusted by the panel through NODE_EXTRA_CA_CERTS. */
describe('the panel talks to an agent over TLS when the agent is configured for it', () => {
  let dir: string;
  let db: TestDatabase;
  let agent: ChildProcess;
  let panel: PanelProcess;
  let port: number;
  const token = 'tls-test-token-0123456789abcdef';

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vpn-panel-tls-'));
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
    port = await freePort();
    agent = spawn(process.execPath, [CLI, 'node'], {
      env: { ...process.env, AGENT_PORT: String(port), AGENT_HOST: '127.0.0.1', AGENT_TOKEN: token, NODE_DRIVER: 'dry-run', LOG_LEVEL: 'warn', DATA_DIR: dir, AGENT_TLS_CERT: join(dir, 'cert.pem'), AGENT_TLS_KEY: join(dir, 'key.pem') },
      stdio: 'ignore',
    });
    db = await createTestDatabase('sqlite');
    panel = await startPanel({ database: db, env: { LOCAL_NODE: 'off', NODE_EXTRA_CA_CERTS: join(dir, 'cert.pem') } });
  });
  after(async () => {
    await panel.stop();
    if (agent.exitCode === null) {
      agent.kill('SIGTERM');
      await once(agent, 'exit');
    }
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('brings an https agent online and deploys on it; plain http to it fails', async () => {
    const added = await panel.cli(['nodes', 'add', '--name', 'secure', '--url', `https://127.0.0.1:${port}`, '--token', token]);
    assert.equal(added.code, 0, added.stderr);
    const key = await panel.createKey('ops', 'servers:read,servers:write');
    const deadline = Date.now() + 15_000;
    let status = '';
    while (Date.now() < deadline) {
      const nodes = await (await fetch(`${panel.url}/api/v1/nodes`, { headers: { authorization: `Bearer ${key}` } })).json();
      status = nodes.data[0]?.status;
      if (status === 'online') break;
      await new Promise((r) => setTimeout(r, 250));
    }
    assert.equal(status, 'online');
    const created = await fetch(`${panel.url}/api/v1/servers`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{"name":"over-tls"}' });
    assert.equal(created.status, 201);
    await assert.rejects(fetch(`http://127.0.0.1:${port}/v1/status`, { headers: { authorization: `Bearer ${token}` } }), 'the agent speaks only TLS');
  });
});
