import { AppError } from './errors.ts';

/**
 * IPv4 subnets as integers. A server owns one subnet: its own address is the first host, devices get
 * the rest; network and broadcast addresses are never handed out.
 */
export interface Subnet {
  /** Network address as an unsigned 32-bit integer. */
  network: number;
  prefix: number;
}

/** Where default server subnets come from (docs/decisions.md "Server subnets"): /24s of 10.128.0.0/9. */
export const DEFAULT_POOL: Subnet = { network: ipToInt('10.128.0.0'), prefix: 9 };
export const DEFAULT_PREFIX = 24;
/** Addresses of a subnet no device can have: network, broadcast and the server's own. */
export const RESERVED_ADDRESSES = 3;
/** A /30 is the smallest subnet with a server and one device. */
export const MAX_PREFIX = 30;
/** A /16 holds 65,533 devices, the most one server's speed-limit tree can address (dataplane research). */
export const MIN_PREFIX = 16;

/**
 * Where a server's subnet may lie: private space (RFC 1918) and shared address space (CGNAT, RFC 6598).
 * Anything else is someone's: loopback and link-local (169.254/16, cloud metadata included) would shadow
 * the node's own services, public space someone else's hosts.
 */
export const SERVER_SPACES: readonly Subnet[] = [
  { network: ipToInt('10.0.0.0'), prefix: 8 },
  { network: ipToInt('172.16.0.0'), prefix: 12 },
  { network: ipToInt('192.168.0.0'), prefix: 16 },
  { network: ipToInt('100.64.0.0'), prefix: 10 },
];

/** True when the subnet lies wholly inside one of SERVER_SPACES. */
export function inServerSpace(subnet: Subnet): boolean {
  return SERVER_SPACES.some((space) => space.prefix <= subnet.prefix && overlaps(space, subnet));
}

/**
 * The IPv4 networks of a node's interfaces (`192.0.2.2/24`), as subnets; IPv6 and malformed entries
 * are skipped (server subnets are IPv4).
 */
export function ipv4Networks(cidrs: readonly string[]): Subnet[] {
  return cidrs.flatMap((cidr) => {
    const match = /^([0-9.]+)\/([0-9]{1,2})$/.exec(cidr);
    const prefix = Number(match?.[2]);
    if (!match?.[1] || prefix > 32) return [];
    try {
      return [subnetOf(ipToInt(match[1]), prefix)];
    } catch {
      return [];
    }
  });
}

export function ipToInt(ip: string): number {
  const parts = ip.split('.');
  if (parts.length !== 4 || !parts.every((p) => /^(0|[1-9][0-9]{0,2})$/.test(p) && Number(p) <= 255)) {
    throw new AppError('validation_failed', `${ip} is not an IPv4 address`, { address: 'not an IPv4 address' });
  }
  return parts.reduce((n, p) => n * 256 + Number(p), 0);
}

export function intToIp(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

export function size(subnet: Subnet): number {
  return 2 ** (32 - subnet.prefix);
}

export function subnetOf(ip: number, prefix: number): Subnet {
  return { network: ip - (ip % 2 ** (32 - prefix)), prefix };
}

export function formatSubnet(subnet: Subnet): string {
  return `${intToIp(subnet.network)}/${subnet.prefix}`;
}

export function overlaps(a: Subnet, b: Subnet): boolean {
  return a.network < b.network + size(b) && b.network < a.network + size(a);
}

/** How many devices a subnet holds. */
export function deviceRoom(subnet: Subnet): number {
  return size(subnet) - RESERVED_ADDRESSES;
}

/** The server's own address in the subnet: the first host. */
export function serverAddressOf(subnet: Subnet): number {
  return subnet.network + 1;
}

/** Parses a CIDR such as `10.200.0.1/20`: the address given and the subnet it lies in. */
export function parseCidr(cidr: string): { address: number; subnet: Subnet } {
  const match = /^([0-9.]+)\/([0-9]{1,2})$/.exec(cidr);
  const prefix = Number(match?.[2]);
  if (!match?.[1] || prefix < MIN_PREFIX || prefix > MAX_PREFIX) {
    throw new AppError(
      'validation_failed',
      `address must be an IPv4 CIDR from /${MIN_PREFIX} to /${MAX_PREFIX} such as 10.200.0.1/20`,
      {
        address: `IPv4 CIDR /${MIN_PREFIX} to /${MAX_PREFIX}`,
      },
    );
  }
  const address = ipToInt(match[1]);
  const subnet = subnetOf(address, prefix);
  if (address === subnet.network || address === subnet.network + size(subnet) - 1) {
    throw new AppError(
      'validation_failed',
      'the server address cannot be the network or broadcast address of its subnet',
      {
        address: 'network or broadcast address',
      },
    );
  }
  return { address, subnet };
}

/** Parses a subnet as stored, e.g. `10.128.0.0/24`. */
export function parseSubnet(cidr: string): Subnet {
  const [ip = '', prefix = ''] = cidr.split('/');
  return subnetOf(ipToInt(ip), Number(prefix));
}

/** The longest prefix (smallest subnet) that holds `devices`. */
export function prefixFor(devices: number): number {
  for (let prefix = MAX_PREFIX; prefix >= MIN_PREFIX; prefix--) {
    if (deviceRoom({ network: 0, prefix }) >= devices) return prefix;
  }
  throw new AppError(
    'validation_failed',
    `one server holds at most ${deviceRoom({ network: 0, prefix: MIN_PREFIX })} devices`,
    {
      max_devices: 'too many',
    },
  );
}

/** The first subnet of `prefix` inside `pool` that overlaps none of `taken`, or undefined. */
export function firstFreeSubnet(pool: Subnet, prefix: number, taken: readonly Subnet[]): Subnet | undefined {
  const step = 2 ** (32 - prefix);
  const sorted = [...taken].sort((a, b) => a.network - b.network);
  let candidate = pool.network;
  const end = pool.network + size(pool);
  while (candidate + step <= end) {
    const block: Subnet = { network: candidate, prefix };
    const clash = sorted.find((t) => overlaps(t, block));
    if (!clash) return block;
    // Jump past the clashing subnet, aligned to this prefix.
    const after = clash.network + size(clash);
    candidate = Math.ceil(after / step) * step;
  }
  return undefined;
}
