/**
 * Why a node took a peer off its interface on its own (Agent#enforce): the device statuses of
 * docs/api.md "Device status"; or `throttled`: its allowance was used and it stays, at its throttle speed.
 */
export type CutoffReason = 'expired' | 'limit_reached' | 'throttled';
export const CUTOFF_REASONS: readonly CutoffReason[] = ['expired', 'limit_reached', 'throttled'];

/** `server`: a server's whole desired state (PUT /v1/servers/:id, a resync); `peers`: a change of some peers. */
export type ApplyKind = 'server' | 'peers';
export const APPLY_KINDS: readonly ApplyKind[] = ['server', 'peers'];

/**
 * What a node agent tells its metrics as it works (src/main/metrics.ts keeps them for Prometheus). Bytes are
 * from the device's side, as the API counts them: rx is what the device received.
 */
export interface NodeObserver {
  /** The peers a server's interface holds now; undefined once the server is gone from the node. */
  serverPeers(serverId: number, peers: number | undefined): void;
  /** Peers the panel added, changed or removed, one for each peer named in a change. */
  peersChanged(count: number): void;
  /** A peer left its interface because its device expired or used its allowance, or was throttled instead. */
  cutOff(reason: CutoffReason): void;
  /** Bytes metered from the interface counters. */
  metered(rxBytes: number, txBytes: number): void;
  /** Desired state applied to the host, and how long the driver and the agent took (not the wait in the queue). */
  applied(kind: ApplyKind, seconds: number): void;
  /** Usage batches sealed for the panel and not acknowledged yet. */
  unacknowledgedBatches(count: number): void;
}

/** For an agent whose process has no metrics listener. */
export const UNOBSERVED_NODE: NodeObserver = {
  serverPeers: () => {},
  peersChanged: () => {},
  cutOff: () => {},
  metered: () => {},
  applied: () => {},
  unacknowledgedBatches: () => {},
};
