import {
  type ActivityEntry,
  type ActivityResource,
  actorFilter,
  type FieldValues,
  fieldChanges,
  readableResources,
  readRequirement,
} from '../domain/activity.ts';
import { type Clock, isoAt } from '../domain/clock.ts';
import type { Requirement } from '../domain/console-users.ts';
import { AppError } from '../domain/errors.ts';
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
 * Records changes in the activity log inside the transaction that makes them (`recordChange`, the publisher's),
 * so the log holds exactly the changes that landed, system ones too (a device reaching its limit, a webhook
 * turned off); a few hundred rows a statement, in order. The request id comes from the API request running (if
 * any).
 */
export async function recordActivities(tx: Tx, clock: Clock, drafts: readonly ActivityDraft[]): Promise<void> {
  const createdAt = isoAt(clock.nowMs());
  const requestId = currentRequestId();
  const entries = drafts.map((draft) => {
    const { before, after } = fieldChanges(draft.resource, draft.before, draft.after);
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

/** The activity log's filters as a person gives them (the API's query, like the CLI's flags). */
export interface ActivityQuery {
  /** `admin`, `system`, `via API key NAME`, `via console user NAME`, or an API key's NAME. */
  actor?: string;
  resource?: ActivityResource;
  /** Only with `resource`. */
  resourceId?: string;
  /** Entries made at or after this instant (RFC 3339). */
  since?: string;
}

/** The activity log as the API reads it: a caller sees the entries of the resources it may read. */
export class ActivityLog {
  readonly #db: Queryable;

  constructor(db: Queryable) {
    this.#db = db;
  }

  /**
   * The entries matching `query` that a caller who meets what `meets` says may read (readableResources);
   * asking for a resource it may not read is refused with `insufficient_scope`, as its routes refuse it.
   */
  page(
    query: ActivityQuery,
    page: PageRequest,
    meets: (requirement: Requirement) => boolean,
  ): Promise<Page<ActivityEntry>> {
    if (query.resourceId !== undefined && query.resource === undefined) {
      const message = 'resource_id goes with resource: ids are per kind of resource';
      throw new AppError('bad_request', message, { resource_id: 'needs resource' });
    }
    const requirement = query.resource === undefined ? undefined : readRequirement(query.resource);
    if (requirement !== undefined && !meets(requirement)) {
      const message = `reading the entries about ${query.resource} takes ${requirement}`;
      throw new AppError('insufficient_scope', message, { scope: `${requirement} required` });
    }
    const filter: ActivityFilter = {
      actor: query.actor === undefined ? undefined : actorFilter(query.actor),
      resources: query.resource === undefined ? readableResources(meets) : [query.resource],
      resourceId: query.resourceId,
      sinceIso: query.since === undefined ? undefined : isoAt(Date.parse(query.since)),
    };
    return activityPage(this.#db, filter, page);
  }
}
