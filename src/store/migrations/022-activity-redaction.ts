import type { Kysely, Selectable } from 'kysely';
import type { ActivityTable } from '../schema.ts';

type Entry = Pick<
  Selectable<ActivityTable>,
  'id' | 'action' | 'resource' | 'resource_id' | 'summary' | 'before' | 'after'
>;
type Written = Pick<Entry, 'summary' | 'before' | 'after'>;

/** Entries read and rewritten at a time: the log of a year may be long. */
const BATCH_ROWS = 500;

/** What a node's entries no longer keep: its agent URL, certificate pin and last error. */
const NODE_FIELDS = ['url', 'cert_sha256', 'last_error'];

/** How the webhook summaries of earlier versions end, after `webhook <id> to <url>`. */
const WEBHOOK_SUMMARY = /^webhook \d+ to (.*) (created|updated|deleted|turned off: its receiver answered 410 Gone)$/s;

function webhookUrlShown(url: string): string {
  const parsed = URL.parse(url);
  if (parsed === null) return '…';
  return `${parsed.origin}${parsed.href === `${parsed.origin}/` ? '' : '/…'}`;
}

function fields(text: string | null, change: (fields: Record<string, unknown>) => void): string | null {
  if (text === null) return null;
  const value: unknown = JSON.parse(text);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return text;
  const copy: Record<string, unknown> = { ...value };
  change(copy);
  return JSON.stringify(copy);
}

function nodeEntry(entry: Entry): Written {
  const cut = (text: string) => entry.summary.slice(0, entry.summary.indexOf(text));
  const leftOut = (values: Record<string, unknown>) => {
    for (const field of NODE_FIELDS) delete values[field];
  };
  let summary = entry.summary;
  if (entry.action === 'node.added' && summary.includes(' added at ')) summary = `${cut(' added at ')} added`;
  if (entry.action === 'node.offline' && summary.includes(' is offline: '))
    summary = `${cut(' is offline: ')} is offline`;
  return { summary, before: fields(entry.before, leftOut), after: fields(entry.after, leftOut) };
}

function webhookEntry(entry: Entry): Written {
  const match = WEBHOOK_SUMMARY.exec(entry.summary);
  const host = match?.[1] === undefined ? null : (URL.parse(match[1])?.host ?? null);
  const name = host === null ? `webhook ${entry.resource_id}` : `webhook ${entry.resource_id} to ${host}`;
  const verb = match?.[2] ?? entry.action.slice('webhook.'.length);
  const shortened = (values: Record<string, unknown>) => {
    if (typeof values.url === 'string') values.url = webhookUrlShown(values.url);
  };
  return { summary: `${name} ${verb}`, before: fields(entry.before, shortened), after: fields(entry.after, shortened) };
}

/**
 * The activity log keeps nothing its readers' routes hide (issue 30): entries written before keep neither a
 * node's agent URL, certificate pin nor last error (in the fields, the summary of `node.added`, the error in
 * that of `node.offline`), nor a webhook's whole URL (a summary names the webhook by id and host; the `url`
 * field keeps its origin, `/…` when more was cut). Rewritten here, not by the code that writes entries now, so
 * this migration never changes.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const log = db.withTables<{ activity: ActivityTable }>();
  let afterId = 0;
  for (;;) {
    const rows = await log
      .selectFrom('activity')
      .select(['id', 'action', 'resource', 'resource_id', 'summary', 'before', 'after'])
      .where('resource', 'in', ['node', 'webhook'])
      .where('id', '>', afterId)
      .orderBy('id')
      .limit(BATCH_ROWS)
      .execute();
    for (const entry of rows) {
      const written = entry.resource === 'node' ? nodeEntry(entry) : webhookEntry(entry);
      if (written.summary !== entry.summary || written.before !== entry.before || written.after !== entry.after)
        await log.updateTable('activity').set(written).where('id', '=', entry.id).execute();
    }
    const last = rows.at(-1);
    if (last === undefined || rows.length < BATCH_ROWS) return;
    afterId = last.id;
  }
}
