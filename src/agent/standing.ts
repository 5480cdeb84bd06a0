/**
 * Where the agent keeps a device's peer (Agent#enforce): on its interface as the panel sent it, on it at its
 * throttle speed once its allowance is used (limits `quotaAction: 'throttle'`), or off it, and why. Pure.
 */
import type { PeerSpec } from './driver.ts';
import type { CutoffReason } from './metrics.ts';
import type { AgentPeer } from './protocol.ts';

export type Standing = 'on' | CutoffReason;

export function isOn(standing: Standing): boolean {
  return standing === 'on' || standing === 'throttled';
}

/** The peer as its interface holds it: limited to its throttle speed each way while it stands throttled. */
export function specOf(peer: AgentPeer, standing: Standing = 'on'): PeerSpec {
  const speedLimitKbps = standing === 'throttled' ? (peer.limits.throttleKbps ?? 0) : peer.speedLimitKbps;
  const spec = { publicKey: peer.publicKey, allowedIp: peer.allowedIp, speedLimitKbps };
  return peer.allowedIp6 === undefined ? spec : { ...spec, allowedIp6: peer.allowedIp6 };
}

/**
 * Takes the peers whose standing is no longer throttled out of `throttled` (their kernel allowance is set again
 * before their own speed returns) and answers those to add once their throttle is applied: until then they keep
 * their allowance, which drops what passes the limit, so they never run at their own speed past it.
 */
export function unthrottle(throttled: Set<string>, standings: readonly (readonly [string, Standing])[]): string[] {
  for (const [key, standing] of standings) if (standing !== 'throttled') throttled.delete(key);
  return standings.filter(([, standing]) => standing === 'throttled').map(([key]) => key);
}
