/**
 * Speed limits on one server with the wireguard driver (wireguard-go), in namespaces this script makes:
 * the tc and nft set-up for LIMITED limited devices (default 5,000), one limit changed, added and
 * removed among them (median and p95 of CHANGES rounds each), a resync with nothing to change and one
 * after the server's wireguard-go died (its interface's classes gone), the removal of every limit, and
 * the throughput of one real client (wireguard-go in its own namespace, iperf3 to the host namespace
 * through the server's NAT) with and without a limit while the others are limited, against a client of
 * a second server that has no shaping at all: the classifier's cost. The cases alternate over ROUNDS
 * rounds, since the 2 cores are shared and one run of iperf3 varies by ±20 % under load.
 *
 * Run as root: node bench/speed-limits.ts   (LIMITED, CHANGES, IPERF_SECONDS and ROUNDS may be set)
 * Writes the section "## Speed limits on one server (wireguard-go)" of docs/benchmarks.md.
 */
import {
  type ChildHandle,
  type CommandRunner,
  ExecRunner,
  type RunOptions,
  type RunResult,
  type StartOptions,
} from '../src/agent/commands.ts';
import type { PeerSpec, ServerSpec } from '../src/agent/driver.ts';
import { WireGuardDriver } from '../src/agent/wireguard/driver.ts';
import { generateKeyPair, publicKeyOf } from '../src/domain/wireguard-keys.ts';
import { CHILD_LOG_DIR, NetLab, requireRoot, run, waitFor } from '../test/support/netns.ts';
import { firstLine, host, loadAverage, percentile, writeSection } from './report.ts';

const LIMITED = Number(process.env.LIMITED ?? 5000);
const CHANGES = Number(process.env.CHANGES ?? 20);
const IPERF_SECONDS = Number(process.env.IPERF_SECONDS ?? 4);
/** Rounds of the throughput comparison; each measures every case once, in a rotated order, and the median is reported. */
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const SECTION = 'Speed limits on one server (wireguard-go)';
/** TEST-NET-2 addresses on the host namespace's loopback, reached from the client only through a tunnel: one behind the limited server, one behind the reference server. */
const INTERNET_IP = '198.51.100.1';
const REFERENCE_IP = '198.51.100.2';
const IPERF_PORT = 5201;
/** The client's limit while only the classifier's cost should show: far above what the tunnel carries here. */
const HIGH_KBPS = 5_000_000;
const ACCURACY_KBPS = 20_000;

/** Runs commands for real; while `counting`, adds up the time spent in each tool and how often it ran. */
class ToolTimer implements CommandRunner {
  readonly #inner = new ExecRunner(CHILD_LOG_DIR);
  counting = false;
  readonly ms = new Map<string, number>();
  readonly runs = new Map<string, number>();

  async run(cmd: string, args: readonly string[], opts?: RunOptions): Promise<RunResult> {
    const counted = this.counting;
    const start = performance.now();
    try {
      return await this.#inner.run(cmd, args, opts);
    } finally {
      if (counted) {
        this.ms.set(cmd, (this.ms.get(cmd) ?? 0) + performance.now() - start);
        this.runs.set(cmd, (this.runs.get(cmd) ?? 0) + 1);
      }
    }
  }

  start(cmd: string, args: readonly string[], opts?: StartOptions): ChildHandle {
    return this.#inner.start(cmd, args, opts);
  }

  /** Times `work`, with the split by tool: `wg 12 ms (3×), tc …`. */
  async time(work: () => Promise<unknown>): Promise<{ ms: number; split: string }> {
    this.ms.clear();
    this.runs.clear();
    this.counting = true;
    const start = performance.now();
    try {
      await work();
    } finally {
      this.counting = false;
    }
    const ms = performance.now() - start;
    // Reads run in parallel, so the parts may add up to more than the whole.
    const split = [...this.ms]
      .map(([tool, spent]) => `${tool} ${spent.toFixed(0)} ms (${this.runs.get(tool) ?? 0}×)`)
      .join(', ');
    return { ms, split };
  }
}

const ms = (value: number): string => `${value.toFixed(1)} ms`;
const count = (n: number): string => n.toLocaleString('en');

/** The n-th peer address of 10.97.0.0/16, skipping .0.0 and the server's .0.1. */
function address(n: number): string {
  const host = n + 2;
  return `10.97.${Math.floor(host / 256)}.${host % 256}`;
}

