import type { Selectable } from 'kysely';
import type { Queryable } from './db.ts';
import type { ConsoleSessionTable, ConsoleUserTable } from './schema.ts';

export type ConsoleSessionRow = Selectable<ConsoleSessionTable>;

/** A session with what a request needs of its user. */
export interface ConsoleSessionOfUser extends ConsoleSessionRow {
  user_name: string;
  user_role: ConsoleUserTable['role'];
}

export interface NewConsoleSession {
  userId: number;
  tokenHash: string;
  createdAt: string;
  expiresAt: string;
}

export async function insertConsoleSession(db: Queryable, session: NewConsoleSession): Promise<void> {
  await db
    .insertInto('console_sessions')
    .values({
      user_id: session.userId,
      token_hash: session.tokenHash,
      created_at: session.createdAt,
      last_used_at: session.createdAt,
      expires_at: session.expiresAt,
    })
    .execute();
}

/** The session whose token has this hash, with its user; ended or not: the caller decides. */
export function findConsoleSession(db: Queryable, tokenHash: string): Promise<ConsoleSessionOfUser | undefined> {
  return db
    .selectFrom('console_sessions')
    .innerJoin('console_users', 'console_users.id', 'console_sessions.user_id')
    .selectAll('console_sessions')
    .select(['console_users.name as user_name', 'console_users.role as user_role'])
    .where('console_sessions.token_hash', '=', tokenHash)
    .executeTakeFirst();
}

export async function touchConsoleSession(db: Queryable, id: number, usedAt: string): Promise<void> {
  await db.updateTable('console_sessions').set({ last_used_at: usedAt }).where('id', '=', id).execute();
}

/** Deletes one session; true when it was there. */
export async function deleteConsoleSession(db: Queryable, id: number): Promise<boolean> {
  const result = await db.deleteFrom('console_sessions').where('id', '=', id).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/** Ends every session of a user; returns how many there were. */
export async function deleteConsoleSessionsOf(db: Queryable, userId: number): Promise<number> {
  const result = await db.deleteFrom('console_sessions').where('user_id', '=', userId).executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** Deletes the sessions past their lifetime, or idle since before `idleSince`. */
export async function pruneConsoleSessions(db: Queryable, now: string, idleSince: string): Promise<number> {
  const result = await db
    .deleteFrom('console_sessions')
    .where((eb) => eb.or([eb('expires_at', '<=', now), eb('last_used_at', '<=', idleSince)]))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
