/**
 * One tunnel's throughput against the same path without a tunnel (issue 29 item 1), on one machine: a "server"
 * and a "client" namespace joined by a veth (NetLab), and in them one tunnel of each kind, all up at once on
 * their own addresses and ports: Debian's wireguard-go, the current wireguard-go, amneziawg-go with typical
 * obfuscation, the kernel module (when the kernel has it), and the veth routed with no tunnel. ROUNDS rounds,
 * each measuring every kind once in a rotated order (iperf3 TCP, IPERF_SECONDS each way), with each side's CPU:
 * the tunnel daemon's utime + stime from /proc, iperf3's own, and the machine's busy CPU (shared, for context).
 * Ratios are taken within a round, then their median: the 2 cores are shared with other work.
 *
 * Run as root: node bench/dataplane.ts   (ROUNDS, IPERF_SECONDS may be set)
 * Writes the section "## Data plane at line rate (issue 29 item 1)" of docs/benchmarks.md.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { basename, join } from 'node:path';
import { generateKeyPair } from '../src/domain/wireguard-keys.ts';
import { belongsTo, NetLab, requireRoot, run, waitFor } from '../test/support/netns.ts';
import {
  AWG_SOCKET_DIR,
  cores,
  DIRECTIONS,
  type Direction,
  dpPrefix,
  iperf,
  mbit,
  medianOf,
  startIperfServerIn,
  type Throughput,
} from './iperf.ts';
import { firstLine, host, loadAverage, writeSection } from './report.ts';

const ROUNDS = Number(process.env.ROUNDS ?? 3);
const IPERF_SECONDS = Number(process.env.IPERF_SECONDS ?? 10);
const SECTION = 'Data plane at line rate (issue 29 item 1)';
const IPERF_PORT = 5201;
const MTU = 1420;
const DEBIAN_WG = '/usr/bin/wireguard-go';
const CURRENT_WG = '/usr/local/bin/wireguard-go';
const AMNEZIAWG = '/usr/local/bin/amneziawg-go';
/**
 * AmneziaWG 1.x-style obfuscation as its apps generate it: 4 junk packets of 40-70 bytes before each handshake,
 * padded handshake messages, four non-standard headers; no padding of transport messages (s4 = 0) nor cookie
 * replies, so the data path carries WireGuard's own packet sizes.
 */
const OBFUSCATION = [
  'jc=4',
  'jmin=40',
  'jmax=70',
  's1=52',
  's2=150',
  's3=0',
  's4=0',
  'h1=1018912397',
  'h2=1936452109',
  'h3=723519874',
  'h4=301228467',
];
/** ethtool -k features that show whether segmentation and receive offloads are on. */
const OFFLOAD_FEATURES = [
  'tx-checksumming',
  'tx-tcp-segmentation',
  'tx-udp-segmentation',
  'generic-segmentation-offload',
  'generic-receive-offload',
  'rx-udp-gro-forwarding',
];

type Kind = 'debian' | 'current' | 'amneziawg' | 'kernel' | 'none';

interface Tunnel {
  kind: Kind;
  label: string;
  /** Where the client sends to: the server's tunnel address, or its veth address with no tunnel. */
  target: string;
  serverIface?: string;
  clientIface?: string;
  /** The userspace daemons, server's then client's. */
  pids: number[];
  /** Why this kind is not measured, when it is not. */
  unavailable?: string;
  /** Log lines of its daemons that speak of offloads (GSO, GRO). */
  offloadLog: string[];
  samples: Map<Direction, Throughput[]>;
}

/** The build scripts/go-tools.sh installed behind `link`: its file name carries the module version. */
const built = (link: string): string => basename(realpathSync(link));

const hexKey = (base64: string): string => Buffer.from(base64, 'base64').toString('hex');

/** One UAPI `set` on `socket` (wireguard-go's and amneziawg-go's protocol alike); throws unless errno=0. */
function uapiSet(socket: string, lines: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const conn = createConnection(socket);
    let answer = '';
    conn.setEncoding('utf8');
    conn.once('connect', () => conn.write(`set=1\n${lines.join('\n')}\n\n`));
    conn.on('data', (chunk: string) => {
      answer += chunk;
      if (!answer.endsWith('\n\n')) return;
      conn.destroy();
      if (answer.includes('errno=0\n')) resolve();
      else reject(new Error(`${socket} refused the set: ${answer.trim()}`));
    });
    conn.once('error', reject);
  });
}

