import type { DesiredServer, PeerChange } from '../agent/protocol.ts';
import type { Queryable } from '../store/db.ts';
import { type DeviceRow, listPeerRowsOfServer, type PeerRow } from '../store/devices.ts';
import { listServersOfNode, type ServerRow } from '../store/servers.ts';
import type { UsageService } from './usage.ts';

/**
 * Whether the panel wants the device on its server's node: every enabled device is. The node itself
 * keeps one that expired or used its allowance off the interface until its limits allow it again.
 */
export function onNode(device: Pick<DeviceRow, 'enabled'>): boolean {
  return device.enabled === 1;
}

/** What the node must run for one server: its interface and every enabled device as a peer. */
export function desiredServer(row: ServerRow, devices: readonly PeerRow[], usage: UsageService): DesiredServer {
  return {
    server: {
      serverId: row.id,
      privateKey: row.private_key,
      listenPort: row.listen_port,
      address: row.address,
      mtu: row.mtu,
      clientToClient: row.client_to_client === 1,
      dnsOnServer: row.dns_on_server === 1,
    },
    peers: devices.filter(onNode).map((d) => usage.peerOf(d)),
  };
}

/** One server's desired state, read from the database. */
export async function desiredStateOfServer(db: Queryable, row: ServerRow, usage: UsageService): Promise<DesiredServer> {
  return desiredServer(row, await listPeerRowsOfServer(db, row.id), usage);
}

/** Everything a node must run: sent whole after either side restarts. */
export async function desiredStateOfNode(db: Queryable, nodeId: number, usage: UsageService): Promise<DesiredServer[]> {
  const rows = await listServersOfNode(db, nodeId);
  return Promise.all(
    rows.filter((row) => row.status !== 'deploying').map((row) => desiredStateOfServer(db, row, usage)),
  );
}

/** The change of its server's peers that takes a device from `before` to `after`; undefined when none is needed. */
export function peerChange(
  before: DeviceRow | undefined,
  after: DeviceRow,
  usage: UsageService,
): PeerChange | undefined {
  const wasOn = before !== undefined && onNode(before);
  if (!onNode(after)) return wasOn ? { upsert: [], remove: [after.public_key] } : undefined;
  const peer = usage.peerOf(after);
  if (wasOn && JSON.stringify(usage.peerOf(before)) === JSON.stringify(peer)) return undefined;
  return { upsert: [peer], remove: [] };
}
