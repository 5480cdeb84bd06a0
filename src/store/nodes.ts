import type { Insertable, Selectable } from 'kysely';
import { CompiledShape } from './query-shapes.ts';
import type { Db, Queryable } from './db.ts';
import type { NodeTable } from './schema.ts';

export type NodeRow = Selectable<NodeTable>;

export async function insertNode(db: Queryable, node: Insertable<NodeTable>): Promise<NodeRow> {
  return db.insertInto('nodes').values(node).returningAll().executeTakeFirstOrThrow();
}

export function findNode(db: Queryable, id: number): Promise<NodeRow | undefined> {
  return db.selectFrom('nodes').selectAll().where('id', '=', id).executeTakeFirst();
}

export function findNodeByName(db: Queryable, name: string): Promise<NodeRow | undefined> {
  return db.selectFrom('nodes').selectAll().where('name', '=', name).executeTakeFirst();
}

export function findLocalNode(db: Queryable): Promise<NodeRow | undefined> {
  return db.selectFrom('nodes').selectAll().where('url', 'is', null).executeTakeFirst();
}

export function listNodes(db: Queryable): Promise<NodeRow[]> {
  return db.selectFrom('nodes').selectAll().orderBy('id').execute();
}

/** A node with the number of its servers and devices and the sum of its servers' capacity. */
export type NodeSummaryRow = NodeRow & { server_count: number; device_count: number; capacity: number };

// Counting every device costs more the more there are: while nothing changes, the rows are reused.
const nodeSummaries = new CompiledShape(
  (db) =>
    db
      .selectFrom('nodes')
      .selectAll('nodes')
      .select((eb) => [
        eb
          .selectFrom('servers')
          .select(eb.fn.countAll<number>().as('n'))
          .whereRef('servers.node_id', '=', 'nodes.id')
          .as('server_count'),
        eb
          .selectFrom('servers')
          .select((inner) => inner.fn.coalesce(inner.fn.sum<number>('servers.capacity'), inner.lit(0)).as('n'))
          .whereRef('servers.node_id', '=', 'nodes.id')
          .as('capacity'),
        eb
          .selectFrom('devices')
          .innerJoin('servers', 'servers.id', 'devices.server_id')
          .select(eb.fn.countAll<number>().as('n'))
          .whereRef('servers.node_id', '=', 'nodes.id')
          .as('device_count'),
      ])
      .orderBy('nodes.id'),
  [],
  { reuse: true },
);

/** Every node with its summary, oldest first, in one query. */
export async function listNodeSummaries(db: Db): Promise<NodeSummaryRow[]> {
  return (await nodeSummaries.execute(db)).map((row) => ({
    ...row,
    server_count: Number(row.server_count ?? 0),
    device_count: Number(row.device_count ?? 0),
    capacity: Number(row.capacity ?? 0),
  }));
}

export async function updateNode(db: Queryable, id: number, changes: Partial<Omit<NodeRow, 'id'>>): Promise<void> {
  await db.updateTable('nodes').set(changes).where('id', '=', id).execute();
}

export async function deleteNode(db: Queryable, id: number): Promise<void> {
  await db.deleteFrom('nodes').where('id', '=', id).execute();
}