/** Starts `binary -f iface` in `netns` (tracked by the lab) and waits for its UAPI socket under `socketDir`. */
async function startDaemon(
  lab: NetLab,
  tunnel: Tunnel,
  binary: string,
  netns: string,
  iface: string,
  socketDir: string,
): Promise<string> {
  const env = { ...process.env, LOG_LEVEL: 'verbose', WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD: '1' };
  const child = spawn('ip', ['netns', 'exec', netns, binary, '-f', iface], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  lab.track(child);
  let tail = '';
  for (const stream of [child.stdout, child.stderr]) {
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      tail = (tail + chunk).slice(-4096);
      for (const line of chunk.split('\n')) if (/gso|gro|offload/i.test(line)) tunnel.offloadLog.push(line.trim());
    });
  }
  const socket = join(socketDir, `${iface}.sock`);
  await waitFor(
    `${binary} ${iface} to open ${socket}`,
    async () => {
      if (child.exitCode !== null) throw new Error(`${binary} ${iface} exited: ${tail}`);
      return existsSync(socket) ? true : undefined;
    },
    5000,
    20,
  );
  tunnel.pids.push(child.pid ?? -1);
  return socket;
}

async function addressUp(netns: string, iface: string, cidr: string): Promise<void> {
  await run('ip', ['-n', netns, 'addr', 'add', cidr, 'dev', iface]);
  await run('ip', ['-n', netns, 'link', 'set', iface, 'mtu', String(MTU), 'up']);
}

/** Tunnel number `n` of `kind` between the lab's host (server) and client namespaces: 10.77.n.1 ↔ 10.77.n.2. */
async function buildTunnel(lab: NetLab, kind: Kind, n: number, label: string): Promise<Tunnel> {
  const net = `10.77.${n}`;
  const tunnel: Tunnel = { kind, label, target: `${net}.1`, pids: [], offloadLog: [], samples: new Map() };
  if (kind === 'none') return { ...tunnel, target: lab.hostIp };
  const [server, client] = [generateKeyPair(), generateKeyPair()];
  const port = 51900 + n;
  tunnel.serverIface = `${lab.prefix}-${kind[0]}s`;
  tunnel.clientIface = `${lab.prefix}-${kind[0]}c`;
  const ends = [
    [lab.hostNs, tunnel.serverIface, server, client, [`listen_port=${port}`], `${net}.2/32`, `${net}.1/24`],
    [lab.clientNs, tunnel.clientIface, client, server, [], `${net}.1/32`, `${net}.2/24`],
  ] as const;
  if (kind === 'kernel') {
    const made = await run('ip', ['-n', lab.hostNs, 'link', 'add', tunnel.serverIface, 'type', 'wireguard']).then(
      () => true,
      (e: unknown) => {
        const why = String(e).split(': ').at(-1)?.replace(/\.$/, '');
        tunnel.unavailable = `this kernel has no WireGuard (\`ip link add … type wireguard\`: ${why})`;
        return false;
      },
    );
    if (!made) return tunnel;
    await run('ip', ['-n', lab.clientNs, 'link', 'add', tunnel.clientIface, 'type', 'wireguard']);
    for (const [ns, iface, own, other, , allowed, cidr] of ends) {
      const endpoint = ns === lab.clientNs ? ['endpoint', `${lab.hostIp}:${port}`] : ['listen-port', String(port)];
      const peer = ['peer', other.publicKey, 'allowed-ips', allowed];
      const args = ['netns', 'exec', ns, 'wg', 'set', iface, 'private-key', '/dev/stdin', ...endpoint, ...peer];
      await run('ip', args, `${own.privateKey}\n`);
      await addressUp(ns, iface, cidr);
    }
  } else {
    const [binary, socketDir] =
      kind === 'amneziawg'
        ? [AMNEZIAWG, AWG_SOCKET_DIR]
        : [kind === 'debian' ? DEBIAN_WG : CURRENT_WG, '/var/run/wireguard'];
    for (const [ns, iface, own, other, device, allowed, cidr] of ends) {
      const socket = await startDaemon(lab, tunnel, binary, ns, iface, socketDir);
      const endpoint = ns === lab.clientNs ? [`endpoint=${lab.hostIp}:${port}`] : [];
      await uapiSet(socket, [
        `private_key=${hexKey(own.privateKey)}`,
        ...device,
        ...(kind === 'amneziawg' ? OBFUSCATION : []),
        `public_key=${hexKey(other.publicKey)}`,
        ...endpoint,
        `allowed_ip=${allowed}`,
      ]);
      await addressUp(ns, iface, cidr);
    }
  }
  if (!(await lab.waitForPing(tunnel.target))) throw new Error(`${label}: no ping through the tunnel`);
  return tunnel;
}

