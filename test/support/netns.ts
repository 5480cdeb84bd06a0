/**
 * Helpers for end-to-end tests that run as root on a real WireGuard data plane, inside network
 * namespaces the test makes. Nothing here touches the root namespace: no address, route, sysctl or
 * nft rule is added there (the machine's own eth0 may even hold 192.0.2.x; inside a namespace that
 * does not matter).
 *
 *   client ns PREFIX-c  192.0.2.2/24 (PREFIX-vc) ── veth ── (PREFIX-vh) 192.0.2.1/24  host ns PREFIX-h
 *   wireguard-go PREFIX-wN (client)  ──── UDP to 192.0.2.1:port ───▶  the node's servers (NODE_NETNS=PREFIX-h)
 *
 * On demand (addInternet): the "internet" beyond the host's uplink, and more client namespaces:
 *   host ns (PREFIX-uh) 203.0.113.253/30 ── veth ── 203.0.113.254/30 (PREFIX-ui) internet ns PREFIX-i
 *     the host's default route; addresses standing for hosts out there are /32s on the internet ns's lo
 *   host ns (PREFIX-kNh) 203.0.113.(4N+1)/30 ── veth ── .(4N+2)/30 (PREFIX-kNc) client ns PREFIX-cN
 *     (addClientNamespace)
 *
 * On demand (addIpv6), IPv6 from 2001:db8::/32 (documentation) beside the IPv4 above:
 *   client ns PREFIX-c 2001:db8:c::2/64 ── veth ── 2001:db8:c::1/64 host ns (an IPv6 endpoint)
 *   host ns 2001:db8:f::1/64 ── uplink veth ── 2001:db8:f::2/64 internet ns: the host's IPv6 default route
 *     (setIpv6Uplink(false) removes it: a node without an IPv6 uplink); hosts out there are /128s on its lo
 *   host ns (PREFIX-jNh) 2001:db8:d:N::1/64 ── veth ── ::2/64 (PREFIX-jNc) IPv6-only client ns PREFIX-6N
 *     (addIpv6ClientNamespace: no IPv4 at all)
 *
 * Every name a lab makes, and every name the node driver makes with NODE_NAME_PREFIX=PREFIX
 * (docs/dataplane.md: namespaces `PREFIX-sN`, interfaces `PREFIXN`, sockets
 * `/var/run/wireguard/PREFIXN.sock`), belongs to the lab's random prefix alone: a prefix is letters
 * and digits ending in a letter, so `PREFIX` followed by digits or `-` never reads as another
 * prefix's name. `cleanup()` removes all of it by name and ends processes by PID, even after a
 * failure, so parallel test files never collide and nothing is left behind.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { createConnection } from 'node:net';
import { basename, join } from 'node:path';
import type { Obfuscation } from '../../src/domain/protocols.ts';
import { onPath } from './tools.ts';

export const HOST_IP = '192.0.2.1';
export const CLIENT_IP = '192.0.2.2';
/** The host namespace's end of its uplink (addInternet): the address clients leave the node as. */
export const UPLINK_HOST_IP = '203.0.113.253';
/** The internet namespace's end of the uplink: the host namespace's default gateway. */
export const UPLINK_GATEWAY_IP = '203.0.113.254';
/** addIpv6: the host namespace's IPv6 address toward the client namespace (an IPv6 endpoint), and the client's. */
export const HOST_IP6 = '2001:db8:c::1';
export const CLIENT_IP6 = '2001:db8:c::2';
/** addIpv6: the host namespace's end of the uplink (what NAT66 makes clients' addresses) and its gateway. */
export const UPLINK_HOST_IP6 = '2001:db8:f::1';
export const UPLINK_GATEWAY_IP6 = '2001:db8:f::2';
/** Hosts of the internet namespace (addInternet) the tests listen on: "the internet" beyond the node. */
export const INTERNET_IP = '198.51.100.80';
export const INTERNET_IP6 = '2001:db8:1::80';
/** iperf3's own addresses there (startIperfServer adds them), beside those of the TCP listener. */
export const IPERF_IP = '198.51.100.81';
export const IPERF_IP6 = '2001:db8:1::81';
const LINK6_PREFIX_BITS = 64;
const LINK_PREFIX_BITS = 24;
const WG_RUN_DIR = '/var/run/wireguard';
/** amneziawg-go's UAPI sockets (AmneziaWG servers and clients). */
export const AWG_RUN_DIR = '/var/run/amneziawg';
/** The userspace daemons of servers and clients, ended at cleanup by pid when they carry the lab's prefix. */
const DAEMONS = ['wireguard-go', 'amneziawg-go'];
/**
 * Where tests that drive an ExecRunner themselves keep the stderr of each wireguard-go it starts
 * (`wireguard-go-NAME.log`); a node a test starts keeps them in its own DATA_DIR/children.
 */
