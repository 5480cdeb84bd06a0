/**
 * A server's peers on its interface: which of the asked-for peers can be applied, what differs from the
 * host, and calls (`wg set` or UAPI, interface-config.ts) that change many peers at once.
 */
import { canonicalNetwork } from '../../domain/addresses.ts';
import { SPEED_LIMIT_MAX_KBPS } from '../../domain/devices.ts';
import { messageOf } from '../../domain/errors.ts';
import { isValidKey } from '../../domain/wireguard-keys.ts';
import type { PeerSpec } from '../driver.ts';
import type { DumpPeer } from './host-readers.ts';
import type { InterfaceConfig, PeerChange, WgTarget } from './interface-config.ts';

/**
 * Peers per `wg set` argv or UAPI request: one call instead of one per peer (a `wg` run is about 1 ms), argv
 * stays well under ARG_MAX, and a refused batch costs at most this many retries.
 */
const PEERS_PER_CALL = 1000;

/** A peer as `wg set` takes it. */
export type WgPeer = { publicKey: string; allowedIps: string };

export interface ValidPeers {
  /** The peers that can be applied, by key, with their allowed ips as `wg` prints them. */
  desired: Map<string, PeerSpec>;
  /** Keys of invalid or contradictory entries: left as they are on the host (limits included), not removed. */
  untouchable: Set<string>;
  /** What was wrong with each of those. */
  failures: string[];
}

export function validPeers(peers: readonly PeerSpec[]): ValidPeers {
  const failures: string[] = [];
  const desired = new Map<string, PeerSpec>();
  const untouchable = new Set<string>();
  for (const peer of peers) {
    const allowedIp = canonicalNetwork(peer.allowedIp);
    const allowedIp6 = peer.allowedIp6 === undefined ? undefined : canonicalNetwork(peer.allowedIp6);
    const kbps = peer.speedLimitKbps;
    const earlier = desired.get(peer.publicKey);
    if (!isValidKey(peer.publicKey)) {
      failures.push(`peer ${JSON.stringify(peer.publicKey)}: not a WireGuard public key`);
    } else if (allowedIp === undefined) {
      failures.push(`peer ${peer.publicKey}: allowed ip ${JSON.stringify(peer.allowedIp)} is not an address/prefix`);
      untouchable.add(peer.publicKey);
    } else if (peer.allowedIp6 !== undefined && !allowedIp6?.includes(':')) {
      const text = JSON.stringify(peer.allowedIp6);
      failures.push(`peer ${peer.publicKey}: allowed ip6 ${text} is not an IPv6 address/prefix`);
      untouchable.add(peer.publicKey);
    } else if (!Number.isInteger(kbps) || kbps < 0 || kbps > SPEED_LIMIT_MAX_KBPS) {
      failures.push(`peer ${peer.publicKey}: speed limit ${kbps} is not 0-${SPEED_LIMIT_MAX_KBPS} kbit/s`);
      untouchable.add(peer.publicKey);
    } else if (
      earlier !== undefined &&
      (earlier.allowedIp !== allowedIp || earlier.allowedIp6 !== allowedIp6 || earlier.speedLimitKbps !== kbps)
    ) {
      failures.push(`peer ${peer.publicKey}: listed twice with different addresses or speed limits`);
      untouchable.add(peer.publicKey);
    } else {
      const spec = { publicKey: peer.publicKey, allowedIp, speedLimitKbps: kbps };
      desired.set(peer.publicKey, allowedIp6 === undefined ? spec : { ...spec, allowedIp6 });
    }
  }
  for (const key of untouchable) desired.delete(key);
  return { desired, untouchable, failures };
}

/** A peer's allowed ips as `wg set` takes them: its address, and its IPv6 one when it has one. */
export function allowedIpsOf(peer: PeerSpec): string {
  return peer.allowedIp6 === undefined ? peer.allowedIp : `${peer.allowedIp},${peer.allowedIp6}`;
}

