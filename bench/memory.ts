/**
 * Memory (issue 16 item 5, issue 13 item 5): the RSS of a real `vpn-panel serve` with its local node on the dry-run
 * driver (as the quick start runs it without root), and of one whose node is a `vpn-panel node`, on SQLite and
 * PostgreSQL, at 10,000 and 100,000 devices over 10
 * servers: after its start (which resyncs the node with every device), a full walk of GET /v1/devices (200 a page),
 * two collection rounds and a drift check. Each as Node starts it and with MEMORY_ENV, the settings scripts/start
 * and the systemd units give, and with MEMORY_ENV but V8's own heap growth (HEAP_GROWING_PERCENT=0); with the panel's
 * CPU time up to then. Then a `vpn-panel node` (dry-run) holding 10,000 peers sent by a resync over HTTP,
 * after a collection and a drift digest.
 * Targets (issue 16): panel RSS under 150 MB at 10,000 devices and under 250 MB at 100,000.
 * Run: node bench/memory.ts   (SIZES=10000,100000 may be set; KINDS=sqlite and WALKS=5, a partial run that only
 * prints its rows: the figure read after that many walks of every page, to see what repeated reads leave behind;
 * IDLE_S=60, also a partial run, adds the panel's CPU over that many seconds left alone after the reading)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HttpNodeConnection } from '../src/agent/connection.ts';
import type { DesiredServer } from '../src/agent/protocol.ts';
import { generateKeyPair } from '../src/domain/wireguard-keys.ts';
import { LOCAL_NODE_NAME } from '../src/services/nodes.ts';
import type { Db } from '../src/store/db.ts';
import { type AgentProcess, startAgent } from '../test/support/agent.ts';
import { NO_LIMITS } from '../test/support/agent-peers.ts';
import { DATABASE_KINDS, type DatabaseKind } from '../test/support/databases.ts';
import { freePort, startPanel } from '../test/support/panel.ts';
import { openTestStore } from '../test/support/stores.ts';
import { seedFleet, seedNode } from '../test/support/usage-fixtures.ts';
import { MEMORY_ENV, machine, processCpuSeconds, procStatusMb, writeSection } from './report.ts';

const SIZES = (process.env.SIZES ?? '10000,100000').split(',').map(Number);
const KINDS = DATABASE_KINDS.filter((kind) => (process.env.KINDS ?? kind).split(',').includes(kind));
const WALKS = Number(process.env.WALKS ?? 1);
/** Seconds the panel is left alone after the reading (collection rounds and drift checks only), its CPU then read. */
const IDLE_S = Number(process.env.IDLE_S ?? 0);
const SERVERS = 10;
const AGENT_PEERS = 10_000;
const TARGET_MB = new Map([
  [10_000, 150],
  [100_000, 250],
]);
/** Longer than the default drift interval (15 s), so a drift check ran before the figure is read. */
const DRIFT_INTERVAL_MS = 15_000;
const AS_STARTED = { name: 'as Node starts it', env: {} };
const SHIPPED = { name: 'MEMORY_ENV', env: MEMORY_ENV };
/**
 * The shipped settings with V8's own heap growth instead of the panel's `HEAP_GROWING_PERCENT`
 * (docs/operating.md "Memory").
 */
const V8_GROWTH = { name: 'MEMORY_ENV, HEAP_GROWING_PERCENT=0', env: { ...MEMORY_ENV, HEAP_GROWING_PERCENT: '0' } };
const SETTINGS = [AS_STARTED, SHIPPED, V8_GROWTH];
/** The quick start's panel with its local node in process, and a panel whose node is a `vpn-panel node` process. */
const LAYOUTS = [
  { name: 'local node', local: true, settings: SETTINGS },
  { name: 'remote node', local: false, settings: [SHIPPED, V8_GROWTH] },
];
const AGENT_TOKEN = 'bench-agent-token-0123456789abcdef';

const count = (n: number) => n.toLocaleString('en');
const mb = (value: number) => `${value.toFixed(0)} MB`;

/** The share of a core the panel used over IDLE_S seconds left alone, and its RSS at their end. */
async function idleCpu(pid: number, cpuBefore: number): Promise<string> {
  await new Promise((resolve) => setTimeout(resolve, IDLE_S * 1000));
  const share = (processCpuSeconds(pid) - cpuBefore) / IDLE_S;
  return `idle ${IDLE_S} s: ${(share * 100).toFixed(0)} % of a core, then ${mb(procStatusMb(pid, 'VmRSS'))}`;
}

