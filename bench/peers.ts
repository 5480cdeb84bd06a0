/**
 * Peers on one server with the wireguard driver (wireguard-go), in a namespace this script makes:
 * the time to apply 10,000 peers, and the time to change one peer among 10,000 (median and p95),
 * along every path a change can take: the incremental one a device change uses (driver.changePeers,
 * Agent.changePeers, the agent's `POST /v1/servers/:id/peers` as the panel calls it) and the full
 * diff that applyServer and a resync run (driver.setPeers, Agent.applyServer).
 * Target (issue): one peer change under 50 ms at 10,000 peers, with no full re-apply. Those paths run with the
 * driver reaching wireguard-go through `wg` (`wireguardGoConfig: 'wg'`), as before issue 16.
 *
 * Then issue 16's comparison on the same interface, rounds interleaved: one peer change and the `wg show dump`
 * equivalent read through wireguard-go's UAPI socket against the same through a `wg` process, wireguard-go's
 * own share of a read (its first and last byte on the raw socket), and the RSS of this process (the agent:
 * Agent, its HTTP app, the driver) at 10,000 peers. Targets: change ≤ 0.3 of `wg`, read ≥ 2x faster.
 *
 * Run as root: node bench/peers.ts   (PEERS, CHANGES and UAPI_ROUNDS may be set in the environment)
 * Writes the sections "## Peers on one server (wireguard-go)" and "## Peers over wireguard-go's UAPI socket
 * (issue 16)" of docs/benchmarks.md.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { firstLine, host, loadAverage, writeSection } from './report.ts';
import { pino } from 'pino';
import { Agent } from '../src/agent/agent.ts';
import {
  type ChildHandle,
  type CommandRunner,
  ExecRunner,
  type RunOptions,
  type RunResult,
  type StartOptions,
} from '../src/agent/commands.ts';
import { HttpNodeConnection } from '../src/agent/connection.ts';
import type { CounterReading, Driver, PeerAllowance, PeerSpec, ServerSpec, ServerState } from '../src/agent/driver.ts';
import type { AgentPeer, UsageAck } from '../src/agent/protocol.ts';
import { buildAgentApp } from '../src/agent/http.ts';
import { WireGuardDriver } from '../src/agent/wireguard/driver.ts';
import { type InterfaceConfig, UapiConfig, type WgTarget, WgTool } from '../src/agent/wireguard/interface-config.ts';
import { UapiClient } from '../src/agent/wireguard/uapi.ts';
import { generateKeyPair } from '../src/domain/wireguard-keys.ts';
import { startAgent } from '../test/support/agent.ts';
import { CHILD_LOG_DIR, NetLab, requireRoot } from '../test/support/netns.ts';

const PEERS = Number(process.env.PEERS ?? 10_000);
const CHANGES = Number(process.env.CHANGES ?? 20);
const TARGET_MS = 50;
const SECTION = 'Peers on one server (wireguard-go)';
const UAPI_ROUNDS = Number(process.env.UAPI_ROUNDS ?? 60);
const UAPI_SECTION = "Peers over wireguard-go's UAPI socket (issue 16)";
const CHANGE_TARGET = 0.3;
const READ_TARGET = 2;

/**
 * Runs commands for real; counts the `wg set` calls and the peers they name, and, while the driver
 * works on peers (`inPeers`), the time inside `wg show … dump` and inside `wg set`.
 */
class CountingRunner implements CommandRunner {
  readonly #inner = new ExecRunner(CHILD_LOG_DIR);
  inPeers = false;
  wgSetCalls = 0;
  wgSetPeers = 0;
  dumpMs = 0;
  setMs = 0;

  async run(cmd: string, args: readonly string[], opts?: RunOptions): Promise<RunResult> {
    const isSet = cmd === 'wg' && args[0] === 'set';
    const isDump = cmd === 'wg' && args[0] === 'show' && args.at(-1) === 'dump';
    if (isSet) {
      this.wgSetCalls++;
      this.wgSetPeers += args.filter((a) => a === 'peer').length;
    }
    const counted = this.inPeers;
    const start = performance.now();
    try {
      return await this.#inner.run(cmd, args, opts);
    } finally {
      const took = performance.now() - start;
      if (counted && isSet) this.setMs += took;
      if (counted && isDump) this.dumpMs += took;
    }
  }

