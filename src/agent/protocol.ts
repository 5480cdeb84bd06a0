import { createHash } from 'node:crypto';
import Type, { type Static, type TSchema } from 'typebox';
import { SPEED_LIMIT_MAX_KBPS } from '../domain/devices.ts';

/**
 * The panel ↔ agent wire format. Both sides validate what they receive against these schemas:
 * the agent its request bodies, the panel the agent's answers.
 */
export const ServerProtocolSchema = Type.Union([Type.Literal('wireguard'), Type.Literal('amneziawg')]);

/** src/domain/protocols.ts `Obfuscation`: the panel checks the values' rules, the agent their types. */
export const ObfuscationSchema = Type.Object({
  jc: Type.Integer({ minimum: 0 }),
  jmin: Type.Integer({ minimum: 0 }),
  jmax: Type.Integer({ minimum: 0 }),
  s1: Type.Integer({ minimum: 0 }),
  s2: Type.Integer({ minimum: 0 }),
  s3: Type.Integer({ minimum: 0 }),
  s4: Type.Integer({ minimum: 0 }),
  h1: Type.String(),
  h2: Type.String(),
  h3: Type.String(),
  h4: Type.String(),
  i1: Type.Optional(Type.String()),
  i2: Type.Optional(Type.String()),
  i3: Type.Optional(Type.String()),
  i4: Type.Optional(Type.String()),
  i5: Type.Optional(Type.String()),
});

export const ServerSpecSchema = Type.Object({
  serverId: Type.Integer({ minimum: 1 }),
  privateKey: Type.String(),
  listenPort: Type.Integer({ minimum: 1, maximum: 65535 }),
  address: Type.String(),
  mtu: Type.Integer({ minimum: 576, maximum: 9000 }),
  // Optional so a panel that predates them still drives a newer agent: absent means off.
  clientToClient: Type.Optional(Type.Boolean()),
  dnsOnServer: Type.Optional(Type.Boolean()),
  // Absent: the server has no IPv6 (a panel that predates it, or IPv6 off).
  address6: Type.Optional(Type.String()),
  routed6: Type.Optional(Type.Boolean()),
  // Absent: wireguard (a panel that predates AmneziaWG). `obfuscation` is present exactly for amneziawg.
  protocol: Type.Optional(ServerProtocolSchema),
  obfuscation: Type.Optional(ObfuscationSchema),
});

export const PeerSpecSchema = Type.Object({
  publicKey: Type.String(),
  allowedIp: Type.String(),
  allowedIp6: Type.Optional(Type.String()),
  speedLimitKbps: Type.Integer({ minimum: 0, maximum: SPEED_LIMIT_MAX_KBPS }),
});

const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/**
 * What a device may still use, as the panel counted it: the node enforces it on its own clock and
 * counters, so a device is cut off in time even while the panel is down.
 */
export const PeerLimitsSchema = Type.Object({
  /** Bytes left in the period once the node's meter of the device stood at `meter`; null: no data limit. */
  remainingBytes: Nullable(Type.Integer({ minimum: 0 })),
  /** The node journal `meter` belongs to; from another journal (another node, lost state) it counts from now. */
  journalId: Type.String(),
  meter: Type.Integer({ minimum: 0 }),
  dataLimit: Type.Integer({ minimum: 0 }),
  /** A monthly count restarts here: the node then allows the whole data limit again by itself. */
  periodEndsAtMs: Nullable(Type.Integer()),
  expiresAtMs: Nullable(Type.Integer()),
  /**
   * What the node does once `remainingBytes` is used: cut the peer off (absent, what an older panel sends) or keep
   * it limited to `throttleKbps` each way, which the panel sends exactly with 'throttle' (without it, a cut).
   */
  quotaAction: Type.Optional(Type.Union([Type.Literal('cut'), Type.Literal('throttle')])),
  throttleKbps: Type.Optional(Type.Integer({ minimum: 1, maximum: SPEED_LIMIT_MAX_KBPS })),
});

/** A device as a peer of its server, with what the node must enforce. */
export const AgentPeerSchema = Type.Object({
  ...PeerSpecSchema.properties,
  deviceId: Type.Integer({ minimum: 1 }),
  limits: PeerLimitsSchema,
});

export const DesiredServerSchema = Type.Object({ server: ServerSpecSchema, peers: Type.Array(AgentPeerSchema) });