/** `ethtool -k` of a server and a client interface: each offload feature's state, server / client. */
async function offloads(lab: NetLab, label: string, serverIface: string, clientIface: string): Promise<string> {
  const read = async (ns: string, iface: string): Promise<Map<string, string>> => {
    const out = await run('ip', ['netns', 'exec', ns, 'ethtool', '-k', iface]).catch(() => '');
    return new Map(out.split('\n').map((l) => [l.split(':')[0]?.trim() ?? '', l.split(':')[1]?.trim() ?? '']));
  };
  const [server, client] = [await read(lab.hostNs, serverIface), await read(lab.clientNs, clientIface)];
  const cells = OFFLOAD_FEATURES.map((f) => `${server.get(f) ?? '?'} / ${client.get(f) ?? '?'}`);
  return `| ${label} | ${cells.join(' | ')} |`;
}

/** Every tunnel measured once per round, in a rotated order; each both ways. */
async function measure(lab: NetLab, tunnels: readonly Tunnel[]): Promise<void> {
  for (let round = 0; round < ROUNDS; round++) {
    const order = [...tunnels.slice(round % tunnels.length), ...tunnels.slice(0, round % tunnels.length)];
    for (const t of order) {
      for (const direction of DIRECTIONS) {
        const result = await iperf(lab.clientNs, t.target, IPERF_PORT, direction, IPERF_SECONDS, t.pids);
        t.samples.set(direction, [...(t.samples.get(direction) ?? []), result]);
        console.log(`round ${round + 1} ${t.label} ${direction}: ${mbit(result.mbps)} Mbit/s`);
      }
    }
  }
}

const samplesOf = (t: Tunnel, d: Direction): Throughput[] => t.samples.get(d) ?? [];

/** Mbit/s for each core its daemons (both ends) used. */
const perDaemonCore = (x: Throughput): number => x.mbps / ((x.watched[0] ?? 0) + (x.watched[1] ?? 0));

/** Per round, `a`'s figure over `b`'s (same round, same direction): `0.91, 0.88, 0.95` and their median. */
function ratio(
  a: Tunnel,
  b: Tunnel,
  d: Direction,
  pick: (x: Throughput) => number = (x) => x.mbps,
): { each: string; median: number } {
  const [as, bs] = [samplesOf(a, d), samplesOf(b, d)];
  const values = as.map((s, i) => {
    const other = bs[i];
    return other === undefined ? Number.NaN : pick(s) / pick(other);
  });
  return { each: values.map((v) => v.toFixed(2)).join(', '), median: medianOf(values) };
}

/** The rate and CPU table: one row a tunnel and direction, medians over the rounds. */
function rateRows(tunnels: readonly Tunnel[]): string[] {
  const rows = [
    '| tunnel | direction | Mbit/s (median; each round) | server: daemon + iperf3 cores | ' +
      'client: daemon + iperf3 cores | ' +
      'Mbit/s per daemon core (both ends) | machine busy cores |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const t of tunnels) {
    for (const d of DIRECTIONS) {
      const s = samplesOf(t, d);
      const med = (pick: (x: Throughput) => number): number => medianOf(s.map(pick));
      const daemon = (i: number): number => med((x) => x.watched[i] ?? 0);
      const side = (i: number, own: (x: Throughput) => number): string =>
        t.pids.length === 0 ? `– + ${cores(med(own))}` : `${cores(daemon(i))} + ${cores(med(own))}`;
      const perCore = t.pids.length === 0 ? '–' : mbit(med(perDaemonCore));
      rows.push(
        `| ${t.label} | ${d} | **${mbit(med((x) => x.mbps))}**; ${s.map((x) => mbit(x.mbps)).join(', ')} | ` +
          `${side(0, (x) => x.serverIperfCores)} | ${side(1, (x) => x.clientIperfCores)} | ${perCore} | ` +
          `${cores(med((x) => x.machineCores))} |`,
      );
    }
  }
  return rows;
}

