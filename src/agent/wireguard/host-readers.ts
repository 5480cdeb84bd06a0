/**
 * What the driver reads from the host before it changes anything, each reader beside the parser of its
 * command's output. A reader of a namespace that may be missing answers "nothing there" instead of failing.
 */
import type { CommandRunner } from '../commands.ts';
import type { Names } from './names.ts';

/**
 * `addrs`: IPv4 addresses as `a.b.c.d/len`; `addrs6`: IPv6 ones of global scope (not link-local) as `ip` prints
 * them.
 */
export type Link = { up: boolean; mtu: number; addrs: string[]; addrs6: string[] };
/** `allowedIps`: comma-separated, '' for none. */
export type DumpPeer = {
  publicKey: string;
  allowedIps: string;
  lastHandshakeS: number;
  rxBytes: number;
  txBytes: number;
};
/**
 * `deviceKeys`: the device's other keys as UAPI gives them (amneziawg-go's obfuscation: `jc`, `h1`, ...); absent
 * when it has none, and from `wg`.
 */
export type Dump = { privateKey: string; listenPort: number; peers: DumpPeer[]; deviceKeys?: Record<string, string> };

/** How often readSnapshot tries a read of a namespace's links, and of the interface's dump. */
const READ_TRIES = 3;
const DUMP_TRIES = 2;

/** What up() reads before changing anything. */
export interface Snapshot {
  netnsExists: boolean;
  serverLinks: Map<string, Link>;
  hostLinks: Map<string, Link>;
  /** `GATEWAY DEV` of the server namespace's default route, '' when none. */
  defaultRoute: string;
  dump: Dump | null;
  serverTables: Set<string>;
  hostTables: Set<string>;
  serverForwarding: boolean;
  hostForwarding: boolean;
}

/** `ip` arguments that address `netns`; none for the process's own namespace. */
export function ipIn(netns: string | undefined): string[] {
  return netns === undefined ? [] : ['-n', netns];
}

/**
 * Everything of server `n` in its namespace and in the host namespace that up() compares with its spec;
 * `readInterfaceDump` reads the interface's dump (through `wg` or UAPI, interface-config.ts). Throws when the
 * links of either namespace cannot be read.
 */
export async function readSnapshot(
  runner: CommandRunner,
  n: Names,
  hostNetns: string | undefined,
  readInterfaceDump: () => Promise<Dump>,
): Promise<Snapshot> {
  const netnsExists = (await readNetnsNames(runner)).includes(n.netns);
  const none = <T>(value: T): Promise<T> => Promise.resolve(value);
  // A link or dump that cannot be read is not a missing one: taken for missing, it would make up() recreate a
  // working interface (its clients' sessions lost until they rekey, 15 s on) or veth. Read again; if the links
  // still cannot be read, up() fails and changes nothing. A dump that twice fails means a wireguard-go that no
  // longer answers, which only a new interface mends.
  const [serverLinks, hostLinks, defaultRoute, dump, serverTables, hostTables, serverForwarding, hostForwarding] =
    await Promise.all([
      netnsExists ? tried(() => readLinksOrFail(runner, n.netns), READ_TRIES) : none(new Map<string, Link>()),
      tried(() => readLinksOrFail(runner, hostNetns), READ_TRIES),
      netnsExists ? readDefaultRoute(runner, n.netns) : none(''),
      netnsExists ? tried(readInterfaceDump, DUMP_TRIES).catch(() => null) : none(null),
      netnsExists ? readNftTables(runner, n.netns) : none(new Set<string>()),
      readNftTables(runner, hostNetns),
      netnsExists ? readForwarding(runner, n.netns) : none(false),
      readForwarding(runner, hostNetns),
    ]);
  return {
    netnsExists,
    serverLinks,
    hostLinks,
    defaultRoute,
    dump,
    serverTables,
    hostTables,
    serverForwarding,
    hostForwarding,
  };
}

