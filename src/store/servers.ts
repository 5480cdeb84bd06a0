import type { Insertable, Selectable, Updateable } from 'kysely';
import type { PageRequest } from '../domain/paging.ts';
import type { Queryable } from './db.ts';
import type { ServerTable } from './schema.ts';

export type ServerRow = Selectable<ServerTable>;

export async function insertServer(db: Queryable, server: Insertable<ServerTable>): Promise<ServerRow> {
  return db.insertInto('servers').values(server).returningAll().executeTakeFirstOrThrow();
}

export function findServer(db: Queryable, id: number): Promise<ServerRow | undefined> {
  return db.selectFrom('servers').selectAll().where('id', '=', id).executeTakeFirst();
}

/** Oldest first, `limit + 1` rows (see toPage). */
export function listServers(db: Queryable, filter: { country?: string }, page: PageRequest): Promise<ServerRow[]> {
  let query = db.selectFrom('servers').selectAll().where('id', '>', page.afterId);
  if (filter.country !== undefined) query = query.where('country', '=', filter.country);
  return query.orderBy('id').limit(page.limit + 1).execute();
}

export function listServersOfNode(db: Queryable, nodeId: number): Promise<ServerRow[]> {
  return db.selectFrom('servers').selectAll().where('node_id', '=', nodeId).orderBy('id').execute();
}

/** Subnets, ports and capacity of every server: for clashes, default subnets and node capacity. */
export function listServerAllocations(db: Queryable): Promise<Pick<ServerRow, 'id' | 'node_id' | 'subnet' | 'listen_port' | 'capacity'>[]> {
  return db.selectFrom('servers').select(['id', 'node_id', 'subnet', 'listen_port', 'capacity']).execute();
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
