/**
 * AmneziaWG against WireGuard on the same node in one run (issue 24): the node's own WireGuardDriver with two
 * servers, one `wireguard` (wireguard-go here: this kernel has no WireGuard module) and one `amneziawg`
 * (amneziawg-go) with obfuscation drawn as the panel draws it, each with one real client in a namespace of its own
 * (wireguard-go set up as wg-quick would, amneziawg-go over its UAPI socket).
 *
 * 1. Throughput: iperf3 from each client through its tunnel and its server's NAT to an address of its own beyond the
 *    node's uplink, ROUNDS rounds alternating which server goes first, both directions, with the CPU of both tunnel
 *    daemons (server and client). Target: AmneziaWG at least 0.9 of WireGuard's rate.
 * 2. One peer change at PEERS peers on each server, timed as bench/peers.ts times it (timedPeerSwap), CHANGES rounds
 *    alternating which server goes first. Target: AmneziaWG no slower than wireguard-go.
 *
 * Run as root: node bench/protocols.ts   (ROUNDS, IPERF_SECONDS, PEERS, CHANGES may be set; S4 fixes the transport
 * padding, taking its room from both servers' MTU as the panel requires, to tell its cost from the rest's)
 * Writes the section "## AmneziaWG against WireGuard on one node (issue 24)" of docs/benchmarks.md.
 */
import { type ChildHandle, ExecRunner, type StartOptions } from '../src/agent/commands.ts';
import type { PeerSpec, ServerSpec } from '../src/agent/driver.ts';
import { WireGuardDriver } from '../src/agent/wireguard/driver.ts';
import { completeObfuscation, type Obfuscation, PADDED_MTU_MAX, type ServerProtocol } from '../src/domain/protocols.ts';
import { generateKeyPair } from '../src/domain/wireguard-keys.ts';
import { CHILD_LOG_DIR, NetLab, requireRoot, run, unusedPrefix } from '../test/support/netns.ts';
import { cores, DIRECTIONS, type Direction, iperf, mbit, medianOf, type Throughput } from './iperf.ts';
import { peerAddress, type Stats, stats, timedPeerSwap } from './peers.ts';
import { firstLine, host, loadAverage, percentile, writeSection } from './report.ts';

const ROUNDS = Number(process.env.ROUNDS ?? 3);
const IPERF_SECONDS = Number(process.env.IPERF_SECONDS ?? 10);
const PEERS = Number(process.env.PEERS ?? 10_000);
const CHANGES = Number(process.env.CHANGES ?? 30);
const SECTION = 'AmneziaWG against WireGuard on one node (issue 24)';
const IPERF_PORT = 5201;
const RATE_TARGET = 0.9;
const PROTOCOLS: readonly ServerProtocol[] = ['wireguard', 'amneziawg'];
const S4 = process.env.S4 === undefined ? undefined : Number(process.env.S4);

/** The servers' MTU: a fixed transport padding (S4) takes its room from it, as the panel requires. */
const MTU = PADDED_MTU_MAX - (S4 ?? 0);

/** Obfuscation as the panel draws it for a new AmneziaWG server (src/domain/protocols.ts), s4 fixed by S4. */
function panelObfuscation(): Obfuscation {
  return completeObfuscation(S4 === undefined ? {} : { s4: S4 }, MTU);
}

/** Runs commands for real; keeps the pid of each daemon the driver starts by its last argument, the interface. */
class DaemonPids extends ExecRunner {
  readonly #pids = new Map<string, number>();

  override start(cmd: string, args: readonly string[], opts?: StartOptions): ChildHandle {
    const child = super.start(cmd, args, opts);
    this.#pids.set(args.at(-1) ?? cmd, child.pid);
    return child;
  }

  of(iface: string): number {
    const pid = this.#pids.get(iface);
    if (pid === undefined) throw new Error(`the driver started no daemon for ${iface}`);
    return pid;
  }
}

interface Side {
  protocol: ServerProtocol;
  server: ServerSpec;
  /** The server's peers; the first is the real client. */
  peers: PeerSpec[];
  netns: string;
  /** The address beyond the uplink its client's iperf3 reaches. */
  target: string;
  /** Server's daemon, then the client's. */
  pids: number[];
  runs: Map<Direction, Throughput[]>;
  changeMs: number[];
}

