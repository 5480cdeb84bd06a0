import { effectiveServerStatus, type Ipv6Status, type ServerStatus } from '../domain/servers.ts';
import type { Obfuscation, ServerProtocol } from '../domain/protocols.ts';
import type { NodeRow } from '../store/nodes.ts';
import { type ServerRow, type ServerWithNode, serverObfuscation, stringArray } from '../store/servers.ts';

/** A server as docs/api.md "Servers" shows it. */
export interface ServerView {
  id: number;
  name: string;
  node: { id: number; name: string };
  country: string;
  city: string;
  status: ServerStatus;
  protocol: ServerProtocol;
  /** The AmneziaWG parameters; null for WireGuard. */
  obfuscation: Obfuscation | null;
  endpoint: string;
  listen_port: number;
  public_key: string;
  address: string;
  subnet: string;
  address6: string | null;
  subnet6: string | null;
  ipv6: Ipv6Status;
  dns: string[];
  dns_on_server: boolean;
  client_to_client: boolean;
  mtu: number;
  persistent_keepalive: number;
  client_allowed_ips: string[];
  device_count: number;
  capacity: number;
  created_at: string;
}

/** The server as shown: its status is also its node's (a server of an offline node is node_offline). */
export function serverView(
  row: ServerRow,
  node: Pick<NodeRow, 'id' | 'name' | 'status'>,
  deviceCount: number | null,
): ServerView {
  return {
    id: row.id,
    name: row.name,
    node: { id: node.id, name: node.name },
    country: row.country,
    city: row.city,
    status: effectiveServerStatus(row.status, node.status === 'online'),
    protocol: row.protocol,
    obfuscation: serverObfuscation(row),
    endpoint: row.endpoint,
    listen_port: row.listen_port,
    public_key: row.public_key,
    address: row.address,
    subnet: row.subnet,
    address6: row.address6,
    subnet6: row.subnet6,
    ipv6: row.ipv6,
    dns: stringArray(row.dns),
    dns_on_server: row.dns_on_server === 1,
    client_to_client: row.client_to_client === 1,
    mtu: row.mtu,
    persistent_keepalive: row.persistent_keepalive,
    client_allowed_ips: stringArray(row.client_allowed_ips),
    device_count: Number(deviceCount ?? 0),
    capacity: row.capacity,
    created_at: row.created_at,
  };
}

/** The view of a server row read with its node and device count (findServerWithNode, listServers). */
export function listedServerView(row: Readonly<ServerWithNode>): ServerView {
  return serverView(row, { id: row.node_id, name: row.node_name, status: row.node_status }, row.device_count);
}