/** `wg show IF dump`: the interface line, then one line per peer, tab-separated. */
export function parseDump(stdout: string): Dump {
  const lines = stdout.split('\n').filter((l) => l !== '');
  const head = lines[0]?.split('\t') ?? [];
  if (head.length < 4) throw new Error(`unexpected \`wg show dump\` output: ${JSON.stringify(stdout.slice(0, 200))}`);
  const peers = lines.slice(1).map((line) => {
    const f = line.split('\t');
    const allowed = f[3] ?? '';
    return {
      publicKey: f[0] ?? '',
      allowedIps: allowed === '(none)' ? '' : allowed,
      lastHandshakeS: Number(f[4] ?? 0) || 0,
      rxBytes: Number(f[5] ?? 0) || 0,
      txBytes: Number(f[6] ?? 0) || 0,
    };
  });
  return { privateKey: head[0] ?? '', listenPort: Number(head[2]), peers };
}

/** The interface's index: an interface made anew gets another one. */
export async function readLinkIndex(runner: CommandRunner, netns: string, iface: string): Promise<string> {
  const { stdout } = await runner.run('ip', ['-n', netns, '-o', 'link', 'show', 'dev', iface]);
  return /^(\d+):/.exec(stdout)?.[1] ?? '';
}

export async function readNetnsNames(runner: CommandRunner): Promise<string[]> {
  const { stdout } = await runner.run('ip', ['netns', 'list']);
  return parseNetnsList(stdout);
}

/** `ip netns list` prints `name` or `name (id: N)` per line. */
export function parseNetnsList(stdout: string): string[] {
  return stdout
    .split('\n')
    .map((l) => l.trim().split(/\s+/)[0] ?? '')
    .filter((l) => l !== '');
}

/** Links of a namespace by name; empty when it cannot be read (a missing namespace). */
export async function readLinks(runner: CommandRunner, netns: string | undefined): Promise<Map<string, Link>> {
  return readLinksOrFail(runner, netns).catch(() => new Map<string, Link>());
}

/** Links of a namespace by name; throws when they cannot be read. */
async function readLinksOrFail(runner: CommandRunner, netns: string | undefined): Promise<Map<string, Link>> {
  const { stdout } = await runner.run('ip', [...ipIn(netns), '-j', 'addr', 'show']);
  return parseIpAddrJson(stdout);
}

/** `read`'s answer, tried up to `tries` times; the last failure when every try failed. */
async function tried<T>(read: () => Promise<T>, tries: number): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await read();
    } catch (error) {
      if (attempt >= tries) throw error;
    }
  }
}

/** `ip -j addr show` → links by name with their addresses. */
export function parseIpAddrJson(stdout: string): Map<string, Link> {
  const links = new Map<string, Link>();
  const parsed: unknown = stdout.trim() === '' ? [] : JSON.parse(stdout);
  for (const item of Array.isArray(parsed) ? parsed : []) {
    if (!isRecord(item) || typeof item.ifname !== 'string') continue;
    const flags = Array.isArray(item.flags) ? item.flags : [];
    const info = Array.isArray(item.addr_info) ? item.addr_info : [];
    const of = (family: string): string[] =>
      info.flatMap((a: unknown) =>
        isRecord(a) && a.family === family && a.scope !== 'link' && typeof a.local === 'string'
          ? [`${a.local}/${String(a.prefixlen)}`]
          : [],
      );
    const mtu = typeof item.mtu === 'number' ? item.mtu : 0;
    links.set(item.ifname, { up: flags.includes('UP'), mtu, addrs: of('inet'), addrs6: of('inet6') });
  }
  return links;
}

/** Every address of the namespace's interfaces; throws when it cannot read them. */
export async function readNetworks(runner: CommandRunner, netns: string | undefined): Promise<string[]> {
  const { stdout } = await runner.run('ip', [...ipIn(netns), '-j', 'addr', 'show']);
  return parseInterfaceNetworks(stdout);
}

/** `ip -j addr show` → every IPv4 and IPv6 address with its prefix, e.g. `192.0.2.2/24`, `fd00::2/64`. */
export function parseInterfaceNetworks(stdout: string): string[] {
  const parsed: unknown = stdout.trim() === '' ? [] : JSON.parse(stdout);
  const addresses = (Array.isArray(parsed) ? parsed : []).flatMap((item: unknown) =>
    isRecord(item) && Array.isArray(item.addr_info) ? item.addr_info : [],
  );
  return addresses.flatMap((a: unknown) => {
    if (!isRecord(a) || (a.family !== 'inet' && a.family !== 'inet6')) return [];
    return typeof a.local === 'string' && typeof a.prefixlen === 'number' ? [`${a.local}/${a.prefixlen}`] : [];
  });
}

