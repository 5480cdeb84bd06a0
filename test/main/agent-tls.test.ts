import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { type AgentProcess, startAgent } from '../support/agent.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { waitFor } from '../support/netns.ts';
import { callApi, type CliResult, freePort, type PanelProcess, ROOT, startPanel } from '../support/panel.ts';

const CLI = join(ROOT, 'bin', 'vpn-panel.js');

/** The SHA-256 of the certificate a TLS server at `port` serves, as 64 upper-case hex digits. */
async function servedSha256(port: number): Promise<string> {
  const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false });
  await once(socket, 'secureConnect');
  const fingerprint = socket.getPeerCertificate().fingerprint256;
  socket.destroy();
  return fingerprint.replaceAll(':', '');
}

/** What `openssl x509 -fingerprint -sha256` says of a PEM file, in the same form. */
function opensslSha256(certFile: string): string {
  const out = execFileSync('openssl', ['x509', '-noout', '-fingerprint', '-sha256', '-in', certFile]).toString();
  return out.trim().replace(/^.*=/, '').replaceAll(':', '');
}

async function nodeStatus(panel: PanelProcess, key: string, name: string): Promise<string | undefined> {
  const nodes = (await callApi(panel.url, key, 'GET', '/nodes')).expect(200);
  return nodes.data.find((n) => n.name === name)?.status;
}

function waitForOnline(panel: PanelProcess, key: string, name: string): Promise<true> {
  const online = async () => ((await nodeStatus(panel, key, name)) === 'online' ? true : undefined);
  return waitFor(`node ${name} to be online`, online, 15_000, 250);
}

/** GET /v1/status over plain HTTP. */
function plainStatus(port: number, token: string): Promise<Response> {
  return fetch(`http://127.0.0.1:${port}/v1/status`, { headers: { authorization: `Bearer ${token}` } });
}

/** A remote agent over HTTPS with a CA-signed certificate, trusted by the panel through NODE_EXTRA_CA_CERTS. */
describe('the panel talks to an agent with a configured certificate through the CA chain', () => {
  let dir: string;
  let db: TestDatabase;
  let agent: AgentProcess;
  let panel: PanelProcess;
  let port: number;
  const token = 'tls-test-token-0123456789abcdef';

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vpn-panel-tls-'));
    const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1'];
    const subject = ['-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'];
    const files = ['-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')];
    execFileSync('openssl', ['req', '-x509', ...key, ...subject, ...files], { stdio: 'ignore' });
    port = await freePort();
    agent = await startAgent({
      AGENT_PORT: String(port),
      AGENT_HOST: '127.0.0.1',
      AGENT_TOKEN: token,
      NODE_DRIVER: 'dry-run',
      DATA_DIR: join(dir, 'node'),
      AGENT_TLS_CERT: join(dir, 'cert.pem'),
      AGENT_TLS_KEY: join(dir, 'key.pem'),
    });
    db = await createTestDatabase('sqlite');
    panel = await startPanel({ database: db, env: { LOCAL_NODE: 'off', NODE_EXTRA_CA_CERTS: join(dir, 'cert.pem') } });
  });
  after(async () => {
    await panel.stop();
    await agent.stop();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the configured certificate and logs its fingerprint', async () => {
    assert.equal(agent.certSha256, opensslSha256(join(dir, 'cert.pem')));
    assert.equal(await servedSha256(port), agent.certSha256);
  });

  it('brings an https agent without a pin online and deploys on it; plain http to it fails', async () => {
    writeFileSync(join(dir, 'token'), `${token}\n`, { mode: 0o600 });
    const url = `https://127.0.0.1:${port}`;
    const tokenFile = join(dir, 'token');
    const added = await panel.cli(['nodes', 'add', '--name', 'secure', '--url', url, '--token-file', tokenFile]);
    assert.equal(added.code, 0, added.stderr);
    const key = await panel.createKey('ops', 'servers:read,servers:write');
    await waitForOnline(panel, key, 'secure');
    const created = await callApi(panel.url, key, 'POST', '/servers', { name: 'over-tls' });
    assert.equal(created.status, 201);
    await assert.rejects(plainStatus(port, token), 'the agent speaks only TLS');
  });
});

/** `nodes add` with the token on standard input; checks that it is not in the process's argv while it runs. */
async function addWithTokenOnStdin(panel: PanelProcess, args: readonly string[], token: string) {
  const options = { env: { ...process.env, ...panel.env }, cwd: ROOT };
  const child = spawn(process.execPath, [CLI, 'nodes', 'add', ...args], { ...options, stdio: 'pipe' });
  await once(child, 'spawn');
  // What `ps` shows: read while the command waits for the token.
  const argv = child.pid === undefined ? '' : readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = once(child, 'exit');
  child.stdin.end(`${token}\n`);
  const [code] = await exited;
  const result: CliResult & { argv: string } = { code: typeof code === 'number' ? code : 1, stdout, stderr, argv };
  return result;
}

