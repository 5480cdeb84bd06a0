import { ipv6Groups, ipv6Text } from './addresses.ts';
import { AppError } from './errors.ts';

/**
 * IPv6 subnets as 128-bit integers, beside the IPv4 ones of subnets.ts. A server's subnet6 holds its own
 * address (the first host unless given) and one /128 per device; the all-zeros address (the subnet-router
 * anycast address of RFC 4291 §2.6.1) is never handed out.
 */
export interface Subnet6 {
  network: bigint;
  prefix: number;
}

const BITS = 128;
/** A /64 is what SLAAC and every client expect of a LAN; the default of each server. */
export const DEFAULT_PREFIX6 = 64;
export const MIN_PREFIX6 = 64;
/** A /120 (254 devices) is the smallest subnet6 taken: smaller ones hold fewer devices than a default /24. */
export const MAX_PREFIX6 = 120;
/** The panel's own ULA prefix (RFC 4193 §3.1: fd00::/8 and a 40-bit random Global ID) holds the default /64s. */
export const ULA_PREFIX = 48;
/** Addresses of a subnet6 no device can have: the all-zeros one and the server's own. */
export const RESERVED_ADDRESSES6 = 2;

/** Unique local addresses (RFC 4193): private, like the IPv4 server spaces; reached through NAT66. */
export const ULA_SPACE: Subnet6 = parseNetwork6('fc00::/7');
/** Global unicast (RFC 4291 §2.4): a prefix the operator owns and routes to the node, used without NAT. */
export const GLOBAL_UNICAST: Subnet6 = parseNetwork6('2000::/3');

/** The address as a 128-bit integer, or undefined when it is not an IPv6 address. */
export function ipv6ToBigInt(text: string): bigint | undefined {
  const groups = ipv6Groups(text);
  return groups?.reduce((n, group) => (n << 16n) | BigInt(group), 0n);
}

/** The address in RFC 5952 text, as `wg` and `ip` print it (`fd00::2`): the one form it is stored in. */
export function bigIntToIpv6(n: bigint): string {
  return ipv6Text(Array.from({ length: 8 }, (_, i) => Number((n >> BigInt(112 - 16 * i)) & 0xffffn)));
}

export function size6(subnet: Subnet6): bigint {
  return 1n << BigInt(BITS - subnet.prefix);
}

export function subnet6Of(address: bigint, prefix: number): Subnet6 {
  return { network: address - (address % (1n << BigInt(BITS - prefix))), prefix };
}

export function formatSubnet6(subnet: Subnet6): string {
  return `${bigIntToIpv6(subnet.network)}/${subnet.prefix}`;
}

export function overlaps6(a: Subnet6, b: Subnet6): boolean {
  return a.network < b.network + size6(b) && b.network < a.network + size6(a);
}

/** True when `inner` lies wholly inside `outer`. */
export function within6(inner: Subnet6, outer: Subnet6): boolean {
  return outer.prefix <= inner.prefix && overlaps6(outer, inner);
}

/** A global prefix is routed to the node as it is (`routed6`); a ULA one leaves the node through NAT66. */
export function isGlobal6(subnet: Subnet6): boolean {
  return within6(subnet, GLOBAL_UNICAST);
}

/** How many devices a subnet6 holds, as a number no larger than any server's capacity needs. */
export function deviceRoom6(subnet: Subnet6): number {
  const room = size6(subnet) - BigInt(RESERVED_ADDRESSES6);
  return room > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(room);
}

/** The server's own address in the subnet6 by default: the first host. */
export function serverAddress6Of(subnet: Subnet6): bigint {
  return subnet.network + 1n;
}

/** A network as stored or written in code, e.g. `fd00::/64`; throws on anything else. */
export function parseNetwork6(cidr: string): Subnet6 {
  const [ip = '', prefix = ''] = cidr.split('/');
  const address = ipv6ToBigInt(ip);
  if (address === undefined || !/^[0-9]{1,3}$/.test(prefix) || Number(prefix) > BITS) {
    throw new Error(`${cidr} is not an IPv6 network`);
  }
  return subnet6Of(address, Number(prefix));
}