  start(cmd: string, args: readonly string[], opts?: StartOptions): ChildHandle {
    return this.#inner.start(cmd, args, opts);
  }

  reset(): void {
    this.wgSetCalls = 0;
    this.wgSetPeers = 0;
    this.dumpMs = 0;
    this.setMs = 0;
  }
}

/** The driver, timing its up() and its peer operations (operations on one server run one at a time). */
class TimedDriver implements Driver {
  readonly kind = 'wireguard';
  readonly #inner: WireGuardDriver;
  readonly #runner: CountingRunner;
  upMs = 0;
  peersMs = 0;

  constructor(inner: WireGuardDriver, runner: CountingRunner) {
    this.#inner = inner;
    this.#runner = runner;
  }

  get protocols(): Driver['protocols'] {
    return this.#inner.protocols;
  }

  async up(spec: ServerSpec): Promise<ServerState> {
    const start = performance.now();
    try {
      return await this.#inner.up(spec);
    } finally {
      this.upMs += performance.now() - start;
    }
  }

  setPeers(serverId: number, peers: readonly PeerSpec[]): Promise<void> {
    return this.#timePeers(() => this.#inner.setPeers(serverId, peers));
  }

  changePeers(serverId: number, upsert: readonly PeerSpec[], remove: readonly string[]): Promise<void> {
    return this.#timePeers(() => this.#inner.changePeers(serverId, upsert, remove));
  }

  readCounters(serverId: number): Promise<CounterReading> {
    return this.#inner.readCounters(serverId);
  }

  readAllowances(serverId: number): Promise<ReadonlyMap<string, number>> {
    return this.#inner.readAllowances(serverId);
  }

  setAllowances(serverId: number, allowances: readonly PeerAllowance[]): Promise<void> {
    return this.#inner.setAllowances(serverId, allowances);
  }

  inspect(spec: ServerSpec, peers: readonly PeerSpec[]): Promise<string[]> {
    return this.#inner.inspect(spec, peers);
  }

  down(serverId: number): Promise<void> {
    return this.#inner.down(serverId);
  }

  hostNetworks(): Promise<string[]> {
    return this.#inner.hostNetworks();
  }

  list(): Promise<number[]> {
    return this.#inner.list();
  }

  reset(): void {
    this.upMs = 0;
    this.peersMs = 0;
  }

  async #timePeers(work: () => Promise<void>): Promise<void> {
    const start = performance.now();
    this.#runner.inPeers = true;
    try {
      await work();
    } finally {
      this.#runner.inPeers = false;
      this.peersMs += performance.now() - start;
    }
  }
}

export interface Stats {
  median: number;
  p95: number;
  min: number;
  max: number;
}

interface ChangeResult {
  label: string;
  stats: Stats;
  /** Most `wg set` calls, and most peers they named, in one change. */
  calls: number;
  touched: number;
  /**
   * Medians of one change's time in up(), in the driver's peer operation, and inside it in `wg show dump`
   * and `wg set`.
   */
  upMs: number;
  peersMs: number;
  dumpMs: number;
  setMs: number;
}

export function stats(samples: readonly number[]): Stats {
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = (p: number): number =>
    sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] ?? Number.NaN;
  const mid = Math.floor(sorted.length / 2);
  const median =
    sorted.length % 2 === 1 ? (sorted[mid] ?? Number.NaN) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
  return { median, p95: rank(0.95), min: sorted[0] ?? Number.NaN, max: sorted.at(-1) ?? Number.NaN };
}

async function timed(work: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await work();
  return performance.now() - start;
}

const ms = (value: number): string => `${value.toFixed(1)} ms`;
const count = (n: number): string => n.toLocaleString('en');

/** A peer as the panel sends it to the agent: device id from its address, no limits. */
function agentPeer(peer: PeerSpec): AgentPeer {
  const deviceId =
    (Number(
      peer.allowedIp
        .split(/[./]/)
        .slice(0, 4)
        .reduce((n, octet) => n * 256 + Number(octet), 0),
    ) %
      2_000_000_000) +
    1;
  return {
    ...peer,
    deviceId,
    limits: { remainingBytes: null, journalId: '', meter: 0, dataLimit: 0, periodEndsAtMs: null, expiresAtMs: null },
  };
}

