/**
 * The metrics listeners as processes (issue 13): `vpn-panel serve` and `vpn-panel node` each serve
 * GET /metrics on METRICS_HOST:METRICS_PORT, apart from their API; METRICS_PORT=0 opens no port; the
 * Grafana dashboard names only metrics they expose.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type AgentProcess, startAgent } from '../support/agent.ts';
import { TEST_SERVER, testPeer } from '../support/agent-peers.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { parseScrape, type Scrape, seriesNames, sampleValue } from '../support/metrics.ts';
import { type ApiCall, callApi, freePort, type PanelProcess, ROOT, runCli, startPanel } from '../support/panel.ts';
import { waitFor } from '../support/netns.ts';

const TOKEN = 'metrics-test-token-0123456789';

async function scrape(port: number): Promise<Scrape> {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`);
  assert.equal(response.status, 200);
  assert.match(response.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  return parseScrape(await response.text());
}

/** The TCP ports a process listens on, from its socket descriptors and the kernel's socket tables. */
function listeningPorts(pid: number | undefined): number[] {
  assert.ok(pid !== undefined, 'the process runs');
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
      if (inode !== undefined) inodes.add(inode);
    } catch {
      // closed while we looked
    }
  }
  const ports: number[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const [, local, , state, , , , , , inode] = line.trim().split(/\s+/);
      if (state === '0A' && inode !== undefined && inodes.has(inode))
        ports.push(Number.parseInt(local?.split(':')[1] ?? '', 16));
    }
  }
  return ports.sort((a, b) => a - b);
}

async function portIsFree(port: number): Promise<boolean> {
  const server = createServer().listen(port, '127.0.0.1');
  const outcome = await Promise.race([
    once(server, 'listening').then(() => true),
    once(server, 'error').then(() => false),
  ]);
  if (outcome) server.close();
  return outcome;
}

/** The agent's env on the test's ports, plain HTTP and the dry-run driver. */
function agentEnv(dir: string, agentPort: number, metricsPort: string): Record<string, string> {
  return {
    AGENT_PORT: String(agentPort),
    AGENT_HOST: '127.0.0.1',
    AGENT_TOKEN: TOKEN,
    AGENT_TLS: 'off',
    NODE_DRIVER: 'dry-run',
    PUBLIC_HOST: '127.0.0.1',
    DATA_DIR: join(dir, 'node'),
    METRICS_PORT: metricsPort,
  };
}

