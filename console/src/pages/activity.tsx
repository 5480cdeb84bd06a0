import { useState } from 'preact/hooks';
import { api, EVENT_KINDS, type PanelEvent, read } from '../api.ts';
import { navigate, withQuery } from '../router.ts';
import { Link, Page, Pager, SelectField, Show, Table, TextField, Time, useLoad } from '../ui.tsx';
import { loadAllServers } from './servers.tsx';

const POLL_MS = 15_000;

function EventRows({ events }: { events: PanelEvent[] }) {
  if (events.length === 0) return <p>Nothing happened here yet.</p>;
  return (
    <Table caption="Activity" head={['When', 'What', 'Device', 'Server', 'By', 'Detail']}>
      {events.map((event) => (
        <tr key={event.id}>
          <td>
            <Time iso={event.created_at} />
          </td>
          <td>{event.kind}</td>
          <td>
            {event.device_id === null ? (
              '—'
            ) : (
              <Link href={`/devices/${event.device_id}`}>{event.device_name ?? `#${event.device_id}`}</Link>
            )}
          </td>
          <td>
            {event.server_id === null ? (
              (event.node_name ?? '—')
            ) : (
              <Link href={`/servers/${event.server_id}`}>{event.server_name ?? `#${event.server_id}`}</Link>
            )}
          </td>
          <td>{event.actor}</td>
          <td class="wrap">{event.detail}</td>
        </tr>
      ))}
    </Table>
  );
}

/** What happened to devices, servers and nodes and who did it, oldest first, filtered like `GET /events`. */
export function ActivityPage({ query }: { query: URLSearchParams }) {
  const kind = query.get('kind') ?? '';
  const server = query.get('server') ?? '';
  const device = query.get('device') ?? '';
  const [deviceText, setDeviceText] = useState(device);
  const [after, setAfter] = useState('');
  const [servers] = useLoad(loadAllServers, []);
  const go = (change: Record<string, string>) => {
    setAfter('');
    navigate(withQuery('/activity', { kind, server, device, ...change }), { replace: true });
  };
  const [page] = useLoad(
    () =>
      read(
        api.GET('/api/v1/events', {
          params: {
            query: {
              kind: kind === '' ? undefined : kind,
              server_id: /^\d+$/.test(server) ? Number(server) : undefined,
              device_id: /^\d+$/.test(device) ? Number(device) : undefined,
              after: after === '' ? undefined : Number(after),
              limit: 50,
            },
          },
        }),
      ),
    [kind, server, device, after],
    POLL_MS,
  );
  return (
    <Page title="Activity">
      <p class="muted">Device, server and node events with who made them, oldest first; kept 90 days.</p>
      <search aria-label="Filter the activity">
        <form
          class="filters"
          onSubmit={(event) => {
            event.preventDefault();
            go({ device: deviceText.trim() });
          }}
        >
          <SelectField
            label="Kind"
            name="kind"
            problem={null}
            value={kind}
            options={[{ value: '', label: 'Any kind' }, ...EVENT_KINDS.map((one) => ({ value: one, label: one }))]}
            onValue={(value) => go({ kind: value })}
          />
          <SelectField
            label="Server"
            name="server"
            problem={null}
            value={server}
            options={[
              { value: '', label: 'Any server' },
              ...(servers.state === 'ready' ? servers.data.items : []).map((one) => ({
                value: String(one.id),
                label: one.name,
              })),
            ]}
            onValue={(value) => go({ server: value })}
          />
          <TextField
            label="Device ID"
            name="device"
            problem={null}
            inputMode="numeric"
            value={deviceText}
            onValue={setDeviceText}
          />
          <button type="submit">Filter</button>
        </form>
      </search>
      <Show loaded={page} what="the activity">
        {(data) => (
          <>
            <EventRows events={data.data} />
            {(after !== '' || data.has_more) && (
              <Pager after={after} lastId={data.data.at(-1)?.id} hasMore={data.has_more} onPage={setAfter} />
            )}
          </>
        )}
      </Show>
    </Page>
  );
}
