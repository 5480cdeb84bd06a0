import { AppError } from './errors.ts';
import { pathBeyondDepth } from './json-depth.ts';
import { type Subnet, deviceRoom, size } from './subnets.ts';

/** Status of spec §3; precedence of DESIGN §3: disabled > expired > limit_reached > active. */
export type DeviceStatus = 'active' | 'disabled' | 'expired' | 'limit_reached';
export type LimitPeriod = 'monthly' | 'total';

export const DEVICE_STATUSES: readonly DeviceStatus[] = ['active', 'disabled', 'expired', 'limit_reached'];
export const NAME_MAX = 64;
export const EXTERNAL_ID_MAX = 255;
export const METADATA_MAX_BYTES = 4096;
/** Objects and arrays nested in metadata, itself counted: plenty for any record, far from a stack's limit. */
export const METADATA_MAX_DEPTH = 32;
export const SPEED_LIMIT_MAX_KBPS = 10_000_000;
/** A device is online while its latest handshake is younger than this (DESIGN §3). */
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
 * Spec §8: any JSON object up to 4 KB (as UTF-8 JSON text), stored exactly as given, nested at most
 * METADATA_MAX_DEPTH deep: the depth is checked first, without recursion, so serialising it cannot overflow.
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
 * The name of a device created without one (DESIGN §3): its external_id, made unique on the server
 * with -2, -3…, cut to fit 64 characters; without an external_id the caller names it device-<id>.
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
 * address, never one in use. Undefined when the subnet is full.
 */
export function lowestFreeAddress(
  subnet: Subnet,
  serverAddress: number,
  isUsed: (address: number) => boolean,
): number | undefined {
  const last = subnet.network + size(subnet) - 2;
  for (let ip = subnet.network + 1; ip <= last; ip++) {
    if (ip !== serverAddress && !isUsed(ip)) return ip;
  }
  return undefined;
}

/** How many devices a server takes: its capacity, never more than its subnet holds. */
export function serverRoom(capacity: number, subnet: Subnet): number {
  return Math.min(capacity, deviceRoom(subnet));
}