async function main(): Promise<void> {
  const notRunnable = requireRoot([
    ['amneziawg-go', 'bash scripts/go-tools.sh'],
    ['iperf3', 'iperf3'],
  ]);
  if (notRunnable !== false) {
    console.error(`bench/protocols.ts ${notRunnable}`);
    process.exitCode = 1;
    return;
  }
  if (!Number.isInteger(PEERS) || PEERS < 2 || PEERS > 65_000) throw new Error('PEERS must be 2-65000');
  const loadAtStart = loadAverage();
  console.log(`generating ${2 * (PEERS + CHANGES)} keys…`);
  const spare = Array.from({ length: 2 * CHANGES }, () => generateKeyPair().publicKey);
  const obfuscation = panelObfuscation();
  const runner = new DaemonPids(CHILD_LOG_DIR);
  // `pb` and two more characters: this bench's names, apart from every other helper's.
  const lab = await NetLab.create(`pb${(await unusedPrefix('p')).slice(2)}`);
  const driver = new WireGuardDriver({ runner, namePrefix: lab.prefix, hostNetns: lab.hostNs, amneziawg: true });
  const sides: Side[] = PROTOCOLS.map((protocol, i) => {
    const net = `10.${96 + i}`;
    return {
      protocol,
      server: {
        serverId: i + 1,
        privateKey: generateKeyPair().privateKey,
        listenPort: 51820 + i,
        address: `${net}.0.1/16`,
        mtu: MTU,
        ...(protocol === 'amneziawg' ? { protocol, obfuscation } : {}),
      },
      peers: Array.from({ length: PEERS }, (_, n) => ({
        publicKey: generateKeyPair().publicKey,
        allowedIp: peerAddress(n, net),
        speedLimitKbps: 0,
      })),
      netns: '',
      target: `198.51.100.${10 + i}`,
      pids: [],
      runs: new Map(),
      changeMs: [],
    };
  });
  try {
    await lab.addInternet();
    for (const side of sides) await connect(lab, driver, side, obfuscation);
    for (const side of sides) side.pids.unshift(runner.of(lab.serverNames(side.server.serverId).iface));
    const loadBeforeRuns = loadAverage();
    for (let round = 0; round < ROUNDS; round++) {
      for (const side of round % 2 === 0 ? sides : [...sides].reverse()) {
        for (const d of DIRECTIONS) {
          const result = await iperf(side.netns, side.target, IPERF_PORT, d, IPERF_SECONDS, side.pids);
          side.runs.set(d, [...(side.runs.get(d) ?? []), result]);
          console.log(`round ${round + 1} ${side.protocol} ${d}: ${mbit(result.mbps)} Mbit/s`);
        }
      }
    }

    const applyMs: number[] = [];
    for (const side of sides) {
      const start = performance.now();
      await driver.setPeers(side.server.serverId, side.peers);
      applyMs.push(performance.now() - start);
      const onInterface = (await driver.readCounters(side.server.serverId)).peers.length;
      if (onInterface !== PEERS) throw new Error(`${side.protocol}: ${onInterface} peers, not ${PEERS}`);
    }
    for (let round = 0; round < CHANGES; round++) {
      for (const side of round % 2 === 0 ? sides : [...sides].reverse()) {
        const id = side.server.serverId;
        side.changeMs.push(
          await timedPeerSwap(side.peers, spare, round, (_list, removed, added) =>
            driver.changePeers(id, [added], [removed]),
          ),
        );
      }
    }
    const body = report(sides, { obfuscation, loadAtStart, loadBeforeRuns, applyMs });
    writeSection(SECTION, body);
    console.log(`\n## ${SECTION}\n\n${body}\n`);
  } finally {
    for (const side of sides)
      await driver.down(side.server.serverId).catch((error: unknown) => console.error(`down: ${String(error)}`));
    await driver.close();
    const problems = await lab.cleanup();
    if (problems.length > 0) console.error(`cleanup: ${problems.join('; ')}`);
  }
}

/**
 * Brings `side`'s server up with its client as its only peer, the client in a namespace of its own routing its
 * iperf3 target through the tunnel, and an iperf3 server on that target beyond the uplink.
 */