async function main(): Promise<void> {
  const notRunnable = requireRoot([
    ['iperf3', 'iperf3'],
    ['tc', 'iproute2'],
  ]);
  if (notRunnable !== false) {
    console.error(`bench/speed-limits.ts ${notRunnable}`);
    process.exitCode = 1;
    return;
  }
  if (!Number.isInteger(LIMITED) || LIMITED < 2 || LIMITED > 60_000) throw new Error('LIMITED must be 2-60000');
  if (!Number.isInteger(CHANGES) || CHANGES < 1) throw new Error('CHANGES must be 1 or more');
  if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error('ROUNDS must be 1 or more');

  console.log(`generating ${count(LIMITED)} key pairs…`);
  const client = generateKeyPair();
  const others = Array.from({ length: LIMITED - 1 }, () => generateKeyPair().publicKey);
  /** Limits of 1-50 Mbit/s, so no two neighbours share one; the client (peer 0) is set per measurement. */
  const peers: PeerSpec[] = [client.publicKey, ...others].map((publicKey, i) => ({
    publicKey,
    allowedIp: `${address(i)}/32`,
    speedLimitKbps: 1000 * ((i % 50) + 1),
  }));
  const clientPeer = (kbps: number): PeerSpec => ({
    publicKey: client.publicKey,
    allowedIp: `${address(0)}/32`,
    speedLimitKbps: kbps,
  });
  const withClient = (kbps: number): PeerSpec[] => [clientPeer(kbps), ...peers.slice(1)];

  const loadAtStart = loadAverage();
  const lab = await NetLab.create();
  const timer = new ToolTimer();
  const driver = new WireGuardDriver({
    runner: timer,
    namePrefix: lab.prefix,
    hostNetns: lab.hostNs,
    implementation: 'wireguard-go',
  });
  const serverId = 1;
  const server: ServerSpec = {
    serverId,
    privateKey: generateKeyPair().privateKey,
    listenPort: 51820,
    address: '10.97.0.1/16',
    mtu: 1420,
  };
  const referenceServer: ServerSpec = {
    serverId: 2,
    privateKey: generateKeyPair().privateKey,
    listenPort: 51821,
    address: '10.98.0.1/24',
    mtu: 1420,
  };
  const referenceClient = generateKeyPair();
  const n = driver.names(serverId);
  const rows: string[] = [];
  const row = (what: string, value: string): void => {
    rows.push(`| ${what} | ${value} |`);
    console.log(`${what}: ${value}`);
  };
  const classCount = async (dev: string): Promise<number> =>
    (await run('tc', ['-n', n.netns, 'class', 'show', 'dev', dev])).split('\n').filter((l) => l.startsWith('class htb'))
      .length;

  try {
    await driver.up(server);
    await driver.up(referenceServer);
    await driver.setPeers(referenceServer.serverId, [
      { publicKey: referenceClient.publicKey, allowedIp: '10.98.0.2/32', speedLimitKbps: 0 },
    ]);
    const tunnels = [
      [server, client.privateKey, `${address(0)}/16`, '10.97.0.0/16', INTERNET_IP],
      [referenceServer, referenceClient.privateKey, '10.98.0.2/24', '10.98.0.0/24', REFERENCE_IP],
    ] as const;
    const clients = [];
    for (const [spec, privateKey, clientAddress, subnet, target] of tunnels) {
      const wg = await lab.connectClient({
        serverPublicKey: publicKeyOf(spec.privateKey),
        endpoint: lab.hostIp,
        port: spec.listenPort,
        privateKey,
        address: clientAddress,
        allowedIps: [subnet, `${target}/32`],
      });
      await run('ip', ['-n', lab.clientNs, 'route', 'add', `${target}/32`, 'dev', wg.iface]);
      await lab.startIperfServer(target, IPERF_PORT);
      clients.push(wg);
    }
    await driver.setPeers(serverId, [clientPeer(0)]);
    for (const target of [INTERNET_IP, REFERENCE_IP])
      if (!(await lab.waitForPing(target))) throw new Error(`the client does not reach ${target} through its tunnel`);
    /** Up and down Mbit/s to `target`. */
    const throughput = async (label: string, target: string): Promise<[number, number]> => {
      const up = await lab.iperf(target, IPERF_PORT, 'upload', IPERF_SECONDS);
      const down = await lab.iperf(target, IPERF_PORT, 'download', IPERF_SECONDS);
      console.log(`${label}: up ${up.toFixed(1)} / down ${down.toFixed(1)} Mbit/s`);
      return [up, down];
    };
    /** `up / down`, each with how far it is from `base` (in %) when given. */
    const figures = ([up, down]: [number, number], base?: [number, number]): string => {
      const off = (value: number, of: number | undefined): string =>
        of === undefined ? '' : ` (${value >= of ? '+' : '−'}${Math.abs((100 * (value - of)) / of).toFixed(0)} %)`;
      return `${up.toFixed(1)}${off(up, base?.[0])} / ${down.toFixed(1)}${off(down, base?.[1])}`;
    };

    const setup = await timer.time(() => driver.setPeers(serverId, withClient(HIGH_KBPS)));
    const [wgClasses, vethClasses] = [await classCount(n.iface), await classCount(n.vethServer)];
    if (wgClasses !== LIMITED || vethClasses !== LIMITED)
      throw new Error(`expected ${LIMITED} classes on each device, found ${wgClasses} and ${vethClasses}`);
    row(
      `\`setPeers\`: ${count(LIMITED)} new limited peers (peers, ${count(2 * LIMITED)} classes and queues, ${count(LIMITED)} map entries)`,
      `${ms(setup.ms)} (${setup.split})`,
    );
    const noop = await timer.time(() => driver.setPeers(serverId, withClient(HIGH_KBPS)));
    row(
      `\`setPeers\`: the same again (reads \`wg show dump\`, the classes of both devices and the map; writes nothing)`,
      `${ms(noop.ms)} (${noop.split})`,
    );

    /** A throughput case: how to measure it once, and its samples. */
    const measured = (
      work: () => Promise<[number, number]>,
    ): { run: () => Promise<[number, number]>; samples: [number, number][] } => ({ run: work, samples: [] });
    const referenceCase = measured(() => throughput('reference', REFERENCE_IP));
    const highCase = measured(async () => {
      await driver.changePeers(serverId, [clientPeer(HIGH_KBPS)], []);
      return throughput(`limited to ${HIGH_KBPS} kbit/s among the limited`, INTERNET_IP);
    });
    const unlimitedCase = measured(async () => {
      await driver.changePeers(serverId, [clientPeer(0)], []);
      return throughput('unlimited among the limited', INTERNET_IP);
    });
    const cases = [referenceCase, highCase, unlimitedCase];
    for (let round = 0; round < ROUNDS; round++) {
      // Rotated, so no case always runs first or last in a round.
      const order = [...cases.slice(round % cases.length), ...cases.slice(0, round % cases.length)];
      for (const c of order) c.samples.push(await c.run());
    }
    const median = (c: { samples: [number, number][] }): [number, number] => [
      percentile(
        c.samples.map((x) => x[0]),
        50,
      ),
      percentile(
        c.samples.map((x) => x[1]),
        50,
      ),
    ];
    const [reference, limitedHigh, unlimitedAmong] = [median(referenceCase), median(highCase), median(unlimitedCase)];
    // How much single runs of one case differ here: the noise the medians' differences are to be read against.
    const spreadPercent = Math.max(
      ...cases.flatMap((c) =>
        [0, 1].map((d) => {
          const values = c.samples.map((x) => x[d] ?? 0);
          return (100 * (Math.max(...values) - Math.min(...values))) / percentile(values, 50);
        }),
      ),
    );
    await driver.changePeers(serverId, [clientPeer(ACCURACY_KBPS)], []);
    const accurate = await throughput(`client limited to ${ACCURACY_KBPS} kbit/s`, INTERNET_IP);

    /** CHANGES rounds of one changePeers on a different peer each time; `make` gives the upsert for peer `i`. */
    const rounds = async (label: string, make: (i: number) => PeerSpec): Promise<void> => {
      const samples: number[] = [];
      let split = '';
      for (let round = 0; round < CHANGES; round++) {
        const i = 1 + ((round * 997) % (LIMITED - 1));
        const peer = make(i);
        const result = await timer.time(() => driver.changePeers(serverId, [peer], []));
        peers[i] = peer;
        samples.push(result.ms);
        if (round === 0) split = result.split;
      }
      const figures = `median ${ms(percentile(samples, 50))}, p95 ${ms(percentile(samples, 95))} (one: ${split})`;
      row(`${label}, \`changePeers\`, ${CHANGES} rounds`, figures);
    };
    const peerAt = (i: number, kbps: number): PeerSpec => ({
      publicKey: peers[i]?.publicKey ?? '',
      allowedIp: `${address(i)}/32`,
      speedLimitKbps: kbps,
    });
    await rounds(`One limit changed among ${count(LIMITED)}`, (i) => peerAt(i, 77_000));
    await rounds(`One limit removed (to 0) among ${count(LIMITED)}`, (i) => peerAt(i, 0));
    await rounds(`One limit added (from 0) among ${count(LIMITED)}`, (i) => peerAt(i, 3000));
    const removedKey = peers[LIMITED - 1]?.publicKey ?? '';
    const removal = await timer.time(() => driver.changePeers(serverId, [], [removedKey]));
    peers.splice(LIMITED - 1, 1);
    row(`A limited device removed (peer, classes and entry), \`changePeers\``, `${ms(removal.ms)} (${removal.split})`);

    // As after a host or wireguard-go restart: the interface, and with it the download classes, are gone.
    const pids = [...lab.wireguardGoProcesses()].filter(([, name]) => name === n.iface).map(([pid]) => pid);
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    await waitFor(
      'the interface to go',
      async () => ((await run('ip', ['-n', n.netns, 'link', 'show'])).includes(`${n.iface}:`) ? undefined : true),
      5000,
      50,
    );
    const resync = await timer.time(async () => {
      await driver.up(server);
      await driver.setPeers(serverId, withClient(ACCURACY_KBPS));
    });
    if ((await classCount(n.iface)) !== peers.length) throw new Error('the download classes did not come back');
    row(
      `Resync after wireguard-go died: \`up()\` + \`setPeers\` put back ${count(peers.length)} peers and their download classes`,
      `${ms(resync.ms)} (${resync.split})`,
    );

    const teardown = await timer.time(() =>
      driver.setPeers(
        serverId,
        peers.map((p) => ({ ...p, speedLimitKbps: 0 })),
      ),
    );
    row(
      `\`setPeers\` with every limit 0 (the two roots and the table deleted whole)`,
      `${ms(teardown.ms)} (${teardown.split})`,
    );
    for (const wg of clients) await wg.close();

    const body = [
      `Command: \`node bench/speed-limits.ts\` (as root; \`LIMITED=${LIMITED} CHANGES=${CHANGES} IPERF_SECONDS=${IPERF_SECONDS}\`). Machine: ${host()}, ${firstLine('wireguard-go', ['--version'])}, ${/iproute2-[\d.]*\d/.exec(firstLine('tc', ['-V']))?.[0] ?? 'tc'}, ${firstLine('nft', ['--version'])}, Node ${process.versions.node}, ${new Date().toISOString().slice(0, 10)}.`,
      '',
      `Load average (1/5/15 min) at the start: ${loadAtStart}; at the end: ${loadAverage()} (the machine is shared).`,
      '',
      `One server made by the \`wireguard\` driver (wireguard-go) in a /16, ${count(LIMITED)} peers each with its own limit (1-50 Mbit/s): an HTB class and a bfifo queue per peer on the WireGuard interface (download) and on the uplink veth (upload), and an nft map address → class id that sets \`meta priority\` (docs/dataplane.md). Times of the driver call, split by the tool that ran (reads run in parallel).`,
      '',
      '| operation | time |',
      '|---|---|',
      ...rows,
      '',
      `Throughput of one real client (wireguard-go in its own namespace) through the tunnel and the server's NAT to iperf3 in the host namespace, TCP, ${IPERF_SECONDS} s each way, Mbit/s up / down as the receiver counted them; client, server, wireguard-go twice and iperf3 share the 2 cores. The reference is a client of a second server on the same host with no shaping state at all; the first three cases alternate over ${ROUNDS} rounds (medians):`,
      '',
      '| the client | up / down Mbit/s |',
      '|---|---|',
      `| reference: a second server without any shaping state | ${figures(reference)} |`,
      `| limited to ${count(HIGH_KBPS)} kbit/s, above what the tunnel carries, with ${count(LIMITED - 1)} others limited: the classifier's and HTB's cost (against the reference) | ${figures(limitedHigh, reference)} |`,
      `| unlimited (no map entry: HTB's direct queue) with ${count(LIMITED - 1)} others limited (against the reference) | ${figures(unlimitedAmong, reference)} |`,
      `| limited to ${count(ACCURACY_KBPS)} kbit/s with ${count(LIMITED - 1)} others limited (against the limit; the receiver counts TCP payload, the limit whole IP packets) | ${figures(accurate, [ACCURACY_KBPS / 1000, ACCURACY_KBPS / 1000])} |`,
      '',
      `Runs of one and the same case spread by up to ${spreadPercent.toFixed(0)} % (max − min over the median) on this shared machine: differences of the medians within that are noise, not the classifier.`,
    ].join('\n');
    writeSection(SECTION, body);
    console.log('wrote the section to docs/benchmarks.md');
  } finally {
    for (const id of [serverId, referenceServer.serverId])
      await driver.down(id).catch((error: unknown) => console.error(`down: ${String(error)}`));
    await driver.close();
    const problems = await lab.cleanup();
    if (problems.length > 0) console.error(`cleanup: ${problems.join('; ')}`);
  }
}

await main();