/**
 * Peers to add or change and public keys to remove, on a server the agent already runs. The removed
 * peers' last counters are booked first (one read of the server's counters) unless `deleted` says
 * their devices are gone, so their usage no longer matters and the change stays cheap.
 */
export const PeerChangeSchema = Type.Object({
  upsert: Type.Array(AgentPeerSchema),
  remove: Type.Array(Type.String()),
  deleted: Type.Optional(Type.Boolean()),
});

export const DesiredStateSchema = Type.Object({ servers: Type.Array(DesiredServerSchema) });

/** What the node does with a server's IPv6 (docs/dataplane.md, "IPv6"): absent from an older agent means off. */
export const Ipv6ModeSchema = Type.Union([
  Type.Literal('off'),
  Type.Literal('nat66'),
  Type.Literal('routed'),
  Type.Literal('tunnel_only'),
]);

export const ServerStateSchema = Type.Object({
  serverId: Type.Integer(),
  listenPort: Type.Integer(),
  address: Type.String(),
  mtu: Type.Integer(),
  publicKey: Type.String(),
  peerCount: Type.Integer(),
  /** Optional so a panel can read an agent that predates it: absent means off (src/agent/connection.ts). */
  ipv6: Type.Optional(Ipv6ModeSchema),
});

export const AgentStatusSchema = Type.Object({
  bootId: Type.String(),
  version: Type.String(),
  driver: Type.Union([Type.Literal('wireguard'), Type.Literal('dry-run')]),
  serverIds: Type.Array(Type.Integer()),
  /**
   * The addresses of the host's own interfaces with their prefixes (`192.0.2.2/24`), so the panel keeps
   * server subnets off them. Absent when the host could not be read (or from an agent older than this field).
   */
  networks: Type.Optional(Type.Array(Type.String())),
  /** The protocols this node can run servers of. Absent (an agent older than AmneziaWG): wireguard only. */
  protocols: Type.Optional(Type.Array(ServerProtocolSchema)),
});

export const ResyncReportSchema = Type.Object({
  applied: Type.Array(Type.Integer()),
  removed: Type.Array(Type.Integer()),
  failures: Type.Array(Type.String()),
  /**
   * Each applied server's IPv6 as the node applied it. Optional so a panel reads an agent that predates it: the
   * panel then stores off for the servers it applied (src/workers/node-monitor.ts).
   */
  ipv6: Type.Optional(Type.Array(Type.Object({ serverId: Type.Integer(), mode: Ipv6ModeSchema }))),
});

/**
 * One device's usage in a batch, as the device sees it (docs/decisions.md "Usage accounting"): rx downloaded,
 * tx uploaded.
 */
export const UsageEntrySchema = Type.Object({
  deviceId: Type.Integer({ minimum: 1 }),
  rxBytes: Type.Integer({ minimum: 0 }),
  txBytes: Type.Integer({ minimum: 0 }),
  /** The node's running count of the device's bytes after this batch (see PeerLimits). */
  meter: Type.Integer({ minimum: 0 }),
});

/** Usage of one quarter hour (slot), numbered in its journal; kept by the node until acknowledged. */
export const UsageBatchSchema = Type.Object({
  seq: Type.Integer({ minimum: 1 }),
  slotStartMs: Type.Integer(),
  entries: Type.Array(UsageEntrySchema),
});

export const UsageAckSchema = Type.Object({ journalId: Type.String(), seq: Type.Integer({ minimum: 0 }) });

/** The panel's collection call: acknowledges what it stored last time, asks for the rest. */
export const UsageCollectSchema = Type.Object({ ack: Nullable(UsageAckSchema) });

export const UsageReportSchema = Type.Object({
  journalId: Type.String(),
  /** Every batch not yet acknowledged, oldest first. */
  batches: Type.Array(UsageBatchSchema),
  /** Handshakes newer than the ones reported before. */
  handshakes: Type.Array(Type.Object({ deviceId: Type.Integer(), lastHandshakeMs: Type.Integer({ minimum: 0 }) })),
});

/** What the node's interfaces hold: each server's peers by public key (for operators and tests). */
export const NodePeersSchema = Type.Object({
  servers: Type.Array(Type.Object({ serverId: Type.Integer(), peers: Type.Array(Type.String()) })),
});

/**
 * The drift check's answer: per server the agent runs (applied, or found on the host), the digest of
 * the desired state it holds (null when it holds none: not applied since the agent started) and what
 * the host differs in from what the agent applied (empty when the host matches).
 */
