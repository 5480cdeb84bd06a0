import { useState } from 'preact/hooks';
import { api, read, type Schemas } from '../api.ts';
import { fromLocalInput, toLocalInput } from '../format.ts';
import { navigate, withQuery } from '../router.ts';
import {
  FIRST_PAGE,
  Link,
  Page,
  Pager,
  SelectField,
  Show,
  Table,
  TextField,
  Time,
  useCanWrite,
  useLoad,
} from '../ui.tsx';

type Entry = Schemas['ActivityEntry'];
type Resource = Entry['resource'];

const POLL_MS = 15_000;
/**
 * The resources the log records, as `vpn-panel activity --resource` names them. A viewer reads the entries of
 * what it may read only (webhooks, API keys and console users are an admin's): the others are not offered.
 */
const RESOURCES: ReadonlyArray<{ value: Resource; label: string; adminOnly?: true }> = [
  { value: 'device', label: 'Devices' },
  { value: 'server', label: 'Servers' },
  { value: 'webhook', label: 'Webhooks', adminOnly: true },
  { value: 'node', label: 'Nodes' },
  { value: 'api_key', label: 'API keys', adminOnly: true },
  { value: 'console_user', label: 'Console users', adminOnly: true },
];

function resourcesFor(admin: boolean): typeof RESOURCES {
  return admin ? RESOURCES : RESOURCES.filter((one) => one.adminOnly !== true);
}

function resourceOf(text: string, choices: typeof RESOURCES): Resource | undefined {
  return choices.find((one) => one.value === text)?.value;
}

/** The resource an entry is about, linked when the console has a page for it. */
function Subject({ entry, canWrite }: { entry: Entry; canWrite: boolean }) {
  const text = `${entry.resource} ${entry.resource_id}`;
  if (entry.resource === 'device') return <Link href={`/devices/${entry.resource_id}`}>{text}</Link>;
  if (entry.resource === 'server') return <Link href={`/servers/${entry.resource_id}`}>{text}</Link>;
  if (entry.resource === 'webhook' && canWrite) return <Link href={`/webhooks/${entry.resource_id}`}>{text}</Link>;
  return <>{text}</>;
}

function shown(value: unknown): string {
  return value === null || value === undefined ? '—' : JSON.stringify(value);
}

/** What an update changed, one field a line; nothing for a create or a delete (the summary says it). */
function Changes({ entry }: { entry: Entry }) {
  const { before, after } = entry;
  if (before === null || after === null) return null;
  return (
    <ul class="changes">
      {Object.keys(after).map((field) => (
        <li key={field}>
          {field}: {shown(before[field])} → {shown(after[field])}
        </li>
      ))}
    </ul>
  );
}

function EntryRows({ entries }: { entries: Entry[] }) {
  const canWrite = useCanWrite();
  if (entries.length === 0) return <p>No change matches.</p>;
  return (
    <Table caption="Activity" head={['When', 'Who', 'What', 'Of', 'Detail']}>
      {entries.map((entry) => (
        <tr key={entry.id}>
          <td>
            <Time iso={entry.created_at} />
          </td>
          <td>{entry.actor}</td>
          <td>{entry.action}</td>
          <td>
            <Subject entry={entry} canWrite={canWrite} />
          </td>
          <td class="wrap">
            {entry.summary}
            <Changes entry={entry} />
          </td>
        </tr>
      ))}
    </Table>
  );
}

/** Who changed what, oldest first, filtered like `vpn-panel activity` (actor, resource and id, since). */
export function ActivityPage({ query }: { query: URLSearchParams }) {
  const admin = useCanWrite();
  const choices = resourcesFor(admin);
  const actor = query.get('actor') ?? '';
  const resource = resourceOf(query.get('resource') ?? '', choices);
  const id = resource === undefined ? '' : (query.get('id') ?? '');
  const since = query.get('since') ?? '';
  const [form, setForm] = useState({ actor, id, since: toLocalInput(since === '' ? null : since) });
  const [cursor, setCursor] = useState(FIRST_PAGE);
  const { after } = cursor;
  const go = (change: Record<string, string>) => {
    setCursor(FIRST_PAGE);
    navigate(withQuery('/activity', { actor, resource: resource ?? '', id, since, ...change }), { replace: true });
  };
  const [page] = useLoad(
    () =>
      read(
        api.GET('/api/v1/activity', {
          params: {
            query: {
              actor: actor === '' ? undefined : actor,
              resource,
              resource_id: id === '' ? undefined : id,
              since: since === '' ? undefined : since,
              after: after === '' ? undefined : Number(after),
              limit: 50,
            },
          },
        }),
      ),
    [actor, resource, id, since, after],
    POLL_MS,
  );
  return (
    <Page title="Activity">
      <p class="muted">
        Every change, made here, with an API key, on the panel host or by the panel itself, oldest first; kept 365 days.
        {!admin && ' You see those of devices, servers and nodes.'}
      </p>
      <search aria-label="Filter the activity">
        <form
          class="filters"
          onSubmit={(event) => {
            event.preventDefault();
            go({ actor: form.actor.trim(), id: form.id.trim(), since: fromLocalInput(form.since) ?? '' });
          }}
        >
          <TextField
            label="Who"
            name="actor"
            problem={null}
            hint="admin, system, an API key's name, or via console user NAME"
            value={form.actor}
            onValue={(value) => setForm({ ...form, actor: value })}
          />
          <SelectField
            label="Resource"
            name="resource"
            problem={null}
            value={resource ?? ''}
            options={[{ value: '', label: 'Anything' }, ...choices]}
            onValue={(value) => go({ resource: value, id: value === '' ? '' : id })}
          />
          {resource !== undefined && (
            <TextField
              label="Resource ID"
              name="id"
              problem={null}
              value={form.id}
              onValue={(value) => setForm({ ...form, id: value })}
            />
          )}
          <TextField
            label="Since"
            name="since"
            problem={null}
            dateTime
            value={form.since}
            onValue={(value) => setForm({ ...form, since: value })}
          />
          <button type="submit">Filter</button>
        </form>
      </search>
      <Show loaded={page} what="the activity">
        {(data) => (
          <>
            <EntryRows entries={data.data} />
            {(after !== '' || data.has_more) && (
              <Pager cursor={cursor} lastId={data.data.at(-1)?.id} hasMore={data.has_more} onPage={setCursor} />
            )}
          </>
        )}
      </Show>
    </Page>
  );
}
