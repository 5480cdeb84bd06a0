import { type ActivityEntry, type ActivityResource, type FieldValues, fieldChanges } from '../domain/activity.ts';
import { type Clock, isoAt } from '../domain/clock.ts';
import { type Page, type PageRequest, toPage } from '../domain/paging.ts';
import { type ActivityFilter, insertActivities, listActivity } from '../store/activity.ts';
import type { Queryable, Tx } from '../store/db.ts';
import { currentRequestId } from './request-context.ts';

/**
 * One change as its service describes it; `before`/`after` may be whole rows: secrets and unchanged
 * fields are dropped here.
 */
export interface ActivityDraft {
  resource: ActivityResource;
  resourceId: number | string;
  /** The verb after `<resource>.`: created, updated, deleted, moved, revoked… */
  verb: string;
  summary: string;
  actor: string;
  before: FieldValues | null;
  after: FieldValues | null;
}

/**
 * Records a change in the activity log inside the transaction that makes it, so the log holds
 * exactly the changes that landed. The request id comes from the API request running (if any).
 * Any change path calls this, system ones too (a device reaching its limit, a webhook turned off).
 */
export async function recordActivity(tx: Tx, clock: Clock, draft: ActivityDraft): Promise<void> {
  await recordActivities(tx, clock, [draft]);
}

/** Records several changes as recordActivity does each, in order, a few hundred rows a statement. */
export async function recordActivities(tx: Tx, clock: Clock, drafts: readonly ActivityDraft[]): Promise<void> {
  const createdAt = isoAt(clock.nowMs());
  const requestId = currentRequestId();
  const entries = drafts.map((draft) => {
    const { before, after } = fieldChanges(draft.before, draft.after);
    return {
      created_at: createdAt,
      actor: draft.actor,
      request_id: requestId,
      action: `${draft.resource}.${draft.verb}`,
      resource: draft.resource,
      resource_id: String(draft.resourceId),
      summary: draft.summary,
      before: before && JSON.stringify(before),
      after: after && JSON.stringify(after),
    };
  });
  await insertActivities(tx, entries);
}

/** Entries matching the filter after the cursor, oldest first. */
export async function activityPage(
  db: Queryable,
  filter: ActivityFilter,
  page: PageRequest,
): Promise<Page<ActivityEntry>> {
  return toPage(await listActivity(db, filter, page), page);
}
