import type { PeerSpec } from '../agent/driver.ts';
import type { DesiredServer } from '../agent/protocol.ts';
import { isAdmitted } from '../domain/devices.ts';
import type { Queryable } from '../store/db.ts';
import { type DeviceRow, listDevicesOfServer } from '../store/devices.ts';
import { listServersOfNode, type ServerRow } from '../store/servers.ts';

/** A device as a peer of its server, with its speed limit. */
export function peerOf(device: Pick<DeviceRow, 'public_key' | 'address' | 'speed_limit'>): PeerSpec {
  return { publicKey: device.public_key, allowedIp: `${device.address}/32`, speedLimitKbps: device.speed_limit };
}

/** Whether the device may be on its server now: enabled, not expired, not over its limit. */
export function admitted(device: Pick<DeviceRow, 'enabled' | 'expires_at'>, nowMs: number): boolean {
  return isAdmitted({ enabled: device.enabled === 1, expiresAtMs: device.expires_at === null ? null : Date.parse(device.expires_at), limitReached: false }, nowMs);
}

/** What the node must run for one server: its interface and every admitted device as a peer. */
export function desiredServer(row: ServerRow, devices: readonly DeviceRow[], nowMs: number): DesiredServer {
  return {
    server: { serverId: row.id, privateKey: row.private_key, listenPort: row.listen_port, address: row.address, mtu: row.mtu },
    peers: devices.filter((d) => admitted(d, nowMs)).map(peerOf),
  };
}

/** One server's desired state, read from the database. */
export async function desiredStateOfServer(db: Queryable, row: ServerRow, nowMs: number): Promise<DesiredServer> {
  return desiredServer(row, await listDevicesOfServer(db, row.id), nowMs);
}

/** Everything a node must run: sent whole after either side restarts. */
export async function desiredStateOfNode(db: Queryable, nodeId: number, nowMs: number): Promise<DesiredServer[]> {
  const rows = await listServersOfNode(db, nodeId);
  return Promise.all(rows.filter((row) => row.status !== 'deploying').map((row) => desiredStateOfServer(db, row, nowMs)));
}