/** The ratio table the issue asks for, with each target's verdict. */
function ratioRows(byKind: Map<Kind, Tunnel>): string[] {
  const rows = ['| ratio | direction | each round | median | target |', '|---|---|---|---|---|'];
  const none = byKind.get('none');
  const pairs: [Kind, Kind, string, number | undefined][] = [
    ['current', 'debian', 'current wireguard-go / Debian wireguard-go', 3],
    ['amneziawg', 'current', 'amneziawg-go / current wireguard-go', 0.9],
    ...(['debian', 'current', 'amneziawg', 'kernel'] as const).map((k): [Kind, Kind, string, undefined] => [
      k,
      'none',
      `${byKind.get(k)?.label ?? k} / no tunnel`,
      undefined,
    ]),
  ];
  for (const [a, b, label, target] of pairs) {
    const [ta, tb] = [byKind.get(a), b === 'none' ? none : byKind.get(b)];
    if (ta === undefined || tb === undefined || ta.unavailable !== undefined) continue;
    for (const d of DIRECTIONS) {
      const r = ratio(ta, tb, d);
      const verdict = target === undefined ? '–' : `≥ ${target}: ${r.median >= target ? 'met' : '**not met**'}`;
      rows.push(`| ${label} | ${d} | ${r.each} | **${r.median.toFixed(2)}** | ${verdict} |`);
    }
  }
  // The same ratios per core the daemons used: less at the mercy of what else runs on the shared cores.
  for (const [a, b, label] of pairs.slice(0, 2)) {
    const [ta, tb] = [byKind.get(a), byKind.get(b)];
    if (ta === undefined || tb === undefined) continue;
    for (const d of DIRECTIONS) {
      const r = ratio(ta, tb, d, perDaemonCore);
      rows.push(`| ${label}, Mbit/s per daemon core | ${d} | ${r.each} | **${r.median.toFixed(2)}** | – |`);
    }
  }
  return rows;
}

