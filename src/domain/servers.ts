import {
  listenPortInUse,
  maxDevicesDoNotFit,
  obfuscationNeedsAmneziaWG,
  protocolFixed,
  subnet6OverlapsNode,
  subnet6OverlapsServer,
  subnetOverlapsNode,
  subnetOverlapsServer,
} from './error-cases.ts';
import { AppError } from './errors.ts';
import {
  checkTransportPadding,
  completeObfuscation,
  type Obfuscation,
  type ObfuscationPatch,
  patchedObfuscation,
  sameObfuscation,
  type ServerProtocol,
} from './protocols.ts';
import {
  DEFAULT_POOL,
  DEFAULT_PREFIX,
  type Subnet,
  deviceRoom,
  firstFreeSubnet,
  formatSubnet,
  inServerSpace,
  intToIp,
  overlaps,
  parseCidr,
  prefixFor,
  serverAddressOf,
} from './subnets.ts';
import {
  DEFAULT_PREFIX6,
  type Subnet6,
  bigIntToIpv6,
  deviceRoom6,
  firstFreeSubnet6,
  formatSubnet6,
  overlaps6,
  parseServerAddress6,
  serverAddress6Of,
} from './subnets6.ts';

/** Defaults of docs/decisions.md "Server fields and defaults" for fields a server is created without. */
export const SERVER_DEFAULTS = {
  dns: ['1.1.1.1'],
  mtu: 1420,
  persistentKeepalive: 25,
  clientAllowedIps: ['0.0.0.0/0', '::/0'],
  firstListenPort: 51820,
} as const;

/** `deploying` while POST waits for the node; `node_offline` while the node misses heartbeats. */
export type ServerStatus = 'deploying' | 'running' | 'node_offline' | 'error';
export const SERVER_STATUSES: readonly ServerStatus[] = ['deploying', 'running', 'node_offline', 'error'];

/**
 * What the node does with a server's IPv6 (it reports it when it applies the server): `off` without address6,
 * `nat66` with masquerade to its uplink, `routed` for a global subnet6 routed to it, `tunnel_only` when it has no
 * IPv6 uplink (only the server's own IPv6 address answers). `off` until the node reports.
 */
export type Ipv6Status = 'off' | 'nat66' | 'routed' | 'tunnel_only';
export const IPV6_STATUSES: readonly Ipv6Status[] = ['off', 'nat66', 'routed', 'tunnel_only'];

/** What a caller may give when creating a server (docs/decisions.md "Server fields and defaults"). */
export interface ServerCreateInput {
  name: string;
  nodeId?: number;
  /** Default wireguard. */
  protocol?: ServerProtocol;
  /** AmneziaWG only: the parameters given; the others are drawn (completeObfuscation). */
  obfuscation?: Partial<Obfuscation>;
  endpoint?: string;
  listenPort?: number;
  address?: string;
  /** The server's IPv6 address with its prefix (`fd12:3456:789a:1::1/64`); default a /64 of the panel's ULA /48. */
  address6?: string;
  maxDevices?: number;
  dns?: string[];
  mtu?: number;
  persistentKeepalive?: number;
  clientAllowedIps?: string[];
  /** Clients may reach each other; default false. */
  clientToClient?: boolean;
  country?: string;
  city?: string;
}

/** What is on the chosen node already. */
export interface NodeOccupancy {
  subnets: readonly Subnet[];
  listenPorts: readonly number[];
  /** The networks of the node's own interfaces (its agent reports them): a server subnet never overlaps one. */
  hostNetworks: readonly Subnet[];
}

export interface ServerPlan {
  address: string;
  subnet: string;
  listenPort: number;
  capacity: number;
}

/**
 * Picks the subnet, address, port and capacity of a new server. An explicit `address` must lie in
 * private or CGNAT space and overlap neither a subnet of the node nor one of its own networks (clients
 * would shadow, or be routed into, the host's network); without one the next free subnet of the default
 * pool is taken (a /24, or the smallest that fits `maxDevices`), avoiding the node's networks and
 * `panelSubnets` so device addresses stay unique panel-wide.
 */
export function planServer(input: ServerCreateInput, node: NodeOccupancy, panelSubnets: readonly Subnet[]): ServerPlan {
  let subnet: Subnet;
  let address: number;
  if (input.address !== undefined) {
    ({ subnet, address } = parseCidr(input.address));
    if (!inServerSpace(subnet)) {
      const spaces = '10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 or 100.64.0.0/10';
      throw new AppError('validation_failed', `subnet ${formatSubnet(subnet)} is not private: use ${spaces}`, {
        address: 'not in private (RFC 1918) or CGNAT (100.64.0.0/10) space',
      });
    }
    const hostNetwork = node.hostNetworks.find((n) => overlaps(n, subnet));
    if (hostNetwork !== undefined) throw subnetOverlapsNode(formatSubnet(subnet), formatSubnet(hostNetwork));
    if (node.subnets.some((s) => overlaps(s, subnet))) throw subnetOverlapsServer(formatSubnet(subnet));
    if (input.maxDevices !== undefined && input.maxDevices > deviceRoom(subnet)) {
      throw maxDevicesDoNotFit(input.maxDevices, formatSubnet(subnet), deviceRoom(subnet), 'address');
    }
  } else {
    const prefix =
      input.maxDevices === undefined ? DEFAULT_PREFIX : Math.min(DEFAULT_PREFIX, prefixFor(input.maxDevices));
    const free = firstFreeSubnet(DEFAULT_POOL, prefix, [...node.subnets, ...node.hostNetworks, ...panelSubnets]);
    if (!free)
      throw new AppError(
        'validation_failed',
        `no free /${prefix} left in ${formatSubnet(DEFAULT_POOL)}; give an address`,
        { address: 'required: pool exhausted' },
      );
    subnet = free;
    address = serverAddressOf(free);
  }
  const listenPort = input.listenPort ?? firstFreePort(node.listenPorts);
  if (node.listenPorts.includes(listenPort)) throw listenPortInUse(listenPort);
  return {
    address: `${intToIp(address)}/${subnet.prefix}`,
    subnet: formatSubnet(subnet),
    listenPort,
    capacity: input.maxDevices ?? deviceRoom(subnet),
  };
}