/** The n-th peer address in `net`.0.0/16 (10.96 unless given), skipping .0 and the server's .1 (at most ~65k). */
export function peerAddress(n: number, net = '10.96'): string {
  const host = n + 2;
  return `${net}.${Math.floor(host / 256)}.${host % 256}/32`;
}

/**
 * One timed peer change, as every change round of this bench makes it: the peer at the round's slot of `peers` is
 * swapped for a key of `spare` at the same address, through `apply` (given the whole new list, the removed key and
 * the new peer); the time `apply` took, in ms. bench/protocols.ts times its changes with it too.
 */
export async function timedPeerSwap(
  peers: PeerSpec[],
  spare: string[],
  round: number,
  apply: (list: PeerSpec[], removed: string, added: PeerSpec) => Promise<unknown>,
): Promise<number> {
  const slot = (round * 487 + round * 13) % peers.length;
  const old = peers[slot];
  const publicKey = spare.pop();
  if (old === undefined || publicKey === undefined) throw new Error('out of keys');
  const added = { publicKey, allowedIp: old.allowedIp, speedLimitKbps: 0 };
  peers[slot] = added;
  return timed(() => apply(peers, old.publicKey, added));
}

function rssMb(pid: number): number {
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return kb === undefined ? Number.NaN : Number(kb) / 1024;
}