async function main(): Promise<void> {
  const notRunnable = requireRoot([
    ['iperf3', 'iperf3'],
    ['ethtool', 'ethtool'],
  ]);
  const missing = [DEBIAN_WG, CURRENT_WG, AMNEZIAWG].filter((b) => !existsSync(b));
  if (notRunnable !== false || missing.length > 0) {
    console.error(`bench/dataplane.ts ${notRunnable || `needs ${missing.join(', ')} (scripts/go-tools.sh)`}`);
    process.exitCode = 1;
    return;
  }
  if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error('ROUNDS must be 1 or more');
  const loadAtStart = loadAverage();
  const lab = await NetLab.create(await dpPrefix());
  try {
    await startIperfServerIn(lab, lab.hostNs, IPERF_PORT);
    const kinds: [Kind, string][] = [
      ['debian', `Debian wireguard-go (${firstLine(DEBIAN_WG, ['--version'])})`],
      ['current', `current wireguard-go (${built(CURRENT_WG)})`],
      ['amneziawg', `amneziawg-go (${built(AMNEZIAWG)})`],
      ['kernel', 'kernel module'],
      ['none', 'no tunnel (veth routed)'],
    ];
    const all: Tunnel[] = [];
    for (const [i, [kind, label]] of kinds.entries()) all.push(await buildTunnel(lab, kind, i + 1, label));
    const tunnels = all.filter((t) => t.unavailable === undefined);
    const offloadRows = [];
    for (const t of tunnels)
      if (t.serverIface !== undefined && t.clientIface !== undefined)
        offloadRows.push(await offloads(lab, t.label, t.serverIface, t.clientIface));
    offloadRows.push(await offloads(lab, 'the veth (no tunnel)', `${lab.prefix}-vh`, `${lab.prefix}-vc`));
    const loadBeforeRuns = loadAverage();
    await measure(lab, tunnels);
    const byKind = new Map(all.map((t) => [t.kind, t]));
    const body = [
      `Command: \`node bench/dataplane.ts\` (as root; \`ROUNDS=${ROUNDS} IPERF_SECONDS=${IPERF_SECONDS}\`). ` +
        `Machine: ${host()}, ${firstLine('iperf3', ['--version'])}, Node ${process.versions.node}, ` +
        `${new Date().toISOString().slice(0, 10)}.`,
      '',
      `Load average (1/5/15 min) at the start: ${loadAtStart}; before the first iperf3 run: ${loadBeforeRuns}; ` +
        `at the end: ${loadAverage()}. **The 2 cores are shared with other sessions' work** while this runs: ` +
        'compare only ratios from this run, taken within each round.',
      '',
      'A "server" and a "client" namespace joined by a veth (test/support/netns.ts `NetLab`, 192.0.2.1 ↔ 192.0.2.2), ' +
        `and in them one tunnel of each kind, all up at once (MTU ${MTU}, own /24 and UDP port each), configured ` +
        `over UAPI (the kernel module with \`wg\`). iperf3 TCP, one stream, each way, ${IPERF_SECONDS} s a run; each ` +
        `of the ${ROUNDS} rounds measures every tunnel once, in a rotated order. CPU over each run: the tunnel ` +
        "daemon's utime + stime from /proc, iperf3's own from its report (cores: 1.00 = one core busy), and the " +
        "machine's busy CPU from /proc/stat (everything on it, other sessions included; the kernel module's and " +
        "the veth's work is only there). amneziawg-go runs with `jc=4 jmin=40 jmax=70 s1=52 s2=150 s3=0 s4=0` and " +
        'four non-standard headers (AmneziaWG 1.x-style: no padding of data packets).',
      '',
      ...all.filter((t) => t.unavailable !== undefined).map((t) => `Not measured: ${t.label}: ${t.unavailable}.\n`),
      ...rateRows(tunnels),
      '',
      ...ratioRows(byKind),
      '',
      'Offloads, `ethtool -k` on each interface (server / client):',
      '',
      `| interface | ${OFFLOAD_FEATURES.join(' | ')} |`,
      `|---|${OFFLOAD_FEATURES.map(() => '---').join('|')}|`,
      ...offloadRows,
      '',
      '`off [requested on]`: the feature was asked for and the device cannot do it (a TUN opened without ' +
        "`IFF_VNET_HDR`, as Debian's wireguard-go opens it). The current wireguard-go and amneziawg-go open theirs " +
        'with it and switch on TCP and UDP segmentation offload (`TUNSETOFFLOAD`), so the kernel hands them ' +
        'segments of up to 64 KB and they batch UDP with GSO/GRO on the socket.',
      '',
      ...tunnels
        .filter((t) => t.offloadLog.length > 0)
        .map((t) => `Log lines of ${t.label} on offloads: ${[...new Set(t.offloadLog)].join('; ')}.\n`),
      tunnels.every((t) => t.offloadLog.length === 0)
        ? 'No daemon logged a line on GSO, GRO or offloads at `LOG_LEVEL=verbose` (wireguard-go logs only when it ' +
          'has to switch UDP GSO off after a send fails).'
        : '',
    ];
    writeSection(SECTION, body.join('\n'));
    console.log(body.join('\n'));
  } finally {
    const problems = await lab.cleanup();
    // amneziawg-go's sockets are outside /var/run/wireguard, which the lab's cleanup sweeps.
    for (const file of existsSync(AWG_SOCKET_DIR) ? readdirSync(AWG_SOCKET_DIR) : [])
      if (file.endsWith('.sock') && belongsTo(lab.prefix, file.slice(0, -5))) rmSync(join(AWG_SOCKET_DIR, file));
    if (problems.length > 0) console.error(`cleanup: ${problems.join('; ')}`);
  }
}

await main();