/** What IPv6 space is taken, for a new server's subnet6. */
export interface Ipv6Occupancy {
  /** The panel's ULA /48 (RFC 4193), picked at random once: default subnet6s are its /64s. */
  ulaPrefix: Subnet6;
  /** The subnet6 of every server of the panel: a subnet6 overlaps none, so device addresses stay unique. */
  panelSubnets: readonly Subnet6[];
  /** The IPv6 networks of the node's own interfaces. */
  hostNetworks: readonly Subnet6[];
}

export interface Ipv6Plan {
  address6: string;
  subnet6: string;
  /** How many devices the subnet6 holds: the server's capacity is no more. */
  room: number;
}

/**
 * Picks the subnet6 and address6 of a new server. An explicit `address6` (a /64 to a /120 of fc00::/7 or of
 * global unicast space, parseServerAddress6) must overlap neither a network of the node nor another server's
 * subnet6 anywhere on the panel, and hold `maxDevices`; without one the next free /64 of the panel's ULA /48
 * is taken and the server has its first address.
 */
export function planSubnet6(input: Pick<ServerCreateInput, 'address6' | 'maxDevices'>, taken: Ipv6Occupancy): Ipv6Plan {
  let subnet: Subnet6;
  let address: bigint;
  if (input.address6 !== undefined) {
    ({ subnet, address } = parseServerAddress6(input.address6));
    const hostNetwork = taken.hostNetworks.find((n) => overlaps6(n, subnet));
    if (hostNetwork !== undefined) throw subnet6OverlapsNode(formatSubnet6(subnet), formatSubnet6(hostNetwork));
    const server = taken.panelSubnets.find((s) => overlaps6(s, subnet));
    if (server !== undefined) throw subnet6OverlapsServer(formatSubnet6(subnet), formatSubnet6(server));
    if (input.maxDevices !== undefined && input.maxDevices > deviceRoom6(subnet)) {
      throw maxDevicesDoNotFit(input.maxDevices, formatSubnet6(subnet), deviceRoom6(subnet), 'address6');
    }
  } else {
    const free = firstFreeSubnet6(taken.ulaPrefix, DEFAULT_PREFIX6, [...taken.panelSubnets, ...taken.hostNetworks]);
    if (!free) {
      throw new AppError(
        'validation_failed',
        `no free /${DEFAULT_PREFIX6} left in ${formatSubnet6(taken.ulaPrefix)}; give an address6`,
        { address6: 'required: the panel ULA prefix is used up' },
      );
    }
    subnet = free;
    address = serverAddress6Of(free);
  }
  return {
    address6: `${bigIntToIpv6(address)}/${subnet.prefix}`,
    subnet6: formatSubnet6(subnet),
    room: deviceRoom6(subnet),
  };
}

/** A new server's protocol and its full parameters (null for WireGuard), checked before anything is saved. */
export function planProtocol(input: Pick<ServerCreateInput, 'protocol' | 'obfuscation' | 'mtu'>): {
  protocol: ServerProtocol;
  obfuscation: Obfuscation | null;
} {
  const protocol = input.protocol ?? 'wireguard';
  if (protocol === 'wireguard') {
    if (input.obfuscation !== undefined) throw obfuscationNeedsAmneziaWG();
    return { protocol, obfuscation: null };
  }
  return { protocol, obfuscation: completeObfuscation(input.obfuscation ?? {}, input.mtu ?? SERVER_DEFAULTS.mtu) };
}

/**
 * The parameters a PATCH gives a server: undefined when it leaves them as they are. The protocol never changes
 * (the same one given is no change); obfuscation is merged over the current one and checked whole.
 */
export function patchObfuscation(
  current: { protocol: ServerProtocol; obfuscation: Obfuscation | null; mtu: number },
  patch: { protocol?: ServerProtocol; obfuscation?: ObfuscationPatch; mtu?: number },
): Obfuscation | undefined {
  if (patch.protocol !== undefined && patch.protocol !== current.protocol) throw protocolFixed(current.protocol);
  const mtu = patch.mtu ?? current.mtu;
  if (patch.obfuscation === undefined) {
    if (current.obfuscation !== null) checkTransportPadding(current.obfuscation, mtu, 'mtu');
    return undefined;
  }
  if (current.obfuscation === null) throw obfuscationNeedsAmneziaWG();
  const next = patchedObfuscation(current.obfuscation, patch.obfuscation);
  checkTransportPadding(next, mtu);
  return sameObfuscation(next, current.obfuscation) ? undefined : next;
}

export function firstFreePort(taken: readonly number[]): number {
  const used = new Set(taken);
  for (let port = SERVER_DEFAULTS.firstListenPort; port <= 65535; port++) if (!used.has(port)) return port;
  throw new AppError('validation_failed', 'no free UDP port left on this node', { listen_port: 'none free' });
}

/** A server reports its node's health: a running server on an offline node is `node_offline`. */
export function effectiveServerStatus(stored: ServerStatus, nodeOnline: boolean): ServerStatus {
  return stored === 'running' && !nodeOnline ? 'node_offline' : stored;
}