/** Waits until the node was seen `rounds` more times (each node monitor round writes its last_seen_at). */
async function collectionRounds(db: Db, nodeId: number, rounds: number): Promise<void> {
  const seen = async () =>
    (await db.selectFrom('nodes').select('last_seen_at').where('id', '=', nodeId).executeTakeFirst())?.last_seen_at ??
    null;
  let last = await seen();
  for (let left = rounds; left > 0; ) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const now = await seen();
    if (now !== last) left--;
    last = now;
  }
}

/** Every page of GET /api/v1/devices, 200 a page; returns how many devices it held. */
async function walkDevices(url: string, key: string): Promise<number> {
  let walked = 0;
  for (let after = 0; ; ) {
    const page = await fetch(`${url}/api/v1/devices?limit=200&after=${after}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    if (!page.ok) throw new Error(`GET /api/v1/devices answered ${page.status}: ${await page.text()}`);
    const body = (await page.json()) as { data: { id: number }[]; has_more: boolean };
    walked += body.data.length;
    const last = body.data.at(-1);
    if (!body.has_more || last === undefined) return walked;
    after = last.id;
  }
}

/** `vpn-panel node` on the dry-run driver, without TLS, for a panel to reach at `url`. */
async function remoteNode(dir: string, env: Record<string, string>): Promise<{ agent: AgentProcess; url: string }> {
  const port = await freePort();
  const agent = await startAgent({
    AGENT_PORT: String(port),
    AGENT_HOST: '127.0.0.1',
    AGENT_TOKEN: AGENT_TOKEN,
    AGENT_TLS: 'off',
    NODE_DRIVER: 'dry-run',
    PUBLIC_HOST: '127.0.0.1',
    DATA_DIR: dir,
    ...env,
  });
  return { agent, url: `http://127.0.0.1:${port}` };
}

/**
 * The rows of one database kind and size: for each layout and settings a panel is started on the seeded rows, its
 * devices walked, two collection rounds and a drift check waited for, and its RSS (and the remote node's) read.
 */
async function panelRows(kind: DatabaseKind, devices: number): Promise<string[]> {
  const { store, database, close } = await openTestStore(kind, { sealed: true });
  const dir = mkdtempSync(join(tmpdir(), 'vpn-memory-'));
  try {
    const now = new Date().toISOString();
    const rows: string[] = [];
    for (const layout of LAYOUTS) {
      // The devices go to the layout's node: the local one, or a remote one in its own process (a panel without a
      // local node refuses to start beside the local node's row).
      for (const table of ['devices', 'servers', 'nodes'] as const) await store.db.deleteFrom(table).execute();
      const node = await seedNode(store.db, layout.local ? LOCAL_NODE_NAME : 'remote', now);
      await seedFleet(store.db, node, { devices, servers: SERVERS }, now);
      for (const settings of layout.settings) {
        const remote = layout.local ? undefined : await remoteNode(join(dir, String(rows.length)), settings.env);
        if (remote) {
          const reach = { url: remote.url, token: AGENT_TOKEN, status: 'offline' as const };
          await store.db.updateTable('nodes').set(reach).where('id', '=', node.id).execute();
        }
        const started = performance.now();
        const env = { LOG_LEVEL: 'error', LOCAL_NODE: layout.local ? 'true' : 'false', ...settings.env };
        const panel = await startPanel({ database, env });
        try {
          const pid = panel.process.pid ?? 0;
          const afterStart = procStatusMb(pid, 'VmRSS');
          const key = await panel.createKey(`bench-${rows.length}`, 'all', ['--no-rate-limit']);
          for (let walk = 0; walk < WALKS; walk++) {
            const walked = await walkDevices(panel.url, key);
            if (walked !== devices) throw new Error(`walked ${walked} devices of ${devices}`);
          }
          await collectionRounds(store.db, node.id, 2);
          const driftWait = DRIFT_INTERVAL_MS + 1_000 - (performance.now() - started);
          if (driftWait > 0) await new Promise((resolve) => setTimeout(resolve, driftWait));
          const rss = procStatusMb(pid, 'VmRSS');
          const target = TARGET_MB.get(devices);
          const verdict =
            target === undefined ? '' : rss < target ? ` (under ${target}: met)` : ` (${target}: not met)`;
          const nodePid = remote?.agent.child.pid;
          const nodeRss = nodePid === undefined ? 'in the panel' : mb(procStatusMb(nodePid, 'VmRSS'));
          const cells = [kind, count(devices), layout.name, settings.name, mb(afterStart), `**${mb(rss)}**${verdict}`];
          const cpuSoFar = processCpuSeconds(pid);
          const idle = IDLE_S > 0 ? [await idleCpu(pid, cpuSoFar)] : [];
          const cpu = `${cpuSoFar.toFixed(1)} s`;
          rows.push(`| ${[...cells, mb(procStatusMb(pid, 'VmHWM')), cpu, nodeRss, ...idle].join(' | ')} |`);
        } finally {
          await panel.stop();
          await remote?.agent.stop();
        }
      }
    }
    return rows;
  } finally {
    await close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Distinct valid public keys, cheaply: one real key with its first bytes varied. */
function keys(n: number): string[] {
  const base = Buffer.from(generateKeyPair().publicKey, 'base64');
  return Array.from({ length: n }, (_, i) => {
    const key = Buffer.from(base);
    key.writeUInt32BE(i, 0);
    return key.toString('base64');
  });
}

async function agentRows(): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'vpn-memory-'));
  const rows: string[] = [];
  try {
    for (const settings of SETTINGS) {
      const { agent, url } = await remoteNode(join(dir, settings.name.replaceAll(' ', '-')), settings.env);
      try {
        const pid = agent.child.pid ?? 0;
        const idle = procStatusMb(pid, 'VmRSS');
        const server = { serverId: 1, privateKey: generateKeyPair().privateKey, listenPort: 51820, mtu: 1420 };
        const desired: DesiredServer = {
          server: { ...server, address: '10.0.0.1/16' },
          peers: keys(AGENT_PEERS).map((publicKey, i) => ({
            deviceId: i + 1,
            publicKey,
            allowedIp: `10.0.${((i + 2) >> 8) & 255}.${(i + 2) & 255}/32`,
            speedLimitKbps: 0,
            limits: NO_LIMITS,
          })),
        };
        const connection = new HttpNodeConnection({
          name: 'bench',
          url,
          token: AGENT_TOKEN,
          certSha256: null,
        });
        async function* one(): AsyncGenerator<DesiredServer> {
          yield desired;
        }
        const report = await connection.resync(one());
        if (report.applied.length !== 1) throw new Error(`resync failed: ${report.failures.join('; ')}`);
        await connection.collectUsage(null);
        await connection.digest();
        const [rss, peak] = [procStatusMb(pid, 'VmRSS'), procStatusMb(pid, 'VmHWM')];
        rows.push(`| ${count(AGENT_PEERS)} | ${settings.name} | ${mb(idle)} | **${mb(rss)}** | ${mb(peak)} |`);
      } finally {
        await agent.stop();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

const panel: string[] = [];
for (const devices of SIZES) for (const kind of KINDS) panel.push(...(await panelRows(kind, devices)));
if (WALKS !== 1 || IDLE_S > 0 || KINDS.length < DATABASE_KINDS.length) {
  console.log(`${WALKS} walks:\n${panel.join('\n')}`);
  process.exit(0);
}
const agent = await agentRows();
const memoryEnv = Object.entries(MEMORY_ENV)
  .map(([k, v]) => `${k}=${v}`)
  .join(' ');
const body = [
  `\`node bench/memory.ts\` (${machine()}).`,
  '',
  'A real `vpn-panel serve`, devices over',
  `${SERVERS} servers; RSS (VmRSS) after its start (it resyncs the node with every device first), then after a walk of`,
  'every page of GET /v1/devices (200 a page), two collection rounds and a drift check; its peak (VmHWM). "local',
  'node": its node in process on the dry-run driver (the quick start without root), so the node\'s state of every peer',
  'is in the panel\'s figures; "remote node": the node is a `vpn-panel node` process (dry-run, no TLS), its RSS in the',
  'last column. MEMORY_ENV is',
  `\`${memoryEnv}\`: what scripts/start and deploy/*.service set ([operating.md "Memory"](operating.md#memory)).`,
  '"MEMORY_ENV, HEAP_GROWING_PERCENT=0": the same, with V8\'s own heap growth instead of the panel\'s 20 %',
  '([operating.md "Memory"](operating.md#memory)). Panel CPU: its CPU time (user and system) from its start to the',
  'reading.',
  'Targets (issue 16): under 150 MB at 10,000 devices, under 250 MB at 100,000.',
  '',
  '| database | devices | node | settings | RSS after start | RSS after walk and rounds | peak RSS | panel CPU |' +
    ' node RSS |',
  '|---|---|---|---|---|---|---|---|---|',
  ...panel,
  '',
  '`vpn-panel node` (dry-run, no TLS) sent one server of 10,000 peers by a resync over HTTP, then a collection and',
  'a drift digest:',
  '',
  '| peers | settings | RSS idle | RSS holding them | peak RSS |',
  '|---|---|---|---|---|',
  ...agent,
].join('\n');
console.log(body);
writeSection('Memory: panel and node RSS (issue 16)', body);
process.exit(0);
