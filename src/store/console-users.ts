import { type Selectable, sql } from 'kysely';
import { nameKey } from '../domain/console-users.ts';
import { isPostgres, type Queryable } from './db.ts';
import type { ConsoleUserTable } from './schema.ts';

export type ConsoleUserRow = Selectable<ConsoleUserTable>;

export interface NewConsoleUser {
  name: string;
  role: ConsoleUserRow['role'];
  passwordHash: string;
  createdAt: string;
}

export function insertConsoleUser(db: Queryable, user: NewConsoleUser): Promise<ConsoleUserRow> {
  return db
    .insertInto('console_users')
    .values({
      name: user.name,
      role: user.role,
      password_hash: user.passwordHash,
      created_at: user.createdAt,
      updated_at: user.createdAt,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** The user of this name, whatever the case it is written in (the unique index is on lower(name)). */
export function findConsoleUserByName(db: Queryable, name: string): Promise<ConsoleUserRow | undefined> {
  return db
    .selectFrom('console_users')
    .selectAll()
    .where(sql<string>`lower(name)`, '=', nameKey(name))
    .executeTakeFirst();
}

export function findConsoleUserById(db: Queryable, id: number): Promise<ConsoleUserRow | undefined> {
  return db.selectFrom('console_users').selectAll().where('id', '=', id).executeTakeFirst();
}

/**
 * The ids of the admins; on PostgreSQL their rows stay locked until the transaction ends, so two changes at
 * once cannot each take away an admin while counting the other (SQLite runs one write at a time anyway).
 */
export async function lockAdminIds(db: Queryable): Promise<number[]> {
  const query = db.selectFrom('console_users').select('id').where('role', '=', 'admin').orderBy('id');
  const rows = await (isPostgres(db) ? query.forUpdate() : query).execute();
  return rows.map((row) => row.id);
}

export function setConsoleUserRole(
  db: Queryable,
  id: number,
  role: ConsoleUserRow['role'],
  updatedAt: string,
): Promise<ConsoleUserRow> {
  return db
    .updateTable('console_users')
    .set({ role, updated_at: updatedAt })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export function listConsoleUsers(db: Queryable): Promise<ConsoleUserRow[]> {
  return db.selectFrom('console_users').selectAll().orderBy('id').execute();
}

export function setConsoleUserPassword(
  db: Queryable,
  id: number,
  passwordHash: string,
  updatedAt: string,
): Promise<ConsoleUserRow> {
  return db
    .updateTable('console_users')
    .set({ password_hash: passwordHash, updated_at: updatedAt })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Records a sign-in, when the user is still there with the password hash the sign-in checked; undefined
 * otherwise (removed, or given a new password since). On PostgreSQL the row stays locked until the
 * transaction ends, so a new password or a removal that commits later waits for it, then ends the session
 * the sign-in made (the new password deletes the user's sessions after its update; a removal cascades).
 */
export function setConsoleUserSignedIn(
  db: Queryable,
  user: { id: number; passwordHash: string },
  signedInAt: string,
): Promise<ConsoleUserRow | undefined> {
  return db
    .updateTable('console_users')
    .set({ last_sign_in_at: signedInAt })
    .where('id', '=', user.id)
    .where('password_hash', '=', user.passwordHash)
    .returningAll()
    .executeTakeFirst();
}

export async function deleteConsoleUser(db: Queryable, id: number): Promise<void> {
  await db.deleteFrom('console_users').where('id', '=', id).execute();
}