export const CHILD_LOG_DIR = join(tmpdir(), 'vpn-panel-test-children');
const TOOLS = [
  ['ip', 'iproute2'],
  ['wg', 'wireguard-tools'],
  ['wireguard-go', 'wireguard-go'],
  ['nft', 'nftables'],
  ['ping', 'iputils-ping'],
] as const;
/** Keeps wireguard-go quiet and stops its "use the kernel module" banner. */
const WIREGUARD_GO_ENV = { LOG_LEVEL: 'error', WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD: '1' };

/**
 * `false` when this process may run the WireGuard end-to-end tests (with `extraTools` too), else why
 * not: use it as `describe(name, { skip: requireRoot() }, …)`. CI runs as root with the tools installed.
 */
export function requireRoot(extraTools: readonly (readonly [tool: string, pkg: string])[] = []): string | false {
  if (process.getuid?.() !== 0) return 'needs root (network namespaces, wireguard-go); CI runs these tests as root';
  const missing = [...TOOLS, ...extraTools].filter(([tool]) => !onPath(tool));
  if (missing.length > 0) {
    const tools = missing.map(([tool]) => tool).join(', ');
    return `needs ${tools} (apt-get install ${missing.map(([, pkg]) => pkg).join(' ')})`;
  }
  return false;
}

export class CommandFailed extends Error {}

/** Runs a command to completion and returns its stdout; `input` goes to its stdin. */
export function run(cmd: string, args: readonly string[], input?: string): Promise<string> {
  // Node hands a child a socket as stdin and `/dev/stdin` cannot be opened on a socket (ENXIO),
  // which `wg … private-key /dev/stdin` does: `cat` turns it into a real pipe.
  const [file, argv] = input === undefined ? [cmd, [...args]] : ['sh', ['-c', 'cat | exec "$@"', 'sh', cmd, ...args]];
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      argv,
      { encoding: 'utf8', env: { ...process.env, LC_ALL: 'C' }, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error === null) resolve(stdout);
        else reject(new CommandFailed(`\`${[cmd, ...args].join(' ')}\` failed: ${(stderr || error.message).trim()}`));
      },
    );
    child.stdin?.on('error', () => {});
    child.stdin?.end(input ?? '');
  });
}

/** True when the command exits 0. */
export function succeeds(cmd: string, args: readonly string[]): Promise<boolean> {
  return run(cmd, args).then(
    () => true,
    () => false,
  );
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Calls `check` every `intervalMs` until it returns a value (not undefined); throws after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs: number,
  intervalMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** What iperf3 says when its server is still in another test, and how long `iperf` waits for it to be free. */
const IPERF_BUSY = 'the server is busy running a test';
const IPERF_BUSY_WAIT_MS = 20_000;

/** `end.sum_received.bits_per_second` of `iperf3 -J` in Mbit/s: what the receiving side counted (TCP payload). */
function receivedMbps(json: string): number {
  const field = (value: unknown, name: string): unknown =>
    typeof value === 'object' && value !== null ? Object.entries(value).find(([key]) => key === name)?.[1] : undefined;
  const bps = field(field(field(JSON.parse(json), 'end'), 'sum_received'), 'bits_per_second');
  if (typeof bps !== 'number') throw new Error(`no sum_received in iperf3's report: ${json.slice(0, 300)}`);
  return bps / 1e6;
}

export interface KeyPair {
  privateKey: string;
  publicKey: string;
}

/** A client key pair from `wg genkey | wg pubkey`, independent of the product's own key code. */
export async function wgKeyPair(): Promise<KeyPair> {
  const privateKey = (await run('wg', ['genkey'])).trim();
  const publicKey = (await run('wg', ['pubkey'], `${privateKey}\n`)).trim();
  return { privateKey, publicKey };
}

function ipToInt(ip: string): number {
  return ip.split('.').reduce((n, part) => n * 256 + Number(part), 0);
}

function intToIp(n: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join('.');
}

/** `10.128.0.1/24` → `10.128.0.1`. */
export function hostOf(cidr: string): string {
  return cidr.split('/')[0] ?? '';
}

/**
 * A client address inside the server's `subnet` that is not the server's own `address`: the second
 * usable host. Returned as the bare address and with the subnet's prefix (for the client interface).
 */
export function clientAddressIn(subnet: string, serverAddress: string): { ip: string; cidr: string } {
  const [network = '', prefixText = ''] = subnet.split('/');
  const prefix = Number(prefixText);
  const taken = ipToInt(hostOf(serverAddress));
  const candidate = [2, 3].map((offset) => ipToInt(network) + offset).find((n) => n !== taken) ?? 0;
  if (prefix > 29) throw new Error(`subnet ${subnet} is too small for a test client`);
  const ip = intToIp(candidate);
  return { ip, cidr: `${ip}/${prefix}` };
}

/**
 * 4 characters, a letter first and last (NODE_NAME_PREFIX rules), starting with `letter`: `e` by default;
 * test files that run at the same time keep a letter of their own (the driver's test `t`, devices `d`,
 * speed limits `k` and `r`, drift `g`).
 */
export function randomPrefix(letter = 'e'): string {
  const alnum = 'abcdefghijklmnopqrstuvwxyz0123456789';
  const pick = (chars: string): string => chars[randomInt(chars.length)] ?? 'a';
  return `${letter}${pick(alnum)}${pick(alnum)}${pick(alnum.slice(0, 26))}`;
}

/** A random prefix starting with `letter` that no namespace or UAPI socket on this host uses. */
export async function unusedPrefix(letter = 'e'): Promise<string> {
  const namespaces = await netnsNames();
  const sockets = [WG_RUN_DIR, AWG_RUN_DIR].flatMap((dir) =>
    existsSync(dir) ? readdirSync(dir).map((s) => s.replace(/\.sock$/, '')) : [],
  );
  for (let i = 0; i < 100; i++) {
    const candidate = randomPrefix(letter);
    if (![...namespaces, ...sockets].some((name) => belongsTo(candidate, name))) return candidate;
  }
  throw new Error('no unused name prefix found');
}

/** True for a name this prefix (or a driver using it) made: `PREFIX` then digits, or `PREFIX-…`. */
export function belongsTo(prefix: string, name: string): boolean {
  return name.startsWith(prefix) && /^(?:\d+|-.+)$/.test(name.slice(prefix.length));
}

async function netnsNames(): Promise<string[]> {
  const out = await run('ip', ['netns', 'list']);
  return out
    .split('\n')
    .map((line) => line.trim().split(/\s+/)[0] ?? '')
    .filter((name) => name !== '');
}

/** Processes whose argv is `wireguard-go … NAME` or `amneziawg-go … NAME`, NAME of this prefix: pid → interface. */
function wireguardGoOf(prefix: string): Map<number, string> {
  const found = new Map<number, string>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8')
        .split('\0')
        .filter((a) => a !== '');
    } catch {
      continue; // exited meanwhile
    }
    const name = argv.at(-1);
    if (DAEMONS.includes(basename(argv[0] ?? '')) && name !== undefined && belongsTo(prefix, name))
      found.set(Number(entry), name);
  }
  return found;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves when every pid is gone (or after the SIGKILL wait). */