async function main(): Promise<void> {
  const notRunnable = requireRoot();
  if (notRunnable !== false) {
    console.error(`bench/peers.ts ${notRunnable}`);
    process.exitCode = 1;
    return;
  }
  if (!Number.isInteger(PEERS) || PEERS < 2 || PEERS > 65_000) throw new Error('PEERS must be 2-65000');
  if (!Number.isInteger(CHANGES) || CHANGES < 1) throw new Error('CHANGES must be 1 or more');

  console.log(`generating ${count(PEERS)} key pairs…`);
  const PATHS = 5;
  const UAPI_PATHS = 4;
  const changeKeys = CHANGES * PATHS + UAPI_ROUNDS * UAPI_PATHS;
  const keys = Array.from({ length: PEERS + changeKeys }, () => generateKeyPair().publicKey);
  const peers: PeerSpec[] = keys
    .slice(0, PEERS)
    .map((publicKey, i) => ({ publicKey, allowedIp: peerAddress(i), speedLimitKbps: 0 }));
  const spare = keys.slice(PEERS);

  const lab = await NetLab.create();
  const runner = new CountingRunner();
  const wireguard = new WireGuardDriver({
    runner,
    namePrefix: lab.prefix,
    hostNetns: lab.hostNs,
    implementation: 'wireguard-go',
    wireguardGoConfig: 'wg',
  });
  const driver = new TimedDriver(wireguard, runner);
  // The same server reached through its UAPI socket, as the agent does by default.
  const viaUapi = new WireGuardDriver({ runner, namePrefix: lab.prefix, hostNetns: lab.hostNs });
  const agent = new Agent(driver, 'bench');
  const serverId = 1;
  const server: ServerSpec = {
    serverId,
    privateKey: generateKeyPair().privateKey,
    listenPort: 51820,
    address: '10.96.0.1/16',
    mtu: 1420,
  };
  const token = 'bench-token-'.padEnd(32, 'x');
  const app = await buildAgentApp({ agent, token, logger: pino({ level: 'silent' }) });
  let interrupted = false;
  const onSignal = (): void => {
    interrupted = true;
  };
  process.once('SIGINT', onSignal);

  /**
   * Swaps one peer for a new key at the same address each round, through `apply` (given the whole
   * new list, the removed key and the new peer), and records how much of the interface it touched.
   */
  const changeRounds = async (
    label: string,
    apply: (list: PeerSpec[], removed: string, added: PeerSpec) => Promise<unknown>,
  ): Promise<ChangeResult> => {
    const samples: number[] = [];
    const phases = { up: [] as number[], peers: [] as number[], dump: [] as number[], set: [] as number[] };
    let calls = 0;
    let touched = 0;
    for (let round = 0; round < CHANGES && !interrupted; round++) {
      runner.reset();
      driver.reset();
      samples.push(await timedPeerSwap(peers, spare, round, apply));
      calls = Math.max(calls, runner.wgSetCalls);
      touched = Math.max(touched, runner.wgSetPeers);
      phases.up.push(driver.upMs);
      phases.peers.push(driver.peersMs);
      phases.dump.push(runner.dumpMs);
      phases.set.push(runner.setMs);
    }
    const median = (values: number[]): number => stats(values).median;
    const result = {
      label,
      stats: stats(samples),
      calls,
      touched,
      upMs: median(phases.up),
      peersMs: median(phases.peers),
      dumpMs: median(phases.dump),
      setMs: median(phases.set),
    };
    console.log(
      `${label}: median ${ms(result.stats.median)}, p95 ${ms(result.stats.p95)}, ` +
        `≤${calls} wg set call(s) naming ≤${touched} peer(s)`,
    );
    return result;
  };

  try {
    const upMs = await timed(() => driver.up(server));
    runner.reset();
    const applyMs = await timed(() => driver.setPeers(serverId, peers));
    const applyCalls = { calls: runner.wgSetCalls, peers: runner.wgSetPeers };
    const onInterface = (await driver.readCounters(serverId)).peers.length;
    if (onInterface !== PEERS) throw new Error(`expected ${PEERS} peers on the interface, found ${onInterface}`);
    const noopMs = await timed(() => driver.setPeers(serverId, peers));
    const countersMs = await timed(() => driver.readCounters(serverId));
    // The agent learns the server's peers from a full apply (as after a resync); its changes build on them.
    const agentApplyMs = await timed(() => agent.applyServer({ server, peers: peers.map(agentPeer) }));

    await app.listen({ port: 0, host: '127.0.0.1' });
    const address = app.server.address();
    if (address === null || typeof address === 'string') throw new Error('agent app has no port');
    const url = `http://127.0.0.1:${address.port}`;
    const connection = new HttpNodeConnection({ name: 'bench', url, token, certSha256: null });

    const incremental = [
      await changeRounds('driver.changePeers', (_list, removed, added) =>
        driver.changePeers(serverId, [added], [removed]),
      ),
      await changeRounds('Agent.changePeers (local node)', (_list, removed, added) =>
        agent.changePeers(serverId, { upsert: [agentPeer(added)], remove: [removed], deleted: true }),
      ),
      await changeRounds('HTTP POST /v1/servers/:id/peers (remote node)', (_list, removed, added) =>
        connection.changePeers(serverId, { upsert: [agentPeer(added)], remove: [removed], deleted: true }),
      ),
    ];
    const full = [
      await changeRounds('driver.setPeers (full diff)', (list) => driver.setPeers(serverId, list)),
      await changeRounds('Agent.applyServer (up + full diff)', (list) =>
        agent.applyServer({ server, peers: list.map(agentPeer) }),
      ),
    ];
    const onInterfaceAfter = (await driver.readCounters(serverId)).peers.map((c) => c.publicKey).sort();
    const expected = peers.map((p) => p.publicKey).sort();
    if (JSON.stringify(onInterfaceAfter) !== JSON.stringify(expected))
      throw new Error('the interface does not hold the expected peers after the changes');
    const wgPid = [...lab.wireguardGoProcesses()].find(([, name]) => name === `${lab.prefix}${serverId}`)?.[0];
    const rss = wgPid === undefined ? Number.NaN : rssMb(wgPid);
    if (interrupted) throw new Error('interrupted');
    const iface = wireguard.names(serverId).iface;
    const comparison = await compareUapi({ wg: wireguard, uapi: viaUapi }, serverId, iface, peers, spare);
    if (interrupted) throw new Error('interrupted');
    const agentMemory = await agentRss(lab, peers);

    const verdict = (r: ChangeResult): string => (r.stats.p95 < TARGET_MS && r.touched <= 2 ? 'met' : 'NOT met');
    const [viaDriver, viaAgent, viaHttp] = incremental;
    if (viaDriver === undefined || viaAgent === undefined || viaHttp === undefined) throw new Error('missing results');
    const row = (r: ChangeResult, strong = false): string => {
      const figure = `median ${ms(r.stats.median)}, p95 ${ms(r.stats.p95)} (max ${ms(r.stats.max)})`;
      return (
        `| ${r.label} | ≤ ${r.calls} \`wg set\` naming ≤ ${r.touched} peers | ` +
        `${strong ? `**${figure}**` : figure} |`
      );
    };
    const body = [
      `Command: \`node bench/peers.ts\` (as root; \`PEERS=${PEERS} CHANGES=${CHANGES}\` are the defaults). ` +
        `Machine: ${host()}, ${firstLine('wireguard-go', ['--version'])}, ` +
        `${firstLine('wg', ['--version']).split(' - ')[0] ?? ''}, ` +
        `Node ${process.versions.node}, ${new Date().toISOString().slice(0, 10)}.`,
      '',
      'One server made by the `wireguard` driver (wireguard-go reached through `wg`; ' +
        `host namespace made by the script), ${count(PEERS)} peers with a /32 each, no traffic. ` +
        'A change swaps one peer for a new key at the same address (one removal, one addition). ' +
        `Timings of one run, ${CHANGES} changes a path; after all of them the interface holds exactly the ` +
        `expected ${count(PEERS)} peers.`,
      '',
      '| operation | time |',
      '|---|---|',
      `| \`up()\` of the new server | ${ms(upMs)} |`,
      `| \`setPeers\`: ${count(PEERS)} new peers (${applyCalls.calls} \`wg set\` calls naming ` +
        `${count(applyCalls.peers)} peers) | ${ms(applyMs)} |`,
      `| \`setPeers\`: the same ${count(PEERS)} again (nothing to change) | ${ms(noopMs)} |`,
      `| \`Agent.applyServer\` with the same ${count(PEERS)} (up() + full diff, ` +
        `nothing to change) | ${ms(agentApplyMs)} |`,
      `| \`readCounters\` at ${count(PEERS)} | ${ms(countersMs)} |`,
      `| wireguard-go RSS at ${count(PEERS)} peers | ${rss.toFixed(0)} MB |`,
      '',
      `One peer changed among ${count(PEERS)}:`,
      '',
      '| path | touches | time |',
      '|---|---|---|',
      row(viaDriver),
      row(viaAgent, true),
      row(viaHttp, true),
      ...full.map((r) => row(r)),
      '',
      `Target: one peer change under ${TARGET_MS} ms at ${count(PEERS)} peers, ` +
        `no full re-apply: **${verdict(viaHttp)}** on a remote node (HTTP p95 ${ms(viaHttp.stats.p95)}) and ` +
        `**${verdict(viaAgent)}** on the local node (p95 ${ms(viaAgent.stats.p95)}); ` +
        'a device change takes these incremental paths, which name only the changed peers and never read the ' +
        'interface. The full diff, which `applyServer` and a resync run, ' +
        `reads and compares all ${count(PEERS)} peers and is not meant for single changes.`,
      '',
      'Where the time of one change goes (medians):',
      '',
      '| path | total | `up()` | driver peer operation | of which `wg show dump` | of which `wg set` | ' +
        'of which Node (parse, diff) | outside the driver (agent, HTTP, JSON) |',
      '|---|---|---|---|---|---|---|---|',
      ...[...incremental, ...full].map(
        (r) =>
          `| ${r.label} | ${ms(r.stats.median)} | ${r.upMs > 0 ? ms(r.upMs) : '–'} | ${ms(r.peersMs)} | ` +
          `${r.dumpMs > 0 ? ms(r.dumpMs) : '–'} | ${ms(r.setMs)} | ` +
          `${ms(Math.max(0, r.peersMs - r.dumpMs - r.setMs))} | ` +
          `${ms(Math.max(0, r.stats.median - r.upMs - r.peersMs))} |`,
      ),
    ].join('\n');
    console.log(`\n## ${SECTION}\n\n${body}\n`);
    writeSection(SECTION, body);
    const uapiBody = uapiReport(comparison, rss, agentMemory);
    console.log(`\n## ${UAPI_SECTION}\n\n${uapiBody}\n`);
    writeSection(UAPI_SECTION, uapiBody);
    console.log('wrote the sections to docs/benchmarks.md');
  } finally {
    await app.close().catch(() => undefined);
    await driver.down(serverId).catch((error: unknown) => console.error(`down: ${String(error)}`));
    await wireguard.close();
    const problems = await lab.cleanup();
    if (problems.length > 0) console.error(`cleanup: ${problems.join('; ')}`);
    process.removeListener('SIGINT', onSignal);
  }
}

