import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { openStore } from '../../src/store/open.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { type ApiCall, callApi, freePort, type PanelProcess, ROOT, startPanel } from '../support/panel.ts';

const CLI = join(ROOT, 'bin', 'vpn-panel.js');

/** Sends `request` as raw bytes (a malformed one no HTTP client would send) and returns the answer's status line. */
async function rawRequest(port: number, request: string): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.write(request);
  let answer = '';
  socket.on('data', (d: Buffer) => (answer += d.toString()));
  await once(socket, 'close');
  return answer.split('\r\n')[0] ?? '';
}

/** Waits until `output()` holds `text` (a log line is written after its answer is sent). */
async function printed(output: () => string, text: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!output().includes(text)) {
    if (Date.now() > deadline) throw new Error(`never logged ${text}; the output:\n${output().slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Every secret in `secrets` is absent from the output, and it has no raw request bytes either. */
function assertNoSecret(output: string, secrets: Record<string, string>): void {
  for (const [name, secret] of Object.entries(secrets)) {
    assert.ok(!output.includes(secret), `the ${name} appears in the log`);
  }
  // A malformed request's raw bytes (headers included) would be logged as a byte array no text search finds.
  assert.ok(!output.includes('rawPacket'), 'the raw bytes of a request appear in the log');
}

describe('the panel logs no share token and no credential, at the most verbose level', () => {
  let db: TestDatabase;
  let panel: PanelProcess;
  let key: string;
  let port: number;
  const wrongKey = `vpnk_${'x'.repeat(38)}`;

  before(async () => {
    db = await createTestDatabase('sqlite');
    panel = await startPanel({ database: db, env: { LOG_LEVEL: 'trace' } });
    port = Number(new URL(panel.url).port);
    key = await panel.createKey('shop', 'all', ['--no-rate-limit']);
  });
  after(async () => {
    await panel.stop();
    await db.drop();
  });

  it('redacts /s/ paths of page views, bad requests that carry a key, and failed requests', async () => {
    const call: ApiCall = (method, path, body) => callApi(panel.url, key, method, path, body);
    const server = (await call('POST', '/servers', { name: 'logs' })).expect(201);
    const device = (await call('POST', '/devices', { server_id: server.id })).expect(201);
    const link = (await call('POST', `/devices/${device.id}/share`)).expect(201);
    const token = new URL(link.url).pathname.split('/').at(-1) ?? '';

    // Share page views, the way a browser and a download make them.
    for (const suffix of ['', '/config', '?from=mail', '/config?x=1']) {
      assert.equal((await fetch(`${panel.url}/s/${token}${suffix}`)).status, 200);
    }
    assert.equal((await fetch(`${panel.url}/s/${token}/nope`)).status, 404);

    // Bad requests with an Authorization header: malformed HTTP, malformed JSON, a wrong key, a key in the query.
    const malformed = `GET /s/${token} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nno colon here\r\n\r\n`;
    assert.match(await rawRequest(port, malformed), /^HTTP\/1\.1 400/);
    const badJson = await fetch(`${panel.url}/api/v1/devices`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: '{',
    });
    assert.equal(badJson.status, 400);
    assert.equal((await callApi(panel.url, wrongKey, 'GET', '/devices')).status, 401);
    assert.equal((await fetch(`${panel.url}/api/v1/nothing?api_key=${key}`)).status, 404);

    // Failed requests (500, logged with their error): the table the share lookups read is gone a moment.
    const side = openStore({ databaseUrl: undefined, dataDir: db.dataDir });
    try {
      await sql`alter table share_links rename to share_links_away`.execute(side.db);
      assert.equal((await fetch(`${panel.url}/s/${token}`)).status, 500);
      assert.equal((await call('GET', `/devices/${device.id}/share`)).status, 500);
      await sql`alter table share_links_away rename to share_links`.execute(side.db);
    } finally {
      await side.close();
    }
    assert.equal((await fetch(`${panel.url}/s/${token}`)).status, 200);

    await printed(panel.output, '"msg":"request failed"');
    await printed(panel.output, '"msg":"client error"');
    await printed(panel.output, `"url":"/api/v1/nothing?api_key=vpnk_[redacted]"`);
    const output = panel.output();
    assert.ok(output.includes('"url":"/s/[redacted]/config"'), 'share page views are logged, redacted');
    const keyBody = key.slice('vpnk_'.length);
    assertNoSecret(output, { 'share token': token, 'API key': key, 'key body': keyBody, 'wrong key': wrongKey });
  });

  it('logs no console password and no session token, also of malformed requests', async () => {
    const password = `pw-${randomBytes(12).toString('hex')}`;
    const added = await panel.cli(['users', 'add', '--name', 'ops'], `${password}\n`);
    assert.equal(added.code, 0, added.stderr);
    const json = { 'content-type': 'application/json' };
    const signIn = await fetch(`${panel.url}/console/session`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ user: 'ops', password }),
    });
    assert.equal(signIn.status, 204);
    const cookie = (signIn.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    const sessionToken = cookie.split('=')[1] ?? '';
    assert.equal((await fetch(`${panel.url}/api/v1/servers`, { headers: { cookie } })).status, 200);
    // The password in a body that is not JSON, and beside a wrong one; the cookie in malformed HTTP.
    const broken = `{"user":"ops","password":"${password}`;
    assert.equal(
      (await fetch(`${panel.url}/console/session`, { method: 'POST', headers: json, body: broken })).status,
      400,
    );
    const wrong = JSON.stringify({ user: 'ops', password: `${password}!` });
    assert.equal(
      (await fetch(`${panel.url}/console/session`, { method: 'POST', headers: json, body: wrong })).status,
      401,
    );
    const malformed = `GET /api/v1/servers HTTP/1.1\r\nHost: x\r\nCookie: ${cookie}\r\nno colon here\r\n\r\n`;
    assert.match(await rawRequest(port, malformed), /^HTTP\/1\.1 400/);
    const out = await fetch(`${panel.url}/console/session`, {
      method: 'DELETE',
      headers: { cookie, 'x-request-id': 'signed-out' },
    });
    assert.equal(out.status, 204);
    await printed(panel.output, '"reqId":"signed-out"');
    assertNoSecret(panel.output(), { 'console password': password, 'session token': sessionToken });
  });
});