/** Whether an allowed-ips list `wg` printed holds exactly the peer's addresses (in any order). */
function sameAllowedIps(printed: string | undefined, peer: PeerSpec): boolean {
  const sorted = (list: string) => list.split(',').sort().join(',');
  return printed !== undefined && sorted(printed) === sorted(allowedIpsOf(peer));
}

/** The `wg set` changes that make the host's peers `valid`: removals and additions or changes, by key. */
export function peerChanges(onHost: readonly DumpPeer[], valid: ValidPeers): { removes: string[]; adds: WgPeer[] } {
  const { desired, untouchable } = valid;
  const current = new Map(onHost.map((p) => [p.publicKey, p.allowedIps]));
  const removes = [...current.keys()].filter((k) => !desired.has(k) && !untouchable.has(k)).sort();
  const adds = [...desired.values()]
    .filter((p) => !sameAllowedIps(current.get(p.publicKey), p))
    .sort((a, b) => (a.publicKey < b.publicKey ? -1 : a.publicKey > b.publicKey ? 1 : 0))
    .map((p) => ({ publicKey: p.publicKey, allowedIps: allowedIpsOf(p) }));
  return { removes, adds };
}

/** How the peers on interface `iface` differ from `valid`, one line each (the drift check). */
export function peerProblems(iface: string, onHost: readonly DumpPeer[], valid: ValidPeers): string[] {
  const { desired, untouchable } = valid;
  const found: string[] = [];
  const allowedOnHost = new Map(onHost.map((p) => [p.publicKey, p.allowedIps]));
  for (const [key, allowedIps] of allowedOnHost) {
    const want = desired.get(key);
    const shown = allowedIps || '(none)';
    if (want === undefined && !untouchable.has(key)) {
      found.push(`peer ${key} (${shown}) is on ${iface} but was not applied`);
    } else if (want !== undefined && !sameAllowedIps(allowedIps, want)) {
      found.push(`peer ${key} has allowed ips ${shown}, not ${allowedIpsOf(want)}`);
    }
  }
  for (const key of desired.keys()) if (!allowedOnHost.has(key)) found.push(`peer ${key} is missing from ${iface}`);
  return found;
}

/**
 * Removes, then adds or changes, in calls of up to PEERS_PER_CALL peers (removals first, so an address freed
 * by one peer is not taken back from the peer it moved to). A failed call is retried peer by peer,
 * so one bad peer does not block the others, and each failing peer is reported.
 */
export async function applyPeers(
  config: InterfaceConfig,
  at: WgTarget,
  change: { removes: readonly string[]; adds: readonly WgPeer[] },
  failures: string[],
): Promise<void> {
  const removes = change.removes.map((publicKey): PeerChange => ({ publicKey, remove: true }));
  const batches = [...chunk(removes, PEERS_PER_CALL), ...chunk(change.adds, PEERS_PER_CALL)];
  for (const batch of batches) {
    try {
      await config.changePeers(at, batch);
    } catch (error) {
      if (batch.length === 1) {
        failures.push(`peer ${batch[0]?.publicKey ?? '?'}: ${messageOf(error)}`);
        continue;
      }
      for (const peer of batch) {
        try {
          await config.changePeers(at, [peer]);
        } catch (single) {
          failures.push(`peer ${peer.publicKey}: ${messageOf(single)}`);
        }
      }
    }
  }
}

/** The bare addresses of the single-address entries (IPv4 /32, IPv6 /128) of a comma-separated allowed-ips list. */
export function singleIps(allowedIps: string): string[] {
  return allowedIps
    .split(',')
    .flatMap((entry) => /^(\d+\.\d+\.\d+\.\d+)\/32$|^([0-9a-f:]*:[0-9a-f:.]*)\/128$/.exec(entry.trim())?.slice(1) ?? [])
    .filter((ip): ip is string => ip !== undefined);
}

function chunk<T>(items: readonly T[], size: number): T[][] {
  const chunks: T[][] = [];
  for (let i = 0; i < items.length; i += size) chunks.push(items.slice(i, i + size));
  return chunks;
}
