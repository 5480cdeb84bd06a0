import type { Insertable, Selectable } from 'kysely';
import type { Queryable } from './db.ts';
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

export async function updateNode(db: Queryable, id: number, changes: Partial<Omit<NodeRow, 'id'>>): Promise<void> {
  await db.updateTable('nodes').set(changes).where('id', '=', id).execute();
}

export async function deleteNode(db: Queryable, id: number): Promise<void> {
  await db.deleteFrom('nodes').where('id', '=', id).execute();
}
