import { ACTIVITY_RESOURCES, type ActivityEntry, actorFilter, isActivityResource } from '../domain/activity.ts';
import { isoAt } from '../domain/clock.ts';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../domain/paging.ts';
import { storeConfig } from '../main/config.ts';
import { openMigratedStore } from '../main/store.ts';
import { activityPage } from '../services/activity.ts';
import type { ActivityFilter } from '../store/activity.ts';
import { parseCommandArgs, UsageError } from './usage.ts';

function wholeNumber(text: string | undefined, flag: string, min: number, max: number): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!/^[0-9]+$/.test(text) || n < min || n > max)
    throw new UsageError(`--${flag} must be a whole number from ${min} to ${max} (got '${text}')`);
  return n;
}

function sinceIso(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  if (!/^\d{4}-\d{2}-\d{2}/.test(text) || Number.isNaN(Date.parse(text)))
    throw new UsageError(`--since must be an ISO date or date-time such as 2026-05-01T12:00:00Z (got '${text}')`);
  return isoAt(Date.parse(text));
}

/** One entry as a person reads it: a line, then each field an update changed. */
function describe(entry: ActivityEntry): string {
  const head = [
    String(entry.id),
    entry.created_at,
    entry.actor,
    entry.action,
    `${entry.resource} ${entry.resource_id}`,
    entry.summary,
  ];
  if (entry.request_id !== null) head.push(`request ${entry.request_id}`);
  const lines = [head.join('  ')];
  if (entry.before !== null && entry.after !== null) {
    for (const field of Object.keys(entry.after))
      lines.push(
        `    ${field}: ${JSON.stringify(entry.before[field] ?? null)} -> ${JSON.stringify(entry.after[field])}`,
      );
  }
  return lines.join('\n');
}

/** `vpn-panel activity`: the activity log, oldest first, filtered and paged like the API's lists. */
export async function activityCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(args, {
    actor: { type: 'string' },
    resource: { type: 'string' },
    id: { type: 'string' },
    since: { type: 'string' },
    after: { type: 'string' },
    limit: { type: 'string' },
    json: { type: 'boolean' },
  });
  if (positionals.length > 0) throw new UsageError(`activity takes no argument '${positionals[0] ?? ''}'`);
  const { resource, id } = values;
  if (resource !== undefined && !isActivityResource(resource))
    throw new UsageError(`--resource must be one of ${ACTIVITY_RESOURCES.join(', ')} (got '${resource}')`);
  if (id !== undefined && resource === undefined) throw new UsageError('--id goes with --resource');
  const filter: ActivityFilter = {
    actor: values.actor === undefined ? undefined : actorFilter(values.actor),
    resources: resource === undefined ? undefined : [resource],
    resourceId: id,
    sinceIso: sinceIso(values.since),
  };
  const page = {
    afterId: wholeNumber(values.after, 'after', 0, Number.MAX_SAFE_INTEGER) ?? 0,
    limit: wholeNumber(values.limit, 'limit', 1, MAX_PAGE_SIZE) ?? DEFAULT_PAGE_SIZE,
  };
  const store = await openMigratedStore(storeConfig(process.env));
  try {
    const found = await activityPage(store.db, filter, page);
    if (values.json) {
      console.log(JSON.stringify(found, null, 2));
    } else {
      for (const entry of found.data) console.log(describe(entry));
      const last = found.data.at(-1);
      if (found.has_more && last !== undefined) console.log(`(more: add --after ${last.id})`);
    }
    return 0;
  } finally {
    await store.close();
  }
}