/** `GATEWAY DEV` of the namespace's default route of `family`; '' when none or unreadable. */
async function readDefaultRoute(runner: CommandRunner, netns: string, family: 4 | 6 = 4): Promise<string> {
  const route = (await readRoutes(runner, netns, family, ['default'])).find((r) => r.dst === 'default');
  return route === undefined || route.gateway === '' || route.dev === '' ? '' : `${route.gateway} ${route.dev}`;
}

/** A route as `ip -j route` prints it; '' for a field it leaves out. */
export type Route = { dst: string; gateway: string; dev: string; protocol: string };

/** `ip -j [-6] route show SELECTOR…` of a namespace; none when unreadable. */
async function readRoutes(
  runner: CommandRunner,
  netns: string | undefined,
  family: 4 | 6,
  selector: readonly string[],
): Promise<Route[]> {
  const familyArgs = family === 6 ? ['-6'] : [];
  return runner.run('ip', [...ipIn(netns), '-j', ...familyArgs, 'route', 'show', ...selector]).then(
    (r) => parseRoutes(r.stdout),
    () => [],
  );
}

export function parseRoutes(stdout: string): Route[] {
  const parsed: unknown = stdout.trim() === '' ? [] : JSON.parse(stdout);
  const text = (value: unknown): string => (typeof value === 'string' ? value : '');
  return (Array.isArray(parsed) ? parsed : []).flatMap((r: unknown) =>
    isRecord(r) ? [{ dst: text(r.dst), gateway: text(r.gateway), dev: text(r.dev), protocol: text(r.protocol) }] : [],
  );
}

/** What up() and the drift check read of a server's IPv6 beyond its interface (only for a server that has some). */
export interface Ipv6Snapshot {
  /** `GATEWAY DEV` of the server namespace's IPv6 default route, '' when none. */
  serverDefaultRoute: string;
  /** The host namespace's IPv6 default routes: the node has an IPv6 uplink when there is one. */
  hostDefaultRoutes: Route[];
  /** Destinations the host namespace routes over the server's veth, less the kernel's own (its /126, fe80::/64). */
  hostRoutesViaVeth: string[];
  serverForwarding: boolean;
  hostForwarding: boolean;
}

export async function readIpv6Snapshot(
  runner: CommandRunner,
  n: Names,
  hostNetns: string | undefined,
): Promise<Ipv6Snapshot> {
  const forwarding = 'net.ipv6.conf.all.forwarding';
  const [serverDefaultRoute, hostDefaultRoutes, viaVeth, serverForwarding, hostForwarding] = await Promise.all([
    readDefaultRoute(runner, n.netns, 6),
    readRoutes(runner, hostNetns, 6, ['default']),
    readRoutes(runner, hostNetns, 6, ['dev', n.vethHost]),
    readForwarding(runner, n.netns, forwarding),
    readForwarding(runner, hostNetns, forwarding),
  ]);
  const hostRoutesViaVeth = viaVeth.filter((r) => r.protocol !== 'kernel').map((r) => r.dst);
  return { serverDefaultRoute, hostDefaultRoutes, hostRoutesViaVeth, serverForwarding, hostForwarding };
}

/** The namespace's nft tables as `FAMILY NAME`; empty when unreadable. */
export async function readNftTables(runner: CommandRunner, netns: string | undefined): Promise<Set<string>> {
  return runner.run('nft', ['list', 'tables'], { netns }).then(
    (r) =>
      new Set(
        r.stdout
          .split('\n')
          .map((l) => l.trim().replace(/^table /, ''))
          .filter((l) => l !== ''),
      ),
    () => new Set<string>(),
  );
}

/** Whether the namespace forwards (IPv4 unless another sysctl `key` is named); false when unreadable. */
async function readForwarding(
  runner: CommandRunner,
  netns: string | undefined,
  key = 'net.ipv4.ip_forward',
): Promise<boolean> {
  return runner.run('sysctl', ['-n', key], { netns }).then(
    (r) => r.stdout.trim() === '1',
    () => false,
  );
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}