interface UapiComparison {
  rounds: number;
  /** One peer swapped by the driver's changePeers, through UAPI and through `wg`. */
  driverUapi: number[];
  driverWg: number[];
  /** The same change as one InterfaceConfig call: a socket request against a `wg set` run. */
  rawUapi: number[];
  rawWg: number[];
  /** The `wg show dump` equivalent: UAPI get parsed (all, and counters only) against `wg show dump` + parse. */
  readUapi: number[];
  readUapiCounters: number[];
  readWg: number[];
  /** wireguard-go's own part of a read: request to first byte, and to last byte, with no parsing. */
  firstByte: number[];
  lastByte: number[];
  answerBytes: number;
  /** The driver's readCounters (the read above and the instance, a socket stat while wireguard-go is the same). */
  countersUapi: number[];
  countersWg: number[];
  agentRssMb: number;
  heapMb: number;
}

/** Times `work` and pushes the time into `into`. */
async function sample(into: number[], work: () => Promise<unknown>): Promise<void> {
  const start = performance.now();
  await work();
  into.push(performance.now() - start);
}

/**
 * A raw `get=1` on the socket, unparsed: when wireguard-go's first and last byte arrive, and how many. Read as the
 * client reads (large reads into one buffer), so the last byte comes as early as any client can have it.
 */
