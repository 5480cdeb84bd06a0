import { type Clock, isoAt } from '../domain/clock.ts';
import type { PanelEvent } from '../domain/events.ts';
import {
  type ChangeNotice,
  DIGEST_EVENT_KINDS,
  DIGEST_INTERVAL_MS,
  digestLine,
  eventNotice,
  type MailContent,
  MAILED_EVENT_KINDS,
  renderChangeMail,
  renderDigestMail,
} from '../domain/notifications.ts';
import { type Queryable, type Tx, write } from '../store/db.ts';
import {
  claimDigestSlot,
  deleteNotices,
  hasNotices,
  hasPendingMail,
  insertMail,
  insertNotice,
  listNotices,
} from '../store/mail.ts';
import type { MailOutboxTable } from '../store/schema.ts';
import { currentRequestId } from './request-context.ts';

/**
 * Notification mail (issue #7). Mails are written to the outbox in the transaction of the change,
 * whether or not this process knows the mail settings (the CLI does not): the panel's mail sender
 * sends them when SMTP_URL and NOTIFY_EMAIL are set, and drops them when they are not.
 */

function enqueue(tx: Queryable, clock: Clock, topic: MailOutboxTable['topic'], mail: MailContent): Promise<void> {
  const nowIso = isoAt(clock.nowMs());
  return insertMail(tx, {
    topic,
    subject: mail.subject,
    text_body: mail.text,
    html_body: mail.html,
    state: 'pending',
    attempts: 0,
    next_attempt_at: nowIso,
    locked_until: null,
    last_error: null,
    created_at: nowIso,
    sent_at: null,
  });
}

/** A mail about one change (a group deleted, an API key made or revoked), naming who made it. */
export function notifyChange(
  tx: Tx,
  clock: Clock,
  change: Pick<ChangeNotice, 'headline' | 'details' | 'actor'>,
): Promise<void> {
  return enqueue(
    tx,
    clock,
    'change',
    renderChangeMail({ ...change, atIso: isoAt(clock.nowMs()), requestId: currentRequestId() }),
  );
}

/** Called for every recorded event: servers made or deleted and nodes going on- or offline are mailed; device limits and expiries wait for the digest. */
export async function notifyEvent(tx: Tx, clock: Clock, event: PanelEvent): Promise<void> {
  if (MAILED_EVENT_KINDS.includes(event.kind))
    await enqueue(tx, clock, 'change', renderChangeMail(eventNotice(event, currentRequestId())));
  else if (DIGEST_EVENT_KINDS.includes(event.kind))
    await insertNotice(tx, { kind: event.kind, line: digestLine(event), created_at: event.created_at });
}

/**
 * Turns the device notices gathered so far into one digest mail, unless a digest was made less than
 * a minute ago or the previous one is still unsent (an SMTP outage then ends with one mail, not one
 * a minute). Returns true when a digest was made.
 */
export function composeDigest(db: Queryable, clock: Clock): Promise<boolean> {
  return write(db, async (tx) => {
    if (!(await hasNotices(tx)) || (await hasPendingMail(tx, 'device_digest'))) return false;
    const nowMs = clock.nowMs();
    if (!(await claimDigestSlot(tx, isoAt(nowMs), isoAt(nowMs - DIGEST_INTERVAL_MS)))) return false;
    const notices = await listNotices(tx);
    await enqueue(tx, clock, 'device_digest', renderDigestMail(notices));
    await deleteNotices(
      tx,
      notices.map((n) => n.id),
    );
    return true;
  });
}
