import Type, { type Static } from 'typebox';
import { SPEED_LIMIT_MAX_KBPS } from '../domain/devices.ts';

/**
 * The panel ↔ agent wire format. Both sides validate what they receive against these schemas:
 * the agent its request bodies, the panel the agent's answers.
 */
export const ServerSpecSchema = Type.Object({
  serverId: Type.Integer({ minimum: 1 }),
  privateKey: Type.String(),
  listenPort: Type.Integer({ minimum: 1, maximum: 65535 }),
  address: Type.String(),
  mtu: Type.Integer({ minimum: 576, maximum: 9000 }),
});

export const PeerSpecSchema = Type.Object({
  publicKey: Type.String(),
  allowedIp: Type.String(),
  speedLimitKbps: Type.Integer({ minimum: 0, maximum: SPEED_LIMIT_MAX_KBPS }),
});

export const DesiredServerSchema = Type.Object({ server: ServerSpecSchema, peers: Type.Array(PeerSpecSchema) });

/** Peers to add or change and public keys to remove, on a server the agent already runs. */
export const PeerChangeSchema = Type.Object({ upsert: Type.Array(PeerSpecSchema), remove: Type.Array(Type.String()) });

export const DesiredStateSchema = Type.Object({ servers: Type.Array(DesiredServerSchema) });

export const ServerStateSchema = Type.Object({
  serverId: Type.Integer(),
  listenPort: Type.Integer(),
  address: Type.String(),
  mtu: Type.Integer(),
  publicKey: Type.String(),
  peerCount: Type.Integer(),
});

export const AgentStatusSchema = Type.Object({
  bootId: Type.String(),
  version: Type.String(),
  driver: Type.Union([Type.Literal('wireguard'), Type.Literal('dry-run')]),
  serverIds: Type.Array(Type.Integer()),
});

export const ResyncReportSchema = Type.Object({
  applied: Type.Array(Type.Integer()),
  removed: Type.Array(Type.Integer()),
  failures: Type.Array(Type.String()),
});

export const PeerCountersSchema = Type.Object({
  publicKey: Type.String(),
  rxBytes: Type.Integer({ minimum: 0 }),
  txBytes: Type.Integer({ minimum: 0 }),
  lastHandshakeMs: Type.Integer({ minimum: 0 }),
});

/** Every server's peer counters as the node read them. */
export const NodeCountersSchema = Type.Object({
  servers: Type.Array(Type.Object({ serverId: Type.Integer(), peers: Type.Array(PeerCountersSchema) })),
});

export const AgentErrorSchema = Type.Object({ error: Type.String(), failures: Type.Array(Type.String()) });

export type DesiredServer = Static<typeof DesiredServerSchema>;
export type PeerChange = Static<typeof PeerChangeSchema>;
export type NodeCounters = Static<typeof NodeCountersSchema>;
export type AgentStatus = Static<typeof AgentStatusSchema>;
export type ResyncReport = Static<typeof ResyncReportSchema>;
