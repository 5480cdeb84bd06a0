import type { AgentPeer, PeerLimits } from '../../src/agent/protocol.ts';
import { generateKeyPair } from '../../src/domain/wireguard-keys.ts';

/** Server 1 on 10.9.0.0/24, as a panel would send it to an agent. */
export const TEST_SERVER = {
  serverId: 1,
  privateKey: generateKeyPair().privateKey,
  listenPort: 51820,
  address: '10.9.0.1/24',
  mtu: 1420,
};

/** No data limit, no expiry. */
export const NO_LIMITS: PeerLimits = {
  remainingBytes: null,
  journalId: '',
  meter: 0,
  dataLimit: 0,
  periodEndsAtMs: null,
  expiresAtMs: null,
};

/** Device `deviceId` as a peer of TEST_SERVER, with a new key and the given limits. */
export function testPeer(deviceId: number, limits: Partial<PeerLimits> = {}): AgentPeer {
  const allowedIp = `10.9.0.${deviceId + 1}/32`;
  return {
    deviceId,
    publicKey: generateKeyPair().publicKey,
    allowedIp,
    speedLimitKbps: 0,
    limits: { ...NO_LIMITS, ...limits },
  };
}
