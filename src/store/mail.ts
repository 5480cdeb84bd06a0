import type { Insertable, Selectable } from 'kysely';
import type { Queryable } from './db.ts';
import { claimableIds, unheld } from './outbox.ts';
import type { MailNoticeTable, MailOutboxTable, MailState } from './schema.ts';

export type MailRow = Selectable<MailOutboxTable>;
export type NoticeRow = Selectable<MailNoticeTable>;

export async function insertMail(db: Queryable, mail: Insertable<MailOutboxTable>): Promise<void> {
  await db.insertInto('mail_outbox').values(mail).execute();
}

export async function insertNotice(db: Queryable, notice: Insertable<MailNoticeTable>): Promise<void> {
  await db.insertInto('mail_notices').values(notice).execute();
}

export function listNotices(db: Queryable): Promise<NoticeRow[]> {
  return db.selectFrom('mail_notices').selectAll().orderBy('id').execute();
}

/** Bound parameters per statement stay far below both databases' limits. */
const DELETE_CHUNK = 1_000;

/** Deletes exactly these notices: one that another transaction commits meanwhile (with a lower id) stays for the next digest. */
export async function deleteNotices(db: Queryable, ids: readonly number[]): Promise<void> {
  for (let i = 0; i < ids.length; i += DELETE_CHUNK)
    await db
      .deleteFrom('mail_notices')
      .where('id', 'in', ids.slice(i, i + DELETE_CHUNK))
      .execute();
}

export async function hasPendingMail(db: Queryable, topic: MailOutboxTable['topic']): Promise<boolean> {
  return (
    (await db
      .selectFrom('mail_outbox')
      .select('id')
      .where('state', '=', 'pending')
      .where('topic', '=', topic)
      .limit(1)
      .executeTakeFirst()) !== undefined
  );
}

/**
 * Takes the digest slot when the last digest was made at or before `dueIso`: a conditional update,
 * so of several panels sharing the database only one makes the next digest.
 */
export async function claimDigestSlot(db: Queryable, nowIso: string, dueIso: string): Promise<boolean> {
  // The row is made on first use, so a fresh database holds no rows (restore takes only empty ones).
  await db
    .insertInto('mail_digest')
    .values({ id: 1, last_made_at: null })
    .onConflict((oc) => oc.column('id').doNothing())
    .execute();
  const result = await db
    .updateTable('mail_digest')
    .set({ last_made_at: nowIso })
    .where('id', '=', 1)
    .where((eb) => eb.or([eb('last_made_at', 'is', null), eb('last_made_at', '<=', dueIso)]))
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Takes up to `limit` due pending mails that no other sender holds, holding them until `lockedUntil`. */
export async function claimDueMails(
  db: Queryable,
  nowIso: string,
  lockedUntil: string,
  limit: number,
): Promise<MailRow[]> {
  const ids = await claimableIds(db, 'mail_outbox', 'id', nowIso, limit);
  if (ids.length === 0) return [];
  return db
    .updateTable('mail_outbox')
    .set({ locked_until: lockedUntil })
    .where('id', 'in', ids)
    .where((eb) => unheld(eb, nowIso))
    .returningAll()
    .execute();
}

export interface MailAttempt {
  state: MailState;
  attempts: number;
  nextAttemptAt: string | null;
  lastError: string | null;
  sentAt: string | null;
}

export async function recordMailAttempt(db: Queryable, id: number, attempt: MailAttempt): Promise<void> {
  await db
    .updateTable('mail_outbox')
    .set({
      state: attempt.state,
      attempts: attempt.attempts,
      next_attempt_at: attempt.nextAttemptAt,
      last_error: attempt.lastError,
      sent_at: attempt.sentAt,
      locked_until: null,
    })
    .where('id', '=', id)
    .execute();
}

export function listMails(db: Queryable): Promise<MailRow[]> {
  return db.selectFrom('mail_outbox').selectAll().orderBy('id').execute();
}

export async function hasNotices(db: Queryable): Promise<boolean> {
  return (await db.selectFrom('mail_notices').select('id').limit(1).executeTakeFirst()) !== undefined;
}

/** True when anything waits to be mailed. */
export async function hasUnsentMail(db: Queryable): Promise<boolean> {
  const mail = await db
    .selectFrom('mail_outbox')
    .select('id')
    .where('state', '=', 'pending')
    .limit(1)
    .executeTakeFirst();
  return mail !== undefined || (await hasNotices(db));
}

/** Drops everything waiting to be mailed: a panel without SMTP_URL and NOTIFY_EMAIL sends no mail. */
export async function dropUnsentMail(db: Queryable): Promise<void> {
  await db.deleteFrom('mail_outbox').where('state', '=', 'pending').execute();
  await db.deleteFrom('mail_notices').execute();
}

/** Removes sent and failed mails made before `before`. */
export async function pruneMail(db: Queryable, before: string): Promise<number> {
  const result = await db
    .deleteFrom('mail_outbox')
    .where('state', '!=', 'pending')
    .where('created_at', '<', before)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
