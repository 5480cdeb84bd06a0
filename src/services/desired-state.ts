import type { DesiredServer } from '../agent/protocol.ts';
import type { Queryable } from '../store/db.ts';
import { listServersOfNode, type ServerRow } from '../store/servers.ts';

/** What the node must run for one server. Peers come from the server's devices. */
export function desiredServer(row: ServerRow): DesiredServer {
  return {
    server: { serverId: row.id, privateKey: row.private_key, listenPort: row.listen_port, address: row.address, mtu: row.mtu },
    peers: [],
  };
}

/** Everything a node must run: sent whole after either side restarts. */
export async function desiredStateOfNode(db: Queryable, nodeId: number): Promise<DesiredServer[]> {
  const rows = await listServersOfNode(db, nodeId);
  return rows.filter((row) => row.status !== 'deploying').map(desiredServer);
}