async function connect(lab: NetLab, driver: WireGuardDriver, side: Side, obfuscation: Obfuscation): Promise<void> {
  const client = generateKeyPair();
  const first = side.peers[0];
  if (first === undefined) throw new Error('no peers');
  const clientPeer = { ...first, publicKey: client.publicKey };
  side.peers[0] = clientPeer;
  const { publicKey } = await driver.up(side.server);
  await driver.setPeers(side.server.serverId, [clientPeer]);
  side.netns = await lab.addClientNamespace();
  const wg = await lab.connectClient({
    serverPublicKey: publicKey,
    endpoint: lab.hostIp,
    port: side.server.listenPort,
    privateKey: client.privateKey,
    address: first.allowedIp.replace('/32', '/16'),
    allowedIps: [side.server.address.replace(/\.1\/16$/, '.0/16'), `${side.target}/32`],
    netns: side.netns,
    ...(side.protocol === 'amneziawg' ? { obfuscation } : {}),
  });
  await run('ip', ['-n', side.netns, 'route', 'add', `${side.target}/32`, 'dev', wg.iface]);
  await lab.startIperfServer(side.target, IPERF_PORT);
  if (!(await lab.waitForPingFrom(side.netns, side.target)))
    throw new Error(`${side.protocol} client does not reach ${side.target}`);
  side.pids.push(wg.pid);
}

interface Context {
  obfuscation: Obfuscation;
  loadAtStart: string;
  loadBeforeRuns: string;
  /** setPeers of PEERS new peers on each server, in `sides` order. */
  applyMs: number[];
}

const ms = (value: number): string => `${value.toFixed(1)} ms`;
const ratio = (value: number): string => value.toFixed(2);
const met = (ok: boolean): string => (ok ? '**met**' : '**NOT met**');

