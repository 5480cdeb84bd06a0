/**
 * What a server is called on the host. wireguard-go's UAPI socket `/var/run/wireguard/IF.sock` is global,
 * so every name carries the node's prefix and is unique per node.
 */
import { ipv6Text } from '../../domain/addresses.ts';
import { DriverError } from '../driver.ts';

const PREFIX_PATTERN = /^[a-z](?:[a-z0-9]{0,2}[a-z])?$/;
const MAX_NAME_CHARS = 15;
/**
 * Third octets for the veth /30s in 169.254.0.0/16; 0 and 255 are reserved (RFC 3927), 169 and 170 hold
 * cloud metadata services.
 */
const VETH_THIRD_OCTETS = Array.from({ length: 254 }, (_, i) => i + 1).filter((o) => o !== 169 && o !== 170);
const VETH_BLOCKS = VETH_THIRD_OCTETS.length * 64;
/**
 * The veths' IPv6: a ULA /48 picked at random once for this project (RFC 4193), a /126 per server with the whole
 * server id in groups 4-6 (ids have at most 14 digits, under 2^48), so no two servers share one.
 */
const VETH6_GROUPS = [0xfd90, 0x623f, 0xc84b];
export const VETH6_PREFIX_BITS = 126;

/**
 * A server's names on the host: veth ends in the host and server namespaces, the host's nft table, the veth
 * /30's two addresses.
 */
export interface Names {
  iface: string;
  netns: string;
  vethHost: string;
  vethServer: string;
  hostTable: string;
  /** The host's nft table of client isolation. */
  isolationTable: string;
  hostIp: string;
  serverIp: string;
  /** The veth's IPv6 addresses (a /126 of VETH6_GROUPS), bare. */
  hostIp6: string;
  serverIp6: string;
}

/** Throws unless `prefix` is 1-4 of [a-z0-9], a letter first and last. */
export function checkNamePrefix(prefix: string): void {
  if (!PREFIX_PATTERN.test(prefix)) {
    throw new Error(`namePrefix ${JSON.stringify(prefix)}: 1-4 of [a-z0-9], a letter first and last`);
  }
}

/** Every host name of a server; throws when the id does not fit the 15-character limit. */
export function serverNames(prefix: string, serverId: number): Names {
  const maxDigits = MAX_NAME_CHARS - prefix.length - 1;
  if (!Number.isSafeInteger(serverId) || serverId < 0 || String(serverId).length > maxDigits) {
    throw new DriverError(`server ${serverId}`, [`server id must be an integer of at most ${maxDigits} digits`]);
  }
  const iface = `${prefix}${serverId}`;
  // A /30 per server so return traffic in the host namespace has one route per server.
  const block = serverId % VETH_BLOCKS;
  const base = `169.254.${VETH_THIRD_OCTETS[Math.floor(block / 64)] ?? 1}`;
  const lastOctet = (block % 64) * 4;
  return {
    iface,
    netns: `${prefix}-s${serverId}`,
    vethHost: `${iface}h`,
    vethServer: `${iface}s`,
    hostTable: `vpnpanel_${iface}`,
    isolationTable: `vpnpanel_iso_${iface}`,
    hostIp: `${base}.${lastOctet + 1}`,
    serverIp: `${base}.${lastOctet + 2}`,
    hostIp6: veth6Address(serverId, 1),
    serverIp6: veth6Address(serverId, 2),
  };
}

function veth6Address(serverId: number, host: number): string {
  const idGroups = [2 ** 32, 2 ** 16, 1].map((unit) => Math.floor(serverId / unit) % 0x10000);
  return ipv6Text([...VETH6_GROUPS, ...idGroups, 0, host]);
}

/** The server ids that namespace and link `names` of this prefix belong to, sorted. */
export function serverIdsIn(prefix: string, names: Iterable<string>): number[] {
  const ids = new Set<number>();
  const pattern = new RegExp(`^${prefix}(?:-s)?(\\d+)[hs]?$`);
  for (const name of names) {
    const digits = pattern.exec(name)?.[1];
    if (digits !== undefined) ids.add(Number(digits));
  }
  return [...ids].sort((a, b) => a - b);
}