/** The default agent: its own key and self-signed certificate, pinned by `nodes add --cert-sha256`. */
describe('an agent without TLS settings serves its own certificate, which the panel pins', () => {
  let dir: string;
  let db: TestDatabase;
  let agent: AgentProcess;
  let panel: PanelProcess;
  let port: number;
  let key: string;
  let agentEnv: Record<string, string>;
  const token = 'pinned-test-token-0123456789abcdef';
  const wrongPin = 'ab'.repeat(32);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vpn-panel-pin-'));
    port = await freePort();
    // DATA_DIR does not exist yet: the agent makes it, 0700.
    agentEnv = {
      AGENT_PORT: String(port),
      AGENT_HOST: '127.0.0.1',
      AGENT_TOKEN: token,
      NODE_DRIVER: 'dry-run',
      PUBLIC_HOST: '127.0.0.1',
      DATA_DIR: join(dir, 'node'),
    };
    agent = await startAgent(agentEnv);
    db = await createTestDatabase('sqlite');
    panel = await startPanel({ database: db, env: { LOCAL_NODE: 'off' } });
    key = await panel.createKey('ops', 'servers:read,servers:write');
  });
  after(async () => {
    await panel.stop();
    await agent.stop();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  const requestsSeen = () => agent.lines().filter((line) => line.msg === 'incoming request').length;

  it('speaks only TLS, with the certificate whose fingerprint it logged, kept 0600 in a 0700 DATA_DIR', async () => {
    assert.match(agent.certSha256 ?? '', /^[0-9A-F]{64}$/);
    assert.equal(await servedSha256(port), agent.certSha256);
    const certFile = join(dir, 'node', 'agent-tls-cert.pem');
    assert.equal(opensslSha256(certFile), agent.certSha256);
    const text = execFileSync('openssl', ['x509', '-noout', '-text', '-in', certFile], { encoding: 'utf8' });
    assert.match(text, /IP Address:127\.0\.0\.1/, 'PUBLIC_HOST is the subjectAltName');
    assert.equal(statSync(join(dir, 'node')).mode & 0o777, 0o700);
    assert.equal(statSync(certFile).mode & 0o777, 0o600);
    assert.equal(statSync(join(dir, 'node', 'agent-tls-key.pem')).mode & 0o777, 0o600);
    await assert.rejects(plainStatus(port, token), 'plain http fails');
  });

  it('with a wrong pin keeps the node offline, names the pin, and sends the agent no request', async () => {
    const before = requestsSeen();
    writeFileSync(join(dir, 'token'), `${token}\n`, { mode: 0o600 });
    const args = ['--url', `https://127.0.0.1:${port}`, '--token-file', join(dir, 'token'), '--cert-sha256', wrongPin];
    const added = await panel.cli(['nodes', 'add', '--name', 'wrong', ...args]);
    assert.equal(added.code, 0, added.stderr);
    const listed = await waitFor(
      'nodes list to show the pin error',
      async () => {
        const list = await panel.cli(['nodes', 'list']);
        const line = list.stdout.split('\n').find((l) => l.includes('\twrong\t'));
        return line?.includes('error:') === true ? line : undefined;
      },
      20_000,
      250,
    );
    assert.match(listed, /\toffline\t/);
    assert.ok(listed.includes(`--cert-sha256 ${wrongPin.toUpperCase()}`), listed);
    assert.ok(listed.includes(agent.certSha256 ?? '-'), `names the certificate served: ${listed}`);
    assert.ok(panel.output().includes(wrongPin.toUpperCase()), 'the panel logs the pin');
    assert.equal(await nodeStatus(panel, key, 'wrong'), 'offline');
    assert.equal(requestsSeen(), before, `the agent saw no request:\n${agent.output().slice(-2000)}`);
    assert.equal((await panel.cli(['nodes', 'remove', 'wrong'])).code, 0);
  });

  it('with the right pin (token on stdin, never in argv) comes online and deploys', async () => {
    // With colons and lower case: the form `openssl x509 -fingerprint` prints is accepted too.
    const pin = (agent.certSha256 ?? '').toLowerCase().replace(/(..)(?!$)/g, '$1:');
    const url = `https://127.0.0.1:${port}`;
    const added = await addWithTokenOnStdin(panel, ['--name', 'edge', '--url', url, '--cert-sha256', pin], token);
    assert.equal(added.code, 0, added.stderr);
    assert.ok(added.argv.includes('--cert-sha256'), `read the right process: ${added.argv}`);
    assert.ok(!added.argv.includes(token), 'the token is in no process list');
    await waitForOnline(panel, key, 'edge');
    const list = await panel.cli(['nodes', 'list']);
    assert.match(list.stdout, new RegExp(`\tedge\tonline\t.*\tpinned ${agent.certSha256}$`, 'm'));
    const [node] = (await callApi(panel.url, key, 'GET', '/nodes')).expect(200).data;
    assert.ok(node, 'the node is listed');
    (await callApi(panel.url, key, 'POST', '/servers', { name: 'pinned', node_id: node.id })).expect(201);
  });

  it('keeps its certificate across a restart, so the pinned node comes back', async () => {
    const first = agent.certSha256;
    await agent.stop();
    agent = await startAgent(agentEnv);
    assert.equal(agent.certSha256, first);
    assert.ok(!agent.output().includes('made a key'), 'no new key');
    const reached = async () => (requestsSeen() > 0 ? true : undefined);
    await waitFor('the panel to reach the restarted agent', reached, 15_000);
    assert.equal(await servedSha256(port), first);
  });
});

describe('AGENT_TLS=off', () => {
  it('serves plain HTTP and makes no certificate', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vpn-panel-plain-'));
    const port = await freePort();
    const token = 'plain-test-token-0123456789abcdef';
    const env = { AGENT_PORT: String(port), AGENT_HOST: '127.0.0.1', AGENT_TOKEN: token, NODE_DRIVER: 'dry-run' };
    const agent = await startAgent({ ...env, DATA_DIR: dir, AGENT_TLS: 'off' });
    try {
      assert.equal(agent.certSha256, undefined);
      assert.equal((await plainStatus(port, token)).status, 200);
      assert.throws(() => statSync(join(dir, 'agent-tls-cert.pem')), /ENOENT/);
    } finally {
      await agent.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