function report(sides: readonly Side[], c: Context): string {
  const [wg, awg] = sides;
  if (wg === undefined || awg === undefined) throw new Error('two sides expected');
  const name = (s: Side): string =>
    s.protocol === 'amneziawg'
      ? `AmneziaWG (${firstLine('amneziawg-go', ['--version'])})`
      : `WireGuard (${firstLine('wireguard-go', ['--version'])})`;
  const rates = (s: Side, d: Direction): number[] => (s.runs.get(d) ?? []).map((r) => r.mbps);
  /** Mbit/s for each core both tunnel daemons used, per run. */
  const perCore = (s: Side, d: Direction): number[] =>
    (s.runs.get(d) ?? []).map((r) => r.mbps / r.watched.reduce((a, b) => a + b, 0));
  const daemonCores = (s: Side, d: Direction, i: number): number =>
    medianOf((s.runs.get(d) ?? []).map((r) => r.watched[i] ?? 0));
  const rateRows = sides.flatMap((s) =>
    DIRECTIONS.map(
      (d) =>
        `| ${name(s)} | ${d} | **${mbit(medianOf(rates(s, d)))}**; ${rates(s, d).map(mbit).join(', ')} | ` +
        `${cores(daemonCores(s, d, 0))} | ${cores(daemonCores(s, d, 1))} | ${mbit(medianOf(perCore(s, d)))} | ` +
        `${cores(medianOf((s.runs.get(d) ?? []).map((r) => r.machineCores)))} |`,
    ),
  );
  const roundRatios = (of: (s: Side, d: Direction) => number[], d: Direction): number[] => {
    const [a, b] = [of(awg, d), of(wg, d)];
    return a.map((v, i) => v / (b[i] ?? Number.NaN));
  };
  const rateVerdicts: boolean[] = [];
  const ratioRows = DIRECTIONS.flatMap((d) => {
    const each = roundRatios(rates, d);
    const median = medianOf(rates(awg, d)) / medianOf(rates(wg, d));
    rateVerdicts.push(median >= RATE_TARGET);
    const cpu = roundRatios(perCore, d);
    return [
      `| Mbit/s | ${d} | ${each.map(ratio).join(', ')} | **${ratio(median)}** | ≥ ${RATE_TARGET}: ` +
        `${met(median >= RATE_TARGET)} |`,
      `| Mbit/s per daemon core | ${d} | ${cpu.map(ratio).join(', ')} | **${ratio(medianOf(cpu))}** | – |`,
    ];
  });
  const change = (s: Side): Stats => stats(s.changeMs);
  const pairs = awg.changeMs.map((v, i) => v / (wg.changeMs[i] ?? Number.NaN));
  const changeRatio = change(awg).median / change(wg).median;
  const [lowPair, highPair] = [percentile(pairs, 10), percentile(pairs, 90)];
  // No slower within noise: the ratio of medians at most 1, or the spread of the round-by-round ratios reaching 1.
  const changeOk = changeRatio <= 1 || lowPair <= 1;
  const changeRow = (s: Side, i: number): string => {
    const st = change(s);
    return (
      `| ${name(s)} | ${ms(c.applyMs[i] ?? Number.NaN)} | **${ms(st.median)}** | ${ms(st.p95)} | ` +
      `${ms(st.min)}-${ms(st.max)} |`
    );
  };
  const o = c.obfuscation;
  const fixed = S4 === undefined ? '' : ` but s4 fixed at ${S4} (S4)`;
  return [
    `Command: \`node bench/protocols.ts\` (as root; \`ROUNDS=${ROUNDS} IPERF_SECONDS=${IPERF_SECONDS} ` +
      `PEERS=${PEERS} CHANGES=${CHANGES}\`). Machine: ${host()}, ${firstLine('iperf3', ['--version'])}, ` +
      `Node ${process.versions.node}, ${new Date().toISOString().slice(0, 10)}.`,
    '',
    `\`cat /proc/loadavg\` (1/5/15 min) at the start: ${c.loadAtStart}; before the first iperf3 run: ` +
      `${c.loadBeforeRuns}; at the end: ${loadAverage()}. **The 2 cores are shared with other sessions' work**, ` +
      'and both servers, both clients and iperf3 run on them too: compare the ratios, taken within each round.',
    '',
    "The node's own `WireGuardDriver` (src/agent/wireguard/driver.ts) with two servers in namespaces this script " +
      'makes: a `wireguard` one on wireguard-go (this kernel has no WireGuard module) and an `amneziawg` one on ' +
      `amneziawg-go, with obfuscation drawn as the panel draws it${fixed}: ` +
      `\`jc=${o.jc} jmin=${o.jmin} jmax=${o.jmax} ` +
      `s1=${o.s1} s2=${o.s2} s3=${o.s3} s4=${o.s4} h1=${o.h1} h2=${o.h2} h3=${o.h3} h4=${o.h4}\`. Each has one ` +
      'real client in a namespace of its own (wireguard-go configured as wg-quick would, amneziawg-go over its ' +
      'UAPI socket with the same obfuscation); MTU 1420 on both.',
    '',
    `**Throughput**: iperf3 TCP, one stream, ${IPERF_SECONDS} s a run, from each client through its tunnel and ` +
      "its server's NAT to an address of its own beyond the node's uplink; " +
      `${ROUNDS} rounds, each running both servers both ways, which server goes first alternating. Cores: the ` +
      "tunnel daemon's utime + stime from /proc over the run (1.00 = one core busy); machine: all busy CPU " +
      '(other sessions included).',
    '',
    '| server | direction | Mbit/s (median; each round) | server daemon cores | client daemon cores | ' +
      'Mbit/s per daemon core (both ends) | machine busy cores |',
    '|---|---|---|---|---|---|---|',
    ...rateRows,
    '',
    '| AmneziaWG / WireGuard | direction | each round | median | target |',
    '|---|---|---|---|---|',
    ...ratioRows,
    '',
    `**One peer change at ${PEERS.toLocaleString('en')} peers** on each server (after the throughput rounds; ` +
      'the driver reaches both daemons over their UAPI sockets, as the node does), timed as `bench/peers.ts` ' +
      'times `driver.changePeers`: one peer swapped for a new key at the same address. ' +
      `${CHANGES} changes on each, which server goes first alternating:`,
    '',
    `| server | \`setPeers\` of ${PEERS.toLocaleString('en')} new peers | one change: median | p95 | min-max |`,
    '|---|---|---|---|---|',
    changeRow(wg, 0),
    changeRow(awg, 1),
    '',
    `AmneziaWG / WireGuard, one change: ratio of the medians **${ratio(changeRatio)}**; round by round ` +
      `median ${ratio(percentile(pairs, 50))}, 10th-90th percentile ${ratio(lowPair)}-${ratio(highPair)} ` +
      '(the noise of one pair of changes on the shared cores).',
    '',
    `Targets (issue 24): AmneziaWG at least ${RATE_TARGET} of WireGuard's rate: ` +
      `${met(rateVerdicts.every(Boolean))} (${DIRECTIONS.join(' and ')}, medians); one peer change at ` +
      `${PEERS.toLocaleString('en')} peers no slower than on wireguard-go (ratio of medians at most 1, or within ` +
      `the round-by-round spread): ${met(changeOk)}.`,
  ].join('\n');
}

await main();