export async function killPids(pids: Iterable<number>, graceMs = 2000): Promise<void> {
  const list = [...pids].filter((pid) => pid > 0);
  const signal = (pid: number, sig: NodeJS.Signals): void => {
    try {
      process.kill(pid, sig);
    } catch {
      // gone already
    }
  };
  for (const pid of list) signal(pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (list.some(alive) && Date.now() < deadline) await sleep(20);
  for (const pid of list.filter(alive)) signal(pid, 'SIGKILL');
  const hardDeadline = Date.now() + 2000;
  while (list.some(alive) && Date.now() < hardDeadline) await sleep(20);
}

/** The names docs/dataplane.md gives server `id` of a node with this prefix. */
export interface ServerNames {
  iface: string;
  netns: string;
  vethHost: string;
  socket: string;
  hostTable: string;
  /** The host's nft table of client isolation (docs/dataplane.md, "Client isolation"). */
  isolationTable: string;
}

export interface ClientOptions {
  serverPublicKey: string;
  /** Host clients connect to: the server's `endpoint`. */
  endpoint: string;
  port: number;
  privateKey: string;
  /** The client's tunnel address with the subnet's prefix, e.g. `10.128.0.2/24`. */
  address: string;
  /** Routed through the tunnel: the server's `subnet`. */
  allowedIps: readonly string[];
  /** The namespace to run in: the lab's client namespace unless given (addClientNamespace). */
  netns?: string;
  /** An AmneziaWG client: amneziawg-go, configured over its UAPI socket with the server's obfuscation. */
  obfuscation?: Obfuscation;
}

export interface WgClient {
  readonly iface: string;
  readonly pid: number;
  /** Deletes the interface (wireguard-go then exits and removes its socket); waits until it is gone. */
  close(): Promise<void>;
}

/**
 * A host namespace for a node and a client namespace linked to it by a veth. `track()` adds
 * processes the test starts (agents, helpers) so `cleanup()` ends them by PID.
 */
export class NetLab {
  readonly prefix: string;
  readonly hostNs: string;
  readonly clientNs: string;
  readonly hostIp = HOST_IP;
  readonly clientIp = CLIENT_IP;
  readonly #tracked = new Set<ChildProcess>();
  #clientCount = 0;
  /** wg-quick interfaces that are up: name → config path and namespace. */
  readonly #quickUp = new Map<string, { path: string; netns: string }>();
  /** The internet namespace once addInternet made it. */
  #internetNs: string | undefined;
  #extraClients = 0;
  /** wg-quick's configs and the no-op `resolvconf` it needs; made on first use. */
  #quickDir: string | undefined;
  #ipv6 = false;
  #ipv6Clients = 0;

  private constructor(prefix: string) {
    this.prefix = prefix;
    this.hostNs = `${prefix}-h`;
    this.clientNs = `${prefix}-c`;
  }

  /** Makes the two namespaces and the veth; a random prefix unused on this host unless one is given. */
  static async create(prefix?: string): Promise<NetLab> {
    const lab = new NetLab(prefix ?? (await unusedPrefix()));
    try {
      await lab.#build();
    } catch (error) {
      await lab.cleanup();
      throw error;
    }
    return lab;
  }

  async #build(): Promise<void> {
    const vethHost = `${this.prefix}-vh`;
    const vethClient = `${this.prefix}-vc`;
    await run('ip', ['netns', 'add', this.hostNs]);
    await run('ip', ['netns', 'add', this.clientNs]);
    await run('ip', [
      '-n',
      this.hostNs,
      'link',
      'add',
      vethHost,
      'type',
      'veth',
      'peer',
      'name',
      vethClient,
      'netns',
      this.clientNs,
    ]);
    for (const [ns, dev, ip] of [
      [this.hostNs, vethHost, this.hostIp],
      [this.clientNs, vethClient, this.clientIp],
    ] as const) {
      await run('ip', ['-n', ns, 'addr', 'add', `${ip}/${LINK_PREFIX_BITS}`, 'dev', dev]);
      await run('ip', ['-n', ns, 'link', 'set', dev, 'up']);
      await run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    }
  }

  serverNames(serverId: number): ServerNames {
    const iface = `${this.prefix}${serverId}`;
    return {
      iface,
      netns: `${this.prefix}-s${serverId}`,
      vethHost: `${iface}h`,
      socket: `${WG_RUN_DIR}/${iface}.sock`,
      hostTable: `vpnpanel_${iface}`,
      isolationTable: `vpnpanel_iso_${iface}`,
    };
  }

  /** Ends this process at cleanup (by PID) unless it has exited by then. */
  track(child: ChildProcess): void {
    this.#tracked.add(child);
    child.once('exit', () => this.#tracked.delete(child));
  }

  /**
   * Starts wireguard-go (amneziawg-go when `obfuscation` is given) in the client namespace and configures it like a
   * client config would.
   */
  async connectClient(options: ClientOptions): Promise<WgClient> {
    const iface = `${this.prefix}-w${this.#clientCount++}`;
    const clientNs = options.netns ?? this.clientNs;
    const daemon = options.obfuscation === undefined ? 'wireguard-go' : 'amneziawg-go';
    const child = spawn('ip', ['netns', 'exec', clientNs, daemon, '-f', iface], {
      env: { ...process.env, ...WIREGUARD_GO_ENV },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.track(child);
    // wireguard-go logs its errors to stdout: both streams, so an exit says why.
    let output = '';
    for (const stream of [child.stdout, child.stderr]) {
      stream?.setEncoding('utf8');
      stream?.on('data', (chunk: string) => (output = (output + chunk).slice(-4096)));
    }
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    let gone = false;
    void exited.then(() => (gone = true));
    const socket = join(options.obfuscation === undefined ? WG_RUN_DIR : AWG_RUN_DIR, `${iface}.sock`);
    await waitFor(
      `client ${daemon} ${iface} to answer`,
      async () => {
        if (gone) throw new Error(`client ${daemon} ${iface} exited: ${output.trim()}`);
        return (await uapiAnswers(socket)) ? true : undefined;
      },
      5000,
      20,
    );
    if (options.obfuscation === undefined) {
      await run(
        'wg',
        [
          'set',
          iface,
          'private-key',
          '/dev/stdin',
          'peer',
          options.serverPublicKey,
          'endpoint',
          `${options.endpoint}:${options.port}`,
          'allowed-ips',
          options.allowedIps.join(','),
        ],
        `${options.privateKey}\n`,
      );
    } else await uapiSet(socket, awgClientConfig(options, options.obfuscation));
    await run('ip', ['-n', clientNs, 'addr', 'add', options.address, 'dev', iface]);
    await run('ip', ['-n', clientNs, 'link', 'set', iface, 'up']);
    return {
      iface,
      pid: child.pid ?? -1,
      async close() {
        if (gone) return;
        await run('ip', ['-n', clientNs, 'link', 'del', iface]).catch(() => undefined);
        const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
        await exited;
        clearTimeout(timer);
      },
    };
  }

  /**
   * Writes `config` to `<iface>.conf` (wg-quick names the interface after its file; mode 0600) and runs
   * `wg-quick up` on it in the client namespace (or `netns`) with wireguard-go, as the config's user would.
   */
  async wgQuickUp(iface: string, config: string, netns = this.clientNs): Promise<void> {
    const path = join(this.#quickDirectory(), `${iface}.conf`);
    writeFileSync(path, config, { mode: 0o600 });
    chmodSync(path, 0o600);
    await this.#wgQuick('up', path, netns);
    this.#quickUp.set(iface, { path, netns });
  }

  /** `wg-quick down` of an interface wgQuickUp brought up; nothing when it is not up. */
  async wgQuickDown(iface: string): Promise<void> {
    const up = this.#quickUp.get(iface);
    if (up === undefined) return;
    this.#quickUp.delete(iface);
    await this.#wgQuick('down', up.path, up.netns);
  }

  #quickDirectory(): string {
    if (this.#quickDir === undefined) {
      const dir = mkdtempSync(join(tmpdir(), `vpn-panel-${this.prefix}-`));
      // `DNS =` lines make wg-quick call resolvconf: a no-op stands in (docs/dataplane.md, "Measured facts" 6;
      // openresolv would rewrite the machine's /etc/resolv.conf).
      mkdirSync(join(dir, 'shim'));
      writeFileSync(join(dir, 'shim', 'resolvconf'), '#!/bin/sh\ncat >/dev/null\nexit 0\n', { mode: 0o755 });
      this.#quickDir = dir;
    }
    return this.#quickDir;
  }

  /**
   * Resolves on the exit of wg-quick (not on its pipes closing: the daemonised wireguard-go could hold
   * them), rejects with its stderr.
   */
  #wgQuick(action: 'up' | 'down', path: string, netns: string): Promise<void> {
    const env: Record<string, string | undefined> = { ...process.env, LC_ALL: 'C' };
    // With LOG_LEVEL set, wireguard-go's daemon keeps wg-quick's stdout/stderr; without it they go to /dev/null.
    delete env.LOG_LEVEL;
    const searchPath = `${join(this.#quickDirectory(), 'shim')}:${process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin'}`;
    const args = [
      'netns',
      'exec',
      netns,
      'env',
      `PATH=${searchPath}`,
      'WG_QUICK_USERSPACE_IMPLEMENTATION=wireguard-go',
      'WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD=1',
      'wg-quick',
      action,
      path,
    ];
    return new Promise((resolve, reject) => {
      const child = spawn('ip', args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr?.setEncoding('utf8');
      child.stderr?.on('data', (d: string) => (stderr += d));
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      child.once('exit', (code) => {
        clearTimeout(timer);
        if (code === 0) resolve();
        else reject(new Error(`wg-quick ${action} ${path} failed (${String(code)}): ${stderr.trim()}`));
      });
    });
  }

  /**
   * Makes the internet namespace beyond the host namespace's uplink, with the host's default route
   * through it (see the top of this file); returns its name. Made once; later calls return it.
   */
  async addInternet(): Promise<string> {
    if (this.#internetNs !== undefined) return this.#internetNs;
    const ns = `${this.prefix}-i`;
    const [hostEnd, internetEnd] = [`${this.prefix}-uh`, `${this.prefix}-ui`];
    await run('ip', ['netns', 'add', ns]);
    this.#internetNs = ns;
    const veth = ['link', 'add', hostEnd, 'type', 'veth', 'peer', 'name', internetEnd, 'netns', ns];
    await run('ip', ['-n', this.hostNs, ...veth]);
    const ends = [
      [this.hostNs, hostEnd, UPLINK_HOST_IP],
      [ns, internetEnd, UPLINK_GATEWAY_IP],
    ] as const;
    for (const [where, dev, ip] of ends) {
      await run('ip', ['-n', where, 'addr', 'add', `${ip}/30`, 'dev', dev]);
      await run('ip', ['-n', where, 'link', 'set', dev, 'up']);
    }
    await run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    await run('ip', ['-n', this.hostNs, 'route', 'add', 'default', 'via', UPLINK_GATEWAY_IP]);
    return ns;
  }

  /**
   * Adds `ip` (/32, or /128 for IPv6) to the internet namespace's loopback: a host out there (made by addInternet if
   * needed).
   */
  async addInternetAddress(ip: string): Promise<string> {
    const ns = await this.addInternet();
    const cidr = ip.includes(':') ? `${ip}/128` : `${ip}/32`;
    await run('ip', ['-n', ns, 'addr', 'add', cidr, 'dev', 'lo', ...(ip.includes(':') ? ['nodad'] : [])]);
    return ns;
  }

  /**
   * IPv6 beside the IPv4 (see the top of this file): on the client link and the uplink (made by addInternet if
   * needed), with the host's IPv6 default route through the internet namespace. Made once.
   */
  async addIpv6(): Promise<void> {
    if (this.#ipv6) return;
    const internetNs = await this.addInternet();
    this.#ipv6 = true;
    const addresses = [
      [this.hostNs, `${this.prefix}-vh`, HOST_IP6],
      [this.clientNs, `${this.prefix}-vc`, CLIENT_IP6],
      [this.hostNs, `${this.prefix}-uh`, UPLINK_HOST_IP6],
      [internetNs, `${this.prefix}-ui`, UPLINK_GATEWAY_IP6],
    ] as const;
    // nodad: usable at once, not after a second of duplicate address detection.
    for (const [ns, dev, ip] of addresses)
      await run('ip', ['-n', ns, 'addr', 'add', `${ip}/${LINK6_PREFIX_BITS}`, 'dev', dev, 'nodad']);
    await this.setIpv6Uplink(true);
  }

  /** Adds or removes the host namespace's IPv6 default route (a node with or without an IPv6 uplink). */
  async setIpv6Uplink(on: boolean): Promise<void> {
    const route = ['-n', this.hostNs, '-6', 'route'];
    if (on) await run('ip', [...route, 'replace', 'default', 'via', UPLINK_GATEWAY_IP6]);
    else await run('ip', [...route, 'del', 'default']);
  }

  /** A route in the internet namespace to `prefix` through the host's uplink: a prefix routed to the node. */
  async routeToNode6(prefix: string): Promise<void> {
    await run('ip', ['-n', await this.addInternet(), '-6', 'route', 'replace', prefix, 'via', UPLINK_HOST_IP6]);
  }

  /**
   * A client namespace with IPv6 only (see the top of this file), its default route through the host; returns its
   * name. The host's endpoint address for it is HOST_IP6, reached through that route.
   */
  async addIpv6ClientNamespace(): Promise<string> {
    const k = this.#ipv6Clients++;
    if (k > 9) throw new Error('at most 10 IPv6-only client namespaces');
    const ns = `${this.prefix}-6${k}`;
    const [hostEnd, clientEnd] = [`${this.prefix}-j${k}h`, `${this.prefix}-j${k}c`];
    await run('ip', ['netns', 'add', ns]);
    await run('ip', [
      '-n',
      this.hostNs,
      'link',
      'add',
      hostEnd,
      'type',
      'veth',
      'peer',
      'name',
      clientEnd,
      'netns',
      ns,
    ]);
    for (const [where, dev, ip] of [
      [this.hostNs, hostEnd, `2001:db8:d:${k}::1`],
      [ns, clientEnd, `2001:db8:d:${k}::2`],
    ] as const) {
      await run('ip', ['-n', where, 'addr', 'add', `${ip}/${LINK6_PREFIX_BITS}`, 'dev', dev, 'nodad']);
      await run('ip', ['-n', where, 'link', 'set', dev, 'up']);
    }
    await run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    await run('ip', ['-n', ns, '-6', 'route', 'add', 'default', 'via', `2001:db8:d:${k}::1`]);
    return ns;
  }

  /**
   * Another client namespace, on a veth of its own to the host namespace (203.0.113.x/30, default
   * route through the host), for a second client of the same server; returns its name.
   */
  async addClientNamespace(): Promise<string> {
    const k = this.#extraClients++;
    if (k > 62) throw new Error('at most 63 extra client namespaces');
    const ns = `${this.prefix}-c${k}`;
    const [hostEnd, clientEnd] = [`${this.prefix}-k${k}h`, `${this.prefix}-k${k}c`];
    await run('ip', ['netns', 'add', ns]);
    const veth = ['link', 'add', hostEnd, 'type', 'veth', 'peer', 'name', clientEnd, 'netns', ns];
    await run('ip', ['-n', this.hostNs, ...veth]);
    const [hostIp, clientIp] = [`203.0.113.${4 * k + 1}`, `203.0.113.${4 * k + 2}`];
    for (const [where, dev, ip] of [
      [this.hostNs, hostEnd, hostIp],
      [ns, clientEnd, clientIp],
    ] as const) {
      await run('ip', ['-n', where, 'addr', 'add', `${ip}/30`, 'dev', dev]);
      await run('ip', ['-n', where, 'link', 'set', dev, 'up']);
    }
    await run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    await run('ip', ['-n', ns, 'route', 'add', 'default', 'via', hostIp]);
    return ns;
  }

  /**
   * A TCP server in namespace `netns` on `ip` (`0.0.0.0` for every address) and `port` that answers
   * every connection with `banner` and the peer address it saw (`hello 203.0.113.253`), then closes
   * it; resolves once it listens. Ended at cleanup.
   */
  async listenTcp(netns: string, ip: string, port: number, banner = 'hello'): Promise<void> {
    const peer = "String(s.remoteAddress).replace(/^::ffff:/, '')";
    const answer = `(s) => s.end(${JSON.stringify(`${banner} `)} + ${peer} + '\\n')`;
    const listen = `.listen(${port}, ${JSON.stringify(ip)}, () => console.log('listening'))`;
    const script = `require('node:net').createServer(${answer})${listen}`;
    const server = spawn('ip', ['netns', 'exec', netns, process.execPath, '-e', script], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.track(server);
    let output = '';
    server.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    server.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    await waitFor(
      `a TCP listener on ${ip}:${port} in ${netns}`,
      async () => {
        if (server.exitCode !== null) throw new Error(`the listener exited: ${output}`);
        return output.includes('listening') ? true : undefined;
      },
      5000,
      20,
    );
  }

  /**
   * Whether a TCP connection from `netns` to `ip`:`port` opens within `timeoutMs` (a dropped SYN
   * times out; a refused one fails at once). Used both ways: a bounded attempt that fails is "not reachable".
   */
  async tcpConnects(netns: string, ip: string, port: number, timeoutMs = 1500): Promise<boolean> {
    return (await this.tcpRead(netns, ip, port, timeoutMs)) !== undefined;
  }

  /** The first line a TCP server at `ip`:`port` sends a connection from `netns` within `timeoutMs`; else undefined. */
  tcpRead(netns: string, ip: string, port: number, timeoutMs = 1500): Promise<string | undefined> {
    const seconds = (timeoutMs / 1000).toFixed(2);
    const connect = `exec 3<>/dev/tcp/${ip}/${port} && head -n 1 <&3`;
    return run('ip', ['netns', 'exec', netns, 'timeout', seconds, 'bash', '-c', connect]).then(
      (out) => out.trim(),
      () => undefined,
    );
  }

  /** `count` pings from namespace `netns`; true when any reply came back. */
  pingFrom(netns: string, ip: string, count = 2): Promise<boolean> {
    const args = ['netns', 'exec', netns, 'ping', '-n', '-q', '-c', String(count), '-i', '0.2', '-W', '1', ip];
    return succeeds('ip', args);
  }

  /**
   * Adds `ip` to the internet namespace's loopback (an address standing for a host on the internet,
   * reached from the client only through a tunnel) and starts `iperf3 -s` on it; resolves once it listens.
   * (Not on the host namespace's own loopback: client isolation keeps clients off every host address.)
   */
  async startIperfServer(ip: string, port: number): Promise<void> {
    const ns = await this.addInternetAddress(ip);
    const server = spawn('ip', ['netns', 'exec', ns, 'iperf3', '-s', '--forceflush', '-B', ip, '-p', String(port)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.track(server);
    let output = '';
    server.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    server.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    await waitFor(
      'iperf3 -s to listen',
      async () => (output.includes('Server listening') ? true : undefined),
      5000,
      50,
    );
  }

  /**
   * One iperf3 run (TCP) from the client namespace: upload, or download (`-R`), at most `bitrate` (iperf3's
   * `-b`, e.g. `20M`) when given; the Mbit/s the receiving side counted.
   */
  async iperf(
    ip: string,
    port: number,
    direction: 'upload' | 'download',
    seconds: number,
    bitrate?: string,
  ): Promise<number> {
    const args = [
      'netns',
      'exec',
      this.clientNs,
      'iperf3',
      '-c',
      ip,
      '-p',
      String(port),
      '-t',
      String(seconds),
      '--connect-timeout',
      '3000',
      '-J',
    ];
    if (bitrate !== undefined) args.push('-b', bitrate);
    // The server takes one test at a time and notices a client of the previous one gone only after a moment
    // (a run through a throttled tunnel ends slowly): it then refuses with "busy"; wait until it takes ours.
    const deadline = Date.now() + IPERF_BUSY_WAIT_MS;
    for (;;) {
      const report = await run('ip', direction === 'download' ? [...args, '-R'] : args).catch((error: unknown) => {
        if (error instanceof CommandFailed && error.message.includes(IPERF_BUSY)) return IPERF_BUSY;
        throw error;
      });
      if (!report.includes(IPERF_BUSY) || Date.now() > deadline) return receivedMbps(report);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  /** `count` pings from the client namespace; true when any reply came back. */
  ping(ip: string, count = 2): Promise<boolean> {
    return succeeds('ip', [
      'netns',
      'exec',
      this.clientNs,
      'ping',
      '-n',
      '-q',
      '-c',
      String(count),
      '-i',
      '0.2',
      '-W',
      '1',
      ip,
    ]);
  }

  /** Pings once a second until a reply comes back (a first handshake is part of it); false after `timeoutMs`. */
  waitForPing(ip: string, timeoutMs = 6000): Promise<boolean> {
    return this.waitForPingFrom(this.clientNs, ip, timeoutMs);
  }

  /** waitForPing from namespace `netns`. */
  async waitForPingFrom(netns: string, ip: string, timeoutMs = 6000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    do {
      if (await succeeds('ip', ['netns', 'exec', netns, 'ping', '-n', '-q', '-c', '1', '-W', '1', ip])) return true;
    } while (Date.now() < deadline);
    return false;
  }

  /** Namespaces of servers of this prefix (the driver's `PREFIX-sN`). */
  async serverNamespaces(): Promise<string[]> {
    return (await netnsNames()).filter((name) => new RegExp(`^${this.prefix}-s\\d+$`).test(name));
  }

  /** WireGuard interfaces of this prefix's servers on the host (`wg show interfaces` sees every UAPI socket). */
  async serverInterfaces(): Promise<string[]> {
    const out = await run('wg', ['show', 'interfaces']);
    return out.split(/\s+/).filter((name) => new RegExp(`^${this.prefix}\\d+$`).test(name));
  }

  /** wireguard-go processes of this lab and its node, by pid. */
  wireguardGoProcesses(): Map<number, string> {
    return wireguardGoOf(this.prefix);
  }

  /** What remains on the host of server `serverId`: empty when it is gone completely. */
  async leftoversOf(serverId: number): Promise<string[]> {
    const n = this.serverNames(serverId);
    const found: string[] = [];
    if ((await netnsNames()).includes(n.netns)) found.push(`namespace ${n.netns}`);
    const hostLinks = (await run('ip', ['-n', this.hostNs, '-o', 'link', 'show']))
      .split('\n')
      .map((l) => /^\d+:\s+([^:@\s]+)/.exec(l)?.[1] ?? '');
    for (const name of [n.iface, n.vethHost])
      if (hostLinks.includes(name)) found.push(`link ${name} in ${this.hostNs}`);
    for (const socket of [n.socket, join(AWG_RUN_DIR, `${n.iface}.sock`)])
      if (existsSync(socket)) found.push(`socket ${socket}`);
    if ((await run('wg', ['show', 'interfaces'])).split(/\s+/).includes(n.iface)) found.push(`wg interface ${n.iface}`);
    for (const [pid, name] of wireguardGoOf(this.prefix))
      if (name === n.iface) found.push(`wireguard-go ${name} (pid ${pid})`);
    const tablesOut = await run('ip', ['netns', 'exec', this.hostNs, 'nft', 'list', 'tables']);
    const hostTables = tablesOut.split('\n').map((l) => l.trim().split(' ').at(-1));
    for (const table of [n.hostTable, n.isolationTable]) {
      if (hostTables.includes(table)) found.push(`nft table ${table} in ${this.hostNs}`);
    }
    return found;
  }

  /**
   * Takes down what wgQuickUp brought up, ends every process of this lab by PID (tracked ones, then
   * every wireguard-go of the prefix: clients and servers, even those an agent left behind), deletes
   * every namespace of the prefix and removes the prefix's stale UAPI sockets. Never throws; returns
   * what it could not remove.
   */
  async cleanup(): Promise<string[]> {
    const problems: string[] = [];
    for (const iface of [...this.#quickUp.keys()])
      await this.wgQuickDown(iface).catch((e: unknown) => problems.push(`wg-quick down ${iface}: ${String(e)}`));
    await killPids([...this.#tracked].map((c) => c.pid ?? -1)).catch((e: unknown) => problems.push(String(e)));
    await killPids(wireguardGoOf(this.prefix).keys()).catch((e: unknown) => problems.push(String(e)));
    for (const ns of await netnsNames().catch(() => [])) {
      if (!belongsTo(this.prefix, ns)) continue;
      await run('ip', ['netns', 'del', ns]).catch((e: unknown) =>
        problems.push(e instanceof Error ? e.message : String(e)),
      );
    }
    for (const dir of [WG_RUN_DIR, AWG_RUN_DIR]) {
      for (const file of existsSync(dir) ? readdirSync(dir) : []) {
        if (file.endsWith('.sock') && belongsTo(this.prefix, file.slice(0, -'.sock'.length)))
          rmSync(`${dir}/${file}`, { force: true });
      }
    }
    for (const file of existsSync(CHILD_LOG_DIR) ? readdirSync(CHILD_LOG_DIR) : []) {
      const name = /^(?:wireguard|amneziawg)-go-(.+)\.log$/.exec(file)?.[1];
      if (name !== undefined && belongsTo(this.prefix, name)) rmSync(join(CHILD_LOG_DIR, file), { force: true });
    }
    if (this.#quickDir !== undefined) rmSync(this.#quickDir, { recursive: true, force: true });
    const left = [
      ...(await netnsNames().catch(() => [])).filter((ns) => belongsTo(this.prefix, ns)),
      ...[...wireguardGoOf(this.prefix).values()],
    ];
    if (left.length > 0) problems.push(`left behind: ${left.join(', ')}`);
    return problems;
  }
}

/** Whether a daemon accepts connections on its UAPI socket `path`. */
function uapiAnswers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection(path);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** One UAPI `set=1` of `lines` on the socket at `path` (independent of the product's client); throws on an errno. */
export function uapiSet(path: string, lines: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = createConnection(path);
    let answer = '';
    socket.setEncoding('latin1');
    socket.once('connect', () => socket.write(`set=1\n${lines.map((l) => `${l}\n`).join('')}\n`));
    socket.on('data', (chunk: string) => {
      answer += chunk;
      if (!answer.endsWith('\n\n')) return;
      socket.destroy();
      if (answer === 'errno=0\n\n') resolve();
      else reject(new Error(`UAPI set on ${path} failed: ${answer.trim()}`));
    });
    socket.once('error', reject);
  });
}

/** An AmneziaWG client's UAPI lines: what awg-quick would set from its config's [Interface] and [Peer]. */
function awgClientConfig(options: ClientOptions, o: Obfuscation): string[] {
  const hex = (key: string): string => Buffer.from(key, 'base64').toString('hex');
  // amneziawg-go refuses a junk count or size of 0 (awg-quick leaves such a line out).
  const settings = Object.entries(o).filter(([, value]) => value !== undefined && value !== 0);
  return [
    `private_key=${hex(options.privateKey)}`,
    ...settings.map(([key, value]) => `${key}=${String(value)}`),
    `public_key=${hex(options.serverPublicKey)}`,
    `endpoint=${options.endpoint}:${options.port}`,
    'replace_allowed_ips=true',
    ...options.allowedIps.map((ip) => `allowed_ip=${ip}`),
  ];
}
