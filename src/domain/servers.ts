import { AppError } from './errors.ts';
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

/** Defaults of DESIGN §3 for fields a server is created without. */
export const SERVER_DEFAULTS = {
  dns: ['1.1.1.1'],
  mtu: 1420,
  persistentKeepalive: 25,
  clientAllowedIps: ['0.0.0.0/0', '::/0'],
  firstListenPort: 51820,
} as const;

/** `deploying` while POST waits for the node; `node_offline` while the node misses heartbeats. */
export type ServerStatus = 'deploying' | 'running' | 'node_offline' | 'error';

/** What a caller may give when creating a server (DESIGN §3). */
export interface ServerCreateInput {
  name: string;
  nodeId?: number;
  endpoint?: string;
  listenPort?: number;
  address?: string;
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
    if (hostNetwork !== undefined) {
      const overlap = `${formatSubnet(subnet)} overlaps ${formatSubnet(hostNetwork)}, a network of the node itself`;
      throw new AppError('validation_failed', `subnet ${overlap}`, {
        address: "overlaps a network of the node's own interfaces",
      });
    }
    if (node.subnets.some((s) => overlaps(s, subnet))) {
      throw new AppError(
        'validation_failed',
        `subnet ${formatSubnet(subnet)} overlaps a subnet of another server on this node`,
        {
          address: 'overlaps another server',
        },
      );
    }
    if (input.maxDevices !== undefined && input.maxDevices > deviceRoom(subnet)) {
      throw new AppError(
        'validation_failed',
        `max_devices ${input.maxDevices} does not fit in ${formatSubnet(subnet)} (room for ${deviceRoom(subnet)})`,
        {
          max_devices: `at most ${deviceRoom(subnet)} for this address`,
        },
      );
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
  if (node.listenPorts.includes(listenPort)) {
    throw new AppError('validation_failed', `listen port ${listenPort} is used by another server on this node`, {
      listen_port: 'in use on this node',
    });
  }
  return {
    address: `${intToIp(address)}/${subnet.prefix}`,
    subnet: formatSubnet(subnet),
    listenPort,
    capacity: input.maxDevices ?? deviceRoom(subnet),
  };
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