/** Every metric name a PromQL expression names: what is left once functions, labels, ranges and keywords go. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '');
  const keywords = new Set(['and', 'or', 'unless', 'offset', 'bool']);
  return [...bare.matchAll(/\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()/g)]
    .map((m) => m[1] ?? '')
    .filter((name) => !keywords.has(name));
}

describe('metrics listeners of serve and node', () => {
  let db: TestDatabase;
  let dir: string;
  let panel: PanelProcess;
  let agent: AgentProcess;
  let key: string;
  let panelMetricsPort: number;
  let agentPort: number;
  let agentMetricsPort: number;
  const call: ApiCall = (method, path, body) => callApi(panel.url, key, method, path, body);

  before(async () => {
    db = await createTestDatabase('sqlite');
    dir = mkdtempSync(join(tmpdir(), 'vpn-panel-metrics-'));
    panelMetricsPort = await freePort();
    panel = await startPanel({
      database: db,
      env: { METRICS_PORT: String(panelMetricsPort), METRICS_REFRESH_INTERVAL: '1' },
    });
    key = await panel.createKey('ops', 'all', ['--no-rate-limit']);
    agentPort = await freePort();
    agentMetricsPort = await freePort();
    agent = await startAgent(agentEnv(dir, agentPort, String(agentMetricsPort)));
  });
  after(async () => {
    await panel.stop();
    await agent.stop();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves the panel's metrics apart from the API, and its counts follow what the API shows", async () => {
    assert.deepEqual(
      listeningPorts(panel.process.pid),
      [Number(new URL(panel.url).port), panelMetricsPort].sort((a, b) => a - b),
    );
    assert.equal((await fetch(`${panel.url}/metrics`)).status, 404, 'the API does not serve them');
    assert.equal((await fetch(`http://127.0.0.1:${panelMetricsPort}/other`)).status, 404);
    assert.equal((await fetch(`http://127.0.0.1:${panelMetricsPort}/metrics`, { method: 'POST' })).status, 405);

    const server = (await call('POST', '/servers', { name: 'm-1', max_devices: 10 })).expect(201);
    const devices = [];
    for (let i = 0; i < 3; i++) devices.push((await call('POST', '/devices', { server_id: server.id })).expect(201));
    assert.equal((await call('PATCH', `/devices/${devices[0]?.id}`, { enabled: false })).status, 200);
    const active = (await call('GET', '/devices?status=active')).expect(200).data.length;
    const disabled = (await call('GET', '/devices?status=disabled')).expect(200).data.length;
    const running = (await call('GET', '/servers')).expect(200).data.filter((s) => s.status === 'running').length;
    assert.deepEqual([active, disabled, running], [2, 1, 1]);

    // The census recounts every METRICS_REFRESH_INTERVAL (1 s here): wait for the count after these changes.
    // A count made between two of the requests above shows some of them: wait for one made after them all.
    const counted = await waitFor(
      'the census to count the new devices',
      async () => {
        const s = await scrape(panelMetricsPort);
        const devices = ['active', 'disabled'].map((status) => sampleValue(s, 'vpn_panel_devices', { status }));
        return devices[0] === active && devices[1] === disabled ? s : undefined;
      },
      10_000,
    );
    assert.equal(sampleValue(counted, 'vpn_panel_servers', { status: 'running', protocol: 'wireguard' }), running);
    assert.equal(sampleValue(counted, 'vpn_panel_nodes', { status: 'online' }), 1);
    assert.equal(
      sampleValue(counted, 'vpn_node_peers', { server: String(server.id) }),
      active,
      "the embedded node's peers",
    );
    const created = sampleValue(counted, 'vpn_panel_http_requests_total', {
      method: 'POST',
      route: '/api/v1/devices',
      status: '201',
    });
    assert.equal(created, 3);
    for (const name of [
      'process_cpu_user_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_eventloop_lag_seconds',
    ]) {
      assert.ok(seriesNames(counted).has(name), `prom-client's default ${name}`);
    }
  });

  it("serves the node agent's own metrics on its listener", async () => {
    assert.deepEqual(
      listeningPorts(agent.child.pid),
      [agentPort, agentMetricsPort].sort((a, b) => a - b),
    );
    const applied = await fetch(`http://127.0.0.1:${agentPort}/v1/servers/${TEST_SERVER.serverId}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ server: TEST_SERVER, peers: [testPeer(1), testPeer(2)] }),
    });
    assert.equal(applied.status, 200);

    const scraped = await scrape(agentMetricsPort);
    assert.equal(sampleValue(scraped, 'vpn_node_peers', { server: String(TEST_SERVER.serverId) }), 2);
    assert.equal(sampleValue(scraped, 'vpn_node_apply_duration_seconds_count', { kind: 'server' }), 1);
    assert.equal(sampleValue(scraped, 'vpn_node_journal_batches_unacknowledged'), 0);
    assert.equal(sampleValue(scraped, 'vpn_node_cutoffs_total', { reason: 'limit_reached' }), 0);
    assert.ok(seriesNames(scraped).has('process_cpu_user_seconds_total'));
    assert.deepEqual(
      [...seriesNames(scraped)].filter((name) => name.startsWith('vpn_panel_')),
      [],
      'no panel metrics in a node',
    );
  });

  it(
    'has a Grafana dashboard that names only metrics the ' + 'listeners expose, and every vpn_ metric they expose',
    async () => {
      const dashboard = JSON.parse(readFileSync(join(ROOT, 'deploy/grafana/vpn-panel.json'), 'utf8'));
      const exprs: string[] = dashboard.panels.flatMap((p: { targets?: { expr: string }[] }) =>
        (p.targets ?? []).map((t) => t.expr),
      );
      const named = new Set(exprs.flatMap(metricNames));
      assert.ok(named.size >= 15, `the dashboard's queries name the metrics (${[...named].join(', ')})`);
      const exposed = new Set([
        ...seriesNames(await scrape(panelMetricsPort)),
        ...seriesNames(await scrape(agentMetricsPort)),
      ]);
      assert.deepEqual(
        [...named].filter((name) => !exposed.has(name)),
        [],
        'names no listener exposes',
      );
      const families = [...exposed].filter((name) => name.startsWith('vpn_') && !/_(bucket|sum|count)$/.test(name));
      const shown = (family: string) => [...named].some((name) => name === family || name.startsWith(`${family}_`));
      assert.deepEqual(
        families.filter((family) => !shown(family)),
        [],
        'metrics the dashboard has no panel for',
      );
    },
  );
});

describe('METRICS_PORT', () => {
  let db: TestDatabase;
  let dir: string;
  before(async () => {
    db = await createTestDatabase('sqlite');
    dir = mkdtempSync(join(tmpdir(), 'vpn-panel-metrics-off-'));
  });
  after(async () => {
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('0 opens no metrics port in the panel nor in the node agent', async () => {
    const panel = await startPanel({ database: db, env: { METRICS_PORT: '0' } });
    const agentPort = await freePort();
    const agent = await startAgent(agentEnv(dir, agentPort, '0'));
    try {
      assert.deepEqual(listeningPorts(panel.process.pid), [Number(new URL(panel.url).port)]);
      assert.deepEqual(listeningPorts(agent.child.pid), [agentPort]);
    } finally {
      await panel.stop();
      await agent.stop();
    }
  });

  it('unset, a panel and a node agent on one host each open their own default port: 9464 and 9465', async () => {
    const defaults = [9464, 9465];
    for (const port of defaults) assert.ok(await portIsFree(port), `port ${port} is free on this machine for the test`);
    const panel = await startPanel({ database: db, env: { METRICS_PORT: undefined } });
    const agentPort = await freePort();
    const agent = await startAgent({ ...agentEnv(dir, agentPort, '0'), METRICS_PORT: undefined });
    try {
      assert.deepEqual(
        listeningPorts(panel.process.pid),
        [Number(new URL(panel.url).port), 9464].sort((a, b) => a - b),
      );
      assert.deepEqual(
        listeningPorts(agent.child.pid),
        [agentPort, 9465].sort((a, b) => a - b),
      );
      assert.equal(sampleValue(await scrape(9465), 'vpn_node_journal_batches_unacknowledged'), 0);
    } finally {
      await panel.stop();
      await agent.stop();
    }
  });

  it('already taken stops the start with one line naming it', async () => {
    const taken = createServer().listen(0, '127.0.0.1');
    await once(taken, 'listening');
    const address = taken.address();
    assert.ok(address !== null && typeof address === 'object');
    try {
      const env = {
        ...db.env,
        NODE_DRIVER: 'dry-run',
        PORT: String(await freePort()),
        METRICS_PORT: String(address.port),
      };
      const result = await runCli(['serve'], env);
      assert.equal(result.code, 1);
      const lines = result.stderr.trim().split('\n');
      assert.equal(lines.length, 1, result.stderr);
      assert.match(
        lines[0] ?? '',
        new RegExp(
          `^vpn-panel: metrics listener on 127\\.0\\.0\\.1:${address.port} ` +
            `\\(METRICS_HOST, METRICS_PORT; 0 turns it off\\): .*EADDRINUSE`,
        ),
      );
    } finally {
      taken.close();
    }
  });
});
