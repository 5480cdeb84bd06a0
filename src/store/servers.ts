import type { Insertable, Selectable, Updateable } from 'kysely';
import type { PageRequest } from '../domain/paging.ts';
import { type Obfuscation, parseObfuscation } from '../domain/protocols.ts';
import type { Ipv6Status } from '../domain/servers.ts';
import { ReusedPageShape, type ReusedRows, ReusedShape } from './query-shapes.ts';
import type { Db, Dialect, Queryable } from './db.ts';
import type { NodeRow } from './nodes.ts';
import type { ServerTable } from './schema.ts';

export type ServerRow = Selectable<ServerTable>;

/** A JSON array of strings as a server row stores it (dns, client_allowed_ips). */
export function stringArray(json: string): string[] {
  const value: unknown = JSON.parse(json);
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

/** A server's AmneziaWG parameters; null for a WireGuard server. */
export function serverObfuscation(row: Pick<ServerRow, 'protocol' | 'obfuscation'>): Obfuscation | null {
  return row.protocol === 'amneziawg' && row.obfuscation !== null ? parseObfuscation(row.obfuscation) : null;
}

export async function insertServer(db: Queryable, server: Insertable<ServerTable>): Promise<ServerRow> {
  return db.insertInto('servers').values(server).returningAll().executeTakeFirstOrThrow();
}

export function findServer(db: Queryable, id: number): Promise<ServerRow | undefined> {
  return db.selectFrom('servers').selectAll().where('id', '=', id).executeTakeFirst();
}

// A page of devices reads its servers on every request: while nothing has been committed, the rows
// (opened from the sealed store once) are reused (ReusedShape).
const serverRowById = new ReusedShape(
  (db, id: number) => db.selectFrom('servers').selectAll().where('id', '=', id),
  [-1001],
);

/** findServer outside a transaction; the row may be shared with other readers, so it must not be changed. */
export async function findServerShared(db: Db, id: number): Promise<Readonly<ServerRow> | undefined> {
  const [row] = (await serverRowById.execute(db, id)).rows;
  return row;
}

export type ServerWithNode = ServerRow & {
  node_name: string;
  node_status: NodeRow['status'];
};

function serversWithNodes(db: Db) {
  return db
    .selectFrom('servers')
    .innerJoin('nodes', 'nodes.id', 'servers.node_id')
    .selectAll('servers')
    .select(['nodes.name as node_name', 'nodes.status as node_status']);
}

/** One server with its node's name and status. */
export async function findServerWithNode(db: Db, id: number): Promise<ServerWithNode | undefined> {
  const [row] = (await serverById.execute(db, id)).rows;
  return row;
}

// Each row counts the server's devices, which costs more the more there are: while nothing has been
// committed, the rows are reused (ReusedShape).
const serverById = new ReusedShape((db, id: number) => serversWithNodes(db).where('servers.id', '=', id), [-1001]);

const serverPage = new ReusedPageShape(
  (db, limit, afterId: number, country: string | undefined) => {
    let query = serversWithNodes(db).where('servers.id', '>', afterId);
    if (country !== undefined) query = query.where('servers.country', '=', country);
    return query.orderBy('servers.id').limit(limit);
  },
  [-1001, '\u0000country'],
);

/** Oldest first, `limit + 1` rows (see toPage), each with its node's name and status. */
export function listServers(
  db: Db,
  filter: { country?: string },
  page: PageRequest,
): Promise<ReusedRows<ServerWithNode>> {
  return serverPage.execute(db, page.limit + 1, page.afterId, filter.country);
}

export function listServersOfNode(db: Queryable, nodeId: number): Promise<ServerRow[]> {
  return db.selectFrom('servers').selectAll().where('node_id', '=', nodeId).orderBy('id').execute();
}

/** Subnets, ports and capacity of every server: for clashes, default subnets and node capacity. */
export function listServerAllocations(
  db: Queryable,
): Promise<Pick<ServerRow, 'id' | 'node_id' | 'subnet' | 'subnet6' | 'listen_port' | 'capacity'>[]> {
  return db.selectFrom('servers').select(['id', 'node_id', 'subnet', 'subnet6', 'listen_port', 'capacity']).execute();
}

/** Stores what the node reported doing with the server's IPv6; a server deleted meanwhile is left alone. */
export async function setServerIpv6(db: Queryable, id: number, ipv6: Ipv6Status): Promise<void> {
  await db.updateTable('servers').set({ ipv6 }).where('id', '=', id).where('ipv6', '!=', ipv6).execute();
}

export async function updateServer(db: Queryable, id: number, changes: Updateable<ServerTable>): Promise<ServerRow> {
  return db.updateTable('servers').set(changes).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}

export async function deleteServer(db: Queryable, id: number): Promise<void> {
  await db.deleteFrom('servers').where('id', '=', id).execute();
}

export async function deleteServersDeploying(db: Queryable): Promise<void> {
  await db.deleteFrom('servers').where('status', '=', 'deploying').execute();
}

/**
 * Holds the servers' rows until the transaction ends, lowest id first (so two panels locking the same
 * servers never wait on each other in a circle), and gives their device counts as they are under the lock:
 * concurrent creates on one server allocate addresses one after another, and every change of a server's
 * `device_count` happens under this lock. SQLite transactions here are exclusive already.
 */
export async function lockServers(
  db: Queryable,
  ids: readonly number[],
  dialect: Dialect,
): Promise<Map<number, number>> {
  if (ids.length === 0) return new Map();
  const query = db
    .selectFrom('servers')
    .select(['id', 'device_count'])
    .where('id', 'in', [...new Set(ids)])
    .orderBy('id');
  const rows = await (dialect === 'postgres' ? query.forUpdate() : query).execute();
  return new Map(rows.map((row) => [row.id, row.device_count]));
}

/** Adds `delta` (negative: removes) to the server's device count; callers hold its lock (lockServers). */
export async function addToDeviceCount(db: Queryable, serverId: number, delta: number): Promise<void> {
  if (delta === 0) return;
  await db
    .updateTable('servers')
    .set((eb) => ({ device_count: eb('device_count', '+', delta) }))
    .where('id', '=', serverId)
    .execute();
}

/** Running servers with their device count, for `server_id: auto`. */
export function listRunningServers(db: Queryable): Promise<ServerRow[]> {
  return db.selectFrom('servers').selectAll().where('status', '=', 'running').orderBy('id').execute();
}

/** Servers by protocol, stored status and their node's status, for the metrics (a few rows of a small table). */
export async function countServersByStatus(db: Queryable): Promise<
  {
    protocol: ServerRow['protocol'];
    status: ServerRow['status'];
    node_status: NodeRow['status'];
    servers: number;
  }[]
> {
  const rows = await db
    .selectFrom('servers')
    .innerJoin('nodes', 'nodes.id', 'servers.node_id')
    .select((eb) => [
      'servers.protocol',
      'servers.status',
      'nodes.status as node_status',
      eb.fn.countAll<number>().as('servers'),
    ])
    .groupBy(['servers.protocol', 'servers.status', 'nodes.status'])
    .execute();
  return rows.map((r) => ({ ...r, servers: Number(r.servers) }));
}