/** An address with its prefix as stored (`fd00::1/64`): the address and the subnet it lies in. */
export function parseStoredCidr6(cidr: string): { address: bigint; subnet: Subnet6 } {
  const [ip = ''] = cidr.split('/');
  const address = ipv6ToBigInt(ip);
  if (address === undefined) throw new Error(`${cidr} is not an IPv6 address with a prefix`);
  return { address, subnet: parseNetwork6(cidr) };
}

/**
 * A server's `address6` as a caller gives it: an IPv6 address with a prefix from /64 to /120, e.g.
 * `fd12:3456:789a:1::1/64`. Written with its host bits zero (`fd12:3456:789a:1::/64`) it names the subnet and
 * the server takes its first address. The subnet must be unique local (fc00::/7) or global unicast (2000::/3).
 */
export function parseServerAddress6(cidr: string): { address: bigint; subnet: Subnet6 } {
  const match = /^([0-9A-Fa-f:.]+)\/([0-9]{1,3})$/.exec(cidr);
  const address = match?.[1] === undefined ? undefined : ipv6ToBigInt(match[1]);
  const prefix = Number(match?.[2]);
  if (address === undefined || prefix < MIN_PREFIX6 || prefix > MAX_PREFIX6) {
    throw new AppError(
      'validation_failed',
      `address6 must be an IPv6 CIDR from /${MIN_PREFIX6} to /${MAX_PREFIX6} such as fd12:3456:789a:1::1/64`,
      { address6: `IPv6 CIDR /${MIN_PREFIX6} to /${MAX_PREFIX6}` },
    );
  }
  const subnet = subnet6Of(address, prefix);
  if (!within6(subnet, ULA_SPACE) && !isGlobal6(subnet)) {
    throw new AppError(
      'validation_failed',
      `subnet6 ${formatSubnet6(subnet)} is neither unique local (fc00::/7) nor global unicast (2000::/3)`,
      { address6: 'not in fc00::/7 (unique local) or 2000::/3 (a global prefix routed to the node)' },
    );
  }
  return { address: address === subnet.network ? serverAddress6Of(subnet) : address, subnet };
}

/** The /48 of RFC 4193 §3.2 from 40 random bits (5 bytes): fd00::/8 followed by them. */
export function ulaPrefixOf(globalId: Uint8Array): Subnet6 {
  if (globalId.length !== 5) throw new Error('a ULA Global ID is 40 bits (5 bytes)');
  const id = globalId.reduce((n, byte) => (n << 8n) | BigInt(byte), 0n);
  return { network: (0xfdn << 120n) | (id << 80n), prefix: ULA_PREFIX };
}

/**
 * The IPv6 networks of a node's interfaces (`2001:db8::2/64`), as subnets; IPv4 and malformed entries are
 * skipped (ipv4Networks in subnets.ts takes those).
 */
export function ipv6Networks(cidrs: readonly string[]): Subnet6[] {
  return cidrs.flatMap((cidr) => {
    try {
      return cidr.includes(':') ? [parseNetwork6(cidr)] : [];
    } catch {
      return [];
    }
  });
}

/** The first subnet of `prefix` inside `pool` that overlaps none of `taken`, or undefined. */
export function firstFreeSubnet6(pool: Subnet6, prefix: number, taken: readonly Subnet6[]): Subnet6 | undefined {
  const step = 1n << BigInt(BITS - prefix);
  const sorted = [...taken].sort((a, b) => (a.network < b.network ? -1 : a.network > b.network ? 1 : 0));
  let candidate = pool.network;
  const end = pool.network + size6(pool);
  while (candidate + step <= end) {
    const block: Subnet6 = { network: candidate, prefix };
    const clash = sorted.find((t) => overlaps6(t, block));
    if (!clash) return block;
    // Jump past the clashing subnet, aligned to this prefix.
    const after = clash.network + size6(clash);
    candidate = ((after + step - 1n) / step) * step;
  }
  return undefined;
}
