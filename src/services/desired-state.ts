import type { ServerSpec } from '../agent/driver.ts';
import type { AgentPeer, DesiredServer, PeerChange } from '../agent/protocol.ts';
import { isGlobal6, parseNetwork6 } from '../domain/subnets6.ts';
import type { Queryable } from '../store/db.ts';
import { type DeviceRow, listPeerRowsOfServer, type PeerRow } from '../store/devices.ts';
import { listServersOfNode, type ServerRow, serverObfuscation } from '../store/servers.ts';
import type { UsageService } from './usage.ts';

/**
 * Whether the panel wants the device on its server's node: every enabled device is. The node itself
 * keeps one that expired or used its allowance off the interface until its limits allow it again.
 */
export function onNode(device: Pick<DeviceRow, 'enabled'>): boolean {
  return device.enabled === 1;
}

/**
 * The node's spec of a server: its interface, with its IPv6 address when it has one (routed when global), and its
 * protocol and obfuscation for an AmneziaWG server.
 */
export function serverSpec(row: ServerRow): ServerSpec {
  const spec: ServerSpec = {
    serverId: row.id,
    privateKey: row.private_key,
    listenPort: row.listen_port,
    address: row.address,
    mtu: row.mtu,
    clientToClient: row.client_to_client === 1,
    dnsOnServer: row.dns_on_server === 1,
  };
  // A WireGuard server's spec has neither key, so its digest is what it was before AmneziaWG.
  const obfuscation = serverObfuscation(row);
  if (obfuscation !== null) {
    spec.protocol = row.protocol;
    spec.obfuscation = obfuscation;
  }
  if (row.address6 === null || row.subnet6 === null) return spec;
  return { ...spec, address6: row.address6, routed6: isGlobal6(parseNetwork6(row.subnet6)) };
}

/** What the node must run for one server: its interface and every enabled device as a peer. */
export function desiredServer(row: ServerRow, devices: readonly PeerRow[], usage: UsageService): DesiredServer {
  return { server: serverSpec(row), peers: devices.filter(onNode).map((d) => usage.peerOf(d)) };
}

/** Device rows read at once while a server's desired state is built: only its peers are held, not its rows. */
const PEER_PAGE = 1_000;

/** One server's desired state, read from the database a page of devices at a time. */
export async function desiredStateOfServer(db: Queryable, row: ServerRow, usage: UsageService): Promise<DesiredServer> {
  const peers: AgentPeer[] = [];
  for (let afterId = 0; ; ) {
    const page = await listPeerRowsOfServer(db, row.id, afterId, PEER_PAGE);
    for (const device of page) if (onNode(device)) peers.push(usage.peerOf(device));
    const last = page.at(-1);
    if (last === undefined || page.length < PEER_PAGE) break;
    afterId = last.id;
  }
  return { server: serverSpec(row), peers };
}

/**
 * Everything a node must run (sent whole after either side restarts), one server at a time: a server's state is
 * built when the one before it has been sent, so a node's devices are never all in memory at once.
 */
export async function* desiredStateOfNode(
  db: Queryable,
  nodeId: number,
  usage: UsageService,
): AsyncGenerator<DesiredServer> {
  for (const row of await listServersOfNode(db, nodeId)) {
    if (row.status !== 'deploying') yield await desiredStateOfServer(db, row, usage);
  }
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