function rawGet(path: string): Promise<{ firstMs: number; lastMs: number; bytes: number }> {
  const buffer = Buffer.allocUnsafe(256 * 1024);
  return new Promise((resolve, reject) => {
    const start = performance.now();
    let firstMs = Number.NaN;
    let bytes = 0;
    let last = 0;
    const read = (length: number): boolean => {
      if (bytes === 0) firstMs = performance.now() - start;
      bytes += length;
      const before = length > 1 ? buffer[length - 2] : last;
      last = buffer[length - 1] ?? 0;
      if (last === 0x0a && before === 0x0a) {
        socket.destroy();
        resolve({ firstMs, lastMs: performance.now() - start, bytes });
      }
      return true;
    };
    const socket = createConnection({ path, onread: { buffer, callback: read } }, () => socket.write('get=1\n\n'));
    socket.once('error', reject);
  });
}

/**
 * Rounds alternating which way goes first, on the interface of `serverId` holding `peers`: each change swaps
 * one peer of `peers` for a key of `spare` at the same address (so the interface keeps its peer count).
 */
async function compareUapi(
  drivers: { wg: WireGuardDriver; uapi: WireGuardDriver },
  serverId: number,
  iface: string,
  peers: PeerSpec[],
  spare: string[],
): Promise<UapiComparison> {
  const at: WgTarget = { iface, netns: undefined };
  const configs: { uapi: InterfaceConfig; wg: InterfaceConfig } = {
    uapi: new UapiConfig(),
    wg: new WgTool(new ExecRunner(CHILD_LOG_DIR)),
  };
  const socket = new UapiClient().socketPath(iface);
  const c: UapiComparison = {
    rounds: UAPI_ROUNDS,
    ...{ driverUapi: [], driverWg: [], rawUapi: [], rawWg: [], readUapi: [], readUapiCounters: [], readWg: [] },
    ...{ firstByte: [], lastByte: [], answerBytes: 0, countersUapi: [], countersWg: [], agentRssMb: 0, heapMb: 0 },
  };
  let slot = 0;
  const swap = (): { removed: string; added: PeerSpec } => {
    slot = (slot + 7919) % peers.length;
    const old = peers[slot];
    const publicKey = spare.pop();
    if (old === undefined || publicKey === undefined) throw new Error('out of keys');
    const added = { publicKey, allowedIp: old.allowedIp, speedLimitKbps: 0 };
    peers[slot] = added;
    return { removed: old.publicKey, added };
  };
  const ways = ['uapi', 'wg'] as const;
  for (let round = 0; round < UAPI_ROUNDS; round++) {
    for (const way of round % 2 === 0 ? ways : [...ways].reverse()) {
      const driverTimes = way === 'uapi' ? c.driverUapi : c.driverWg;
      const d = swap();
      await sample(driverTimes, () => drivers[way].changePeers(serverId, [d.added], [d.removed]));
      const r = swap();
      const change = [
        { publicKey: r.removed, remove: true as const },
        { publicKey: r.added.publicKey, allowedIps: r.added.allowedIp },
      ];
      await sample(way === 'uapi' ? c.rawUapi : c.rawWg, () => configs[way].changePeers(at, change));
      if (way === 'uapi') {
        await sample(c.readUapi, () => configs.uapi.read(at));
        await sample(c.readUapiCounters, () => configs.uapi.readCounters(at));
        const raw = await rawGet(socket);
        c.firstByte.push(raw.firstMs);
        c.lastByte.push(raw.lastMs);
        c.answerBytes = raw.bytes;
      } else await sample(c.readWg, () => configs.wg.read(at));
      await sample(way === 'uapi' ? c.countersUapi : c.countersWg, () => drivers[way].readCounters(serverId));
    }
  }
  const onHost = (await configs.uapi.read(at)).peers.map((p) => p.publicKey).sort();
  if (JSON.stringify(onHost) !== JSON.stringify(peers.map((p) => p.publicKey).sort()))
    throw new Error('after the UAPI rounds the interface does not hold the expected peers');
  const memory = process.memoryUsage();
  c.agentRssMb = memory.rss / 2 ** 20;
  c.heapMb = memory.heapUsed / 2 ** 20;
  return c;
}