export const NodeDigestSchema = Type.Object({
  servers: Type.Array(
    Type.Object({
      serverId: Type.Integer(),
      digest: Nullable(Type.String()),
      discrepancies: Type.Array(Type.String()),
      /**
       * The server's IPv6 as the agent applied it, with its digest. An agent that predates IPv6 sends none and
       * hashes no IPv6 field: the panel compares its digest with `digestWithoutIpv6` (src/workers/drift-repair.ts).
       */
      ipv6: Type.Optional(Ipv6ModeSchema),
    }),
  ),
});

export const AgentErrorSchema = Type.Object({ error: Type.String(), failures: Type.Array(Type.String()) });

export type DesiredServer = Static<typeof DesiredServerSchema>;
export type AgentPeer = Static<typeof AgentPeerSchema>;
export type PeerLimits = Static<typeof PeerLimitsSchema>;
export type PeerChange = Static<typeof PeerChangeSchema>;
export type UsageBatch = Static<typeof UsageBatchSchema>;
export type UsageAck = Static<typeof UsageAckSchema>;
export type UsageReport = Static<typeof UsageReportSchema>;
export type NodePeers = Static<typeof NodePeersSchema>;
export type AgentStatus = Static<typeof AgentStatusSchema>;
export type ResyncReport = Static<typeof ResyncReportSchema>;
export type NodeDigest = Static<typeof NodeDigestSchema>;

/**
 * A server's desired state in 43 characters, computed alike by the panel (from the database) and the
 * agent (from what it was sent), so the two compare without sending the state. Peer order does not
 * count. Left out are the limit fields that differ between the two sides as usage goes on: the
 * remaining bytes, the meter and its journal. What is in it stays equal until the panel changes it:
 * the whole server spec, each peer's key, device, addresses and speed limit, its data limit and
 * whether it has one (a node told "no limit" differs), the end of its monthly period (it changes at
 * a month's start, when the panel resyncs every node) and its expiry. The IPv6 fields count only when
 * present, so a state without IPv6 keeps the digest it had before they existed; the protocol and obfuscation
 * only for an AmneziaWG server, so a WireGuard server keeps its digest; the quota action and throttle speed only
 * for a peer throttled at its limit, so a peer cut off there keeps its digest.
 */
export function desiredDigest(desired: DesiredServer): string {
  const { serverId, privateKey, listenPort, address, mtu, clientToClient, dnsOnServer, address6, routed6 } =
    desired.server;
  const { protocol, obfuscation } = desired.server;
  const peers = desired.peers
    .map((p) => {
      const l = p.limits;
      const limits = [l.dataLimit, l.remainingBytes === null, l.periodEndsAtMs, l.expiresAtMs];
      const throttle = l.quotaAction === 'throttle' ? [l.quotaAction, l.throttleKbps ?? null] : [];
      const ip6 = p.allowedIp6 === undefined ? [] : [p.allowedIp6];
      return JSON.stringify([p.publicKey, p.deviceId, p.allowedIp, p.speedLimitKbps, ...limits, ...throttle, ...ip6]);
    })
    .sort();
  // Absent switches mean off (an older panel's spec): the same digest as false.
  const isolation = [clientToClient === true, dnsOnServer === true];
  const ipv6 = address6 === undefined && routed6 !== true ? [] : [address6 ?? null, routed6 === true];
  // By key, and without unset keys: the panel's object and the agent's parsed one may differ in both.
  const obfuscationEntries = Object.entries(obfuscation ?? {})
    .filter(([, value]) => value !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : 1));
  const amneziawg = protocol === 'amneziawg' ? [protocol, obfuscationEntries] : [];
  const text = JSON.stringify([
    serverId,
    privateKey,
    listenPort,
    address,
    mtu,
    ...isolation,
    ...ipv6,
    ...amneziawg,
    peers,
  ]);
  return createHash('sha256').update(text).digest('base64url');
}

/**
 * The digest an agent that predates IPv6 computes of `desired`: it keeps the IPv6 fields it is sent but hashes
 * none of them, which is `desiredDigest` of the state without them.
 */
export function digestWithoutIpv6(desired: DesiredServer): string {
  const { address6: _address6, routed6: _routed6, ...server } = desired.server;
  return desiredDigest({ server, peers: desired.peers.map(({ allowedIp6: _allowedIp6, ...peer }) => peer) });
}
