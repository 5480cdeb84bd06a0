import type { Insertable, Selectable } from 'kysely';
import { CompiledShape, type ReusedRows, ReusedShape } from './query-shapes.ts';
import type { Db, Queryable } from './db.ts';
import type { NodeTable } from './schema.ts';

export type NodeRow = Selectable<NodeTable>;

export async function insertNode(db: Queryable, node: Insertable<NodeTable>): Promise<NodeRow> {
  return db.insertInto('nodes').values(node).returningAll().executeTakeFirstOrThrow();
}

export function findNode(db: Queryable, id: number): Promise<NodeRow | undefined> {
  return db.selectFrom('nodes').selectAll().where('id', '=', id).executeTakeFirst();
}

// Read with the servers of a page of devices (findServerShared), reused while nothing is committed.
const nodeRowById = new ReusedShape(
  (db, id: number) => db.selectFrom('nodes').selectAll().where('id', '=', id),
  [-1001],
);

/** findNode outside a transaction; the row may be shared with other readers, so it must not be changed. */
export async function findNodeShared(db: Db, id: number): Promise<Readonly<NodeRow> | undefined> {
  const [row] = (await nodeRowById.execute(db, id)).rows;
  return row;
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

/** Nodes with their summary: the servers' own counts summed (a few rows per node), no device counted. */
function nodeSummaryQuery(db: Db) {
  return db
    .selectFrom('nodes')
    .leftJoin('servers', 'servers.node_id', 'nodes.id')
    .selectAll('nodes')
    .select((eb) => [
      eb.fn.count<number>('servers.id').as('server_count'),
      eb.fn.coalesce(eb.fn.sum<number>('servers.capacity'), eb.lit(0)).as('capacity'),
      eb.fn.coalesce(eb.fn.sum<number>('servers.device_count'), eb.lit(0)).as('device_count'),
    ])
    .groupBy('nodes.id');
}

// GET /nodes reads them on every request: a join and a sum per node cost more than checking that nothing was
// committed, so the rows are reused until something is (ReusedShape).
const nodeSummaries = new ReusedShape((db) => nodeSummaryQuery(db).orderBy('nodes.id'), []);

const nodeSummaryById = new CompiledShape((db, id: number) => nodeSummaryQuery(db).where('nodes.id', '=', id), [-1001]);

/**
 * Every node with its summary, oldest first, in one query: the same row objects while nothing is committed, so
 * their views can be kept (the counts are numbers as they come: SQLite's integers, PostgreSQL's INT8 parsed).
 */
export function listNodeSummaries(db: Db): Promise<ReusedRows<NodeSummaryRow>> {
  return nodeSummaries.execute(db);
}

/** One node with its summary, by its id (the primary key and the servers' node index). */
export async function findNodeSummary(db: Db, id: number): Promise<Readonly<NodeSummaryRow> | undefined> {
  const [row] = await nodeSummaryById.execute(db, id);
  return row;
}

export async function updateNode(db: Queryable, id: number, changes: Partial<Omit<NodeRow, 'id'>>): Promise<void> {
  await db.updateTable('nodes').set(changes).where('id', '=', id).execute();
}

export async function deleteNode(db: Queryable, id: number): Promise<void> {
  await db.deleteFrom('nodes').where('id', '=', id).execute();
}

/** Nodes by status, for the metrics. */
export async function countNodesByStatus(db: Queryable): Promise<Map<NodeRow['status'], number>> {
  const rows = await db
    .selectFrom('nodes')
    .select((eb) => ['status', eb.fn.countAll<number>().as('nodes')])
    .groupBy('status')
    .execute();
  return new Map(rows.map((r) => [r.status, Number(r.nodes)]));
}