describe('the node agent logs no node token, at the most verbose level', () => {
  let dir: string;
  let agent: ChildProcess;
  let output = '';
  let port: number;
  const token = randomBytes(24).toString('base64url');

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vpn-panel-agent-logs-'));
    port = await freePort();
    agent = spawn(process.execPath, [CLI, 'node'], {
      env: {
        ...process.env,
        AGENT_PORT: String(port),
        AGENT_HOST: '127.0.0.1',
        AGENT_TOKEN: token,
        AGENT_TLS: 'off',
        NODE_DRIVER: 'dry-run',
        LOG_LEVEL: 'trace',
        DATA_DIR: dir,
        // No metrics listener: another test's process may hold the default port.
        METRICS_PORT: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    agent.stdout?.on('data', (d: Buffer) => (output += d.toString()));
    agent.stderr?.on('data', (d: Buffer) => (output += d.toString()));
    await printed(() => output, 'node agent ready');
  });
  after(async () => {
    if (agent.exitCode === null) {
      agent.kill('SIGTERM');
      await once(agent, 'exit');
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers requests with the token, a wrong one, a malformed one and a failing one, logging no token', async () => {
    const url = `http://127.0.0.1:${port}`;
    const wrong = randomBytes(24).toString('base64url');
    assert.equal((await fetch(`${url}/v1/status`, { headers: { authorization: `Bearer ${token}` } })).status, 200);
    assert.equal((await fetch(`${url}/v1/status`, { headers: { authorization: `Bearer ${wrong}` } })).status, 401);
    const failing = await fetch(`${url}/v1/servers/99/peers`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ upsert: [], remove: [] }),
    });
    assert.equal(failing.status, 500, 'peers of a server the agent does not run');
    const malformed = `GET /v1/status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nno colon here\r\n\r\n`;
    assert.match(await rawRequest(port, malformed), /^HTTP\/1\.1 400/);
    await printed(() => output, '"msg":"client error"');
    await printed(() => output, '"url":"/v1/servers/99/peers"');
    assertNoSecret(output, { 'node token': token, 'wrong token': wrong });
  });
});
