import { AppError } from './errors.ts';
import { pathBeyondDepth } from './json-depth.ts';
import { type Subnet, deviceRoom, size } from './subnets.ts';
import { type Subnet6, size6 } from './subnets6.ts';

/**
 * Status of docs/api.md "Device status", by precedence (docs/decisions.md "Device status and online"):
 * disabled > expired > limit_reached > active.
 */
export type DeviceStatus = 'active' | 'disabled' | 'expired' | 'limit_reached';
export type LimitPeriod = 'monthly' | 'total';

export const DEVICE_STATUSES: readonly DeviceStatus[] = ['active', 'disabled', 'expired', 'limit_reached'];
export const NAME_MAX = 64;
export const EXTERNAL_ID_MAX = 255;
export const METADATA_MAX_BYTES = 4096;
/** Objects and arrays nested in metadata, itself counted: plenty for any record, far from a stack's limit. */
export const METADATA_MAX_DEPTH = 32;
export const SPEED_LIMIT_MAX_KBPS = 10_000_000;
/**
 * A device is online while its latest handshake is younger than this (docs/decisions.md "Device status and online").
 */
export const ONLINE_WINDOW_MS = 3 * 60 * 1000;

export interface DeviceState {
  enabled: boolean;
  expiresAtMs: number | null;
  limitReached: boolean;
}

export function deviceStatus(state: DeviceState, nowMs: number): DeviceStatus {
  if (!state.enabled) return 'disabled';
  if (state.expiresAtMs !== null && state.expiresAtMs <= nowMs) return 'expired';
  if (state.limitReached) return 'limit_reached';
  return 'active';
}

export function isOnline(lastHandshakeMs: number | null, nowMs: number): boolean {
  return lastHandshakeMs !== null && nowMs - lastHandshakeMs < ONLINE_WINDOW_MS;
}

/**
 * docs/decisions.md "Metadata": any JSON object up to 4 KB (as UTF-8 JSON text), stored exactly as given,
 * nested at most METADATA_MAX_DEPTH deep: the depth is checked first, without recursion, so serialising it
 * cannot overflow.
 */
export function metadataText(metadata: object | null): string | null {
  if (metadata === null) return null;
  if (pathBeyondDepth(metadata, METADATA_MAX_DEPTH) !== undefined) {
    throw new AppError('validation_failed', `metadata nests deeper than ${METADATA_MAX_DEPTH} levels`, {
      metadata: `nested at most ${METADATA_MAX_DEPTH} levels`,
    });
  }
  const text = JSON.stringify(metadata);
  if (Buffer.byteLength(text, 'utf8') > METADATA_MAX_BYTES) {
    throw new AppError('validation_failed', `metadata is over ${METADATA_MAX_BYTES} bytes as JSON`, {
      metadata: `at most ${METADATA_MAX_BYTES} bytes`,
    });
  }
  return text;
}

/**
 * The name of a device created without one (docs/decisions.md "Device names and addresses"): its
 * external_id, made unique on the server with -2, -3…, cut to fit 64 characters; without an external_id the
 * caller names it device-<id>.
 */
export function nameFromExternalId(externalId: string, taken: ReadonlySet<string>): string {
  for (let n = 1; ; n++) {
    const suffix = n === 1 ? '' : `-${n}`;
    const candidate = externalId.slice(0, NAME_MAX - suffix.length) + suffix;
    if (!taken.has(candidate)) return candidate;
  }
}

/**
 * The lowest free address of the subnet for a new device: never the network, broadcast or server
 * address, never one in use. Undefined when the subnet is full. `from`: an address below which every
 * one is known taken (the search starts there, so a caller that tracks it pays for the free ones only).
 */
export function lowestFreeAddress(
  subnet: Subnet,
  serverAddress: number,
  isUsed: (address: number) => boolean,
  from: number = subnet.network + 1,
): number | undefined {
  const last = subnet.network + size(subnet) - 2;
  for (let ip = Math.max(from, subnet.network + 1); ip <= last; ip++) {
    if (ip !== serverAddress && !isUsed(ip)) return ip;
  }
  return undefined;
}

/**
 * The IPv6 address that reads like the device's IPv4 one, so support staff can read the two together: the
 * IPv4 address's octets that are not wholly network bits, each written in decimal as one group of the IPv6
 * address (10.128.0.77 in a /24 is `<subnet6>::77`, 10.200.17.5 in a /20 `<subnet6>::17:5`). Undefined when
 * that lies outside the subnet6 (a /120 holds `::1` to `::ff`, so 10.128.0.200 has none there).
 */
export function sameHostPart6(address: number, subnet: Subnet, subnet6: Subnet6): bigint | undefined {
  const octets = [address >>> 24, (address >>> 16) & 255, (address >>> 8) & 255, address & 255];
  const host = octets
    .slice(Math.floor(subnet.prefix / 8))
    .reduce((n, octet) => (n << 16n) | BigInt(Number.parseInt(String(octet), 16)), 0n);
  return host > 0n && host < size6(subnet6) ? subnet6.network + host : undefined;
}

/**
 * The lowest free IPv6 address of the subnet6 for a new device: never the all-zeros address or the
 * server's, never one in use. Undefined when the subnet6 is full. It looks at one more address than
 * are in use at most, so a /64 costs what its devices number.
 */
export function lowestFreeAddress6(
  subnet6: Subnet6,
  serverAddress6: bigint,
  isUsed: (address: bigint) => boolean,
): bigint | undefined {
  const end = subnet6.network + size6(subnet6);
  for (let ip = subnet6.network + 1n; ip < end; ip++) {
    if (ip !== serverAddress6 && !isUsed(ip)) return ip;
  }
  return undefined;
}

/**
 * A new device's IPv6 address: the one that reads like its IPv4 address (sameHostPart6) when that is free,
 * else the lowest free one. Undefined when the subnet6 is full.
 */
export function deviceAddress6(
  ipv4: { address: number; subnet: Subnet },
  subnet6: Subnet6,
  serverAddress6: bigint,
  isUsed: (address: bigint) => boolean,
): bigint | undefined {
  const readable = sameHostPart6(ipv4.address, ipv4.subnet, subnet6);
  if (readable !== undefined && readable !== serverAddress6 && !isUsed(readable)) return readable;
  return lowestFreeAddress6(subnet6, serverAddress6, isUsed);
}

/** How many devices a server takes: its capacity, never more than its subnet holds. */
export function serverRoom(capacity: number, subnet: Subnet): number {
  return Math.min(capacity, deviceRoom(subnet));
}