interface AgentMemory {
  startedMb: number;
  appliedMb: number;
  meteredMb: number;
  rounds: number;
}

/** A free TCP port on loopback (asked of the kernel, then released). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address !== null ? resolve(address.port) : reject()));
    });
  });
}

/**
 * RSS of a real `vpn-panel node` (wireguard driver, UAPI, as deployed): started, then given a second server
 * with the same number of peers over its HTTP API, then after metering rounds (one a second, each a counter
 * read of every peer) and usage collections as the panel makes them.
 */
async function agentRss(lab: NetLab, peers: readonly PeerSpec[]): Promise<AgentMemory> {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-peers-agent-'));
  const port = await freePort();
  const token = 'bench-agent-token-'.padEnd(32, 'x');
  const env = {
    ...{ AGENT_TOKEN: token, AGENT_PORT: String(port), AGENT_HOST: '127.0.0.1', AGENT_TLS: 'off' },
    ...{ NODE_DRIVER: 'wireguard', NODE_NETNS: lab.hostNs, NODE_NAME_PREFIX: lab.prefix, DATA_DIR: dataDir },
  };
  const agent = await startAgent(env, (child) => lab.track(child));
  const serverId = 2;
  try {
    const pid = agent.child.pid ?? -1;
    const startedMb = rssMb(pid);
    const connection = new HttpNodeConnection({
      name: 'rss',
      url: `http://127.0.0.1:${port}`,
      token,
      certSha256: null,
    });
    const server = {
      serverId,
      privateKey: generateKeyPair().privateKey,
      listenPort: 51822,
      address: '10.97.0.1/16',
      mtu: 1420,
    };
    const own = peers.map((p) => ({ ...p, allowedIp: p.allowedIp.replace(/^10\.96\./, '10.97.') }));
    await connection.applyServer({ server, peers: own.map(agentPeer) });
    const appliedMb = rssMb(pid);
    const rounds = 10;
    let ack: UsageAck | null = null;
    for (let i = 0; i < rounds; i++) {
      // The agent meters once a second by itself; the panel collects the booked usage.
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const report = await connection.collectUsage(ack);
      ack = report.batches.length === 0 ? ack : { journalId: report.journalId, seq: report.batches.at(-1)?.seq ?? 0 };
    }
    const meteredMb = rssMb(pid);
    await connection.removeServer(serverId);
    return { startedMb, appliedMb, meteredMb, rounds };
  } finally {
    await agent.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function uapiReport(c: UapiComparison, wireguardGoRssMb: number, agent: AgentMemory): string {
  const med = (values: number[]): number => stats(values).median;
  const cell = (values: number[]): string => {
    const s = stats(values);
    return `${ms(s.median)} (p95 ${ms(s.p95)})`;
  };
  const ratio = (a: number[], b: number[]): number => med(a) / med(b);
  const changeRatio = ratio(c.driverUapi, c.driverWg);
  const readSpeedup = ratio(c.readWg, c.readUapiCounters);
  const met = (ok: boolean): string => (ok ? '**met**' : '**NOT met**');
  const goShare = med(c.lastByte) / med(c.readWg);
  const changeVerdict = `${met(changeRatio <= CHANGE_TARGET)} (${changeRatio.toFixed(3)})`;
  const readVerdict = `${met(readSpeedup >= READ_TARGET)} (${readSpeedup.toFixed(2)}x)`;
  return [
    `Command: \`node bench/peers.ts\` (as root; \`PEERS=${PEERS} UAPI_ROUNDS=${c.rounds}\` are the defaults), ` +
      `the run that also measures the section "${SECTION}". Machine: ${host()}, ` +
      `${firstLine('wireguard-go', ['--version'])}, load average ${loadAverage()} (1/5/15 min, at the end; the ` +
      'machine is shared: the ratios come from interleaved rounds, absolute times vary with the load), ' +
      `Node ${process.versions.node}, ${new Date().toISOString().slice(0, 10)}.`,
    '',
    `One server made by the \`wireguard\` driver, ${count(PEERS)} peers with a /32 each, no traffic; a driver ` +
      'reaching its wireguard-go through `wg` and one through its UAPI socket work on the same interface.' +
      ` ${c.rounds} rounds, each running every ` +
      'operation once through the UAPI socket and once through `wg`, which goes first alternating; medians and ' +
      'p95 of the rounds. A change swaps one peer for a new key at the same address (one removal, one addition).',
    '',
    '| operation | through UAPI | through `wg` | UAPI / `wg` |',
    '|---|---|---|---|',
    `| one peer change: \`driver.changePeers\` | ${cell(c.driverUapi)} | ${cell(c.driverWg)} | ` +
      `**${changeRatio.toFixed(3)}** |`,
    `| one peer change: the request alone (socket vs \`wg set\` run) | ${cell(c.rawUapi)} | ${cell(c.rawWg)} | ` +
      `${ratio(c.rawUapi, c.rawWg).toFixed(3)} |`,
    `| dump read for counters (\`readCounters\`'s read) vs \`wg show dump\` + parse | ${cell(c.readUapiCounters)} | ` +
      `${cell(c.readWg)} | **${(1 / readSpeedup).toFixed(3)}** (${readSpeedup.toFixed(2)}x faster) |`,
    `| full dump read with allowed ips (setPeers, drift check) vs \`wg show dump\` + parse | ${cell(c.readUapi)} | ` +
      `${cell(c.readWg)} | ${ratio(c.readUapi, c.readWg).toFixed(3)} (${ratio(c.readWg, c.readUapi).toFixed(2)}x) |`,
    `| \`driver.readCounters\` (the read, and the instance: \`ip link show\` only once the socket changed) | ` +
      `${cell(c.countersUapi)} | ${cell(c.countersWg)} | ${ratio(c.countersUapi, c.countersWg).toFixed(3)} |`,
    '',
    `Targets (issue 16): one peer change at most ${CHANGE_TARGET} of a \`wg set\` run: ${changeVerdict}; ` +
      `\`wg show dump\`-equivalent read at least ${READ_TARGET}x faster: ${readVerdict}.`,
    '',
    `wireguard-go's own part of a read, on the raw socket with no parsing: the first byte of its ` +
      `${(c.answerBytes / 1e6).toFixed(1)} MB answer after ${ms(med(c.firstByte))}, the last after ` +
      `${ms(med(c.lastByte))} (medians), that is ${(goShare * 100).toFixed(0)} % of a \`wg show dump\` read; ` +
      'no client of the socket can read faster than that, so a read can be about ' +
      `${(1 / goShare).toFixed(2)}x faster than \`wg\` here at most (medians of different reads: a run's ratio ` +
      'can land a little above it).',
    '',
    `Memory at ${count(PEERS)} peers. **Node agent** (a real \`vpn-panel node\`, wireguard driver over UAPI, ` +
      `started by the script): RSS ${agent.startedMb.toFixed(0)} MB started, ` +
      `**${agent.appliedMb.toFixed(0)} MB** once it applied a server with ${count(PEERS)} peers over its HTTP API, ` +
      `${agent.meteredMb.toFixed(0)} MB after ${agent.rounds} s of metering (a counter read of every peer each ` +
      `second) and usage collections. wireguard-go of that many peers: RSS ${wireguardGoRssMb.toFixed(0)} MB. ` +
      `This script's own process (keys of the run, two drivers, an in-process Agent and its HTTP app): RSS ` +
      `${c.agentRssMb.toFixed(0)} MB, heap used ${c.heapMb.toFixed(0)} MB.`,
  ].join('\n');
}

// Run as a script; bench/protocols.ts imports its timing without running it.
if (import.meta.main) await main();
