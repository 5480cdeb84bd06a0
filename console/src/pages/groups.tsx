import { useEffect, useState } from 'preact/hooks';
import { act, api, read, type Schemas } from '../api.ts';
import { formatBytes, formatCount, fromLocalInput } from '../format.ts';
import { navigate, withQuery } from '../router.ts';
import { ConfirmButton, FormProblem, Page, Pager, Show, TextField, useAction, useCanWrite, useLoad } from '../ui.tsx';
import { DEVICE_POLL_MS, DeviceRows } from '../devices.tsx';
import { loadGroupSlots } from '../plans.tsx';
import { loadAllServers } from '../servers.tsx';

type Group = Schemas['Group'];

/** The devices of a group shown a page at a time: the API's default page. */
const PAGE_SIZE = 50;

export function GroupsPage() {
  const [externalId, setExternalId] = useState('');
  return (
    <Page title="Groups">
      <p>A group is every device sharing one external ID, such as one customer's phone and laptop.</p>
      <search aria-label="Open a group">
        <form
          class="filters"
          onSubmit={(event) => {
            event.preventDefault();
            if (externalId.trim() !== '') navigate(`/groups/${encodeURIComponent(externalId.trim())}`);
          }}
        >
          <TextField
            label="External ID"
            name="external_id"
            problem={null}
            required
            value={externalId}
            onValue={setExternalId}
          />
          <button type="submit">Open group</button>
        </form>
      </search>
    </Page>
  );
}

function GroupActions({ group, onChanged }: { group: Group; onChanged: () => void }) {
  const action = useAction();
  const [expires, setExpires] = useState('');
  const [done, setDone] = useState('');
  const path = { params: { path: { external_id: group.external_id } } };
  const then = (message: string) => () => {
    setDone(message);
    onChanged();
  };
  const patch = (body: { enabled?: boolean; expires_at?: string | null }, message: string) =>
    void action.run(() => read(api.PATCH('/api/v1/groups/{external_id}', { ...path, body })), then(message));
  return (
    <section aria-labelledby="group-actions">
      <h2 id="group-actions">Every device of the group</h2>
      <p>
        These change all {formatCount(group.device_count)} devices of {group.external_id}, not only the page of devices
        shown below.
      </p>
      <div class="actions">
        <button type="button" disabled={action.busy} onClick={() => patch({ enabled: true }, 'All enabled.')}>
          Enable all
        </button>
        <button type="button" disabled={action.busy} onClick={() => patch({ enabled: false }, 'All disabled.')}>
          Disable all
        </button>
        <ConfirmButton
          label="Reset usage"
          question="Start every device's count toward its limit again from now?"
          confirm="Reset"
          busy={action.busy}
          onConfirm={() =>
            void action.run(
              () => read(api.POST('/api/v1/groups/{external_id}/usage/reset', path)),
              then('Usage reset.'),
            )
          }
        />
        <ConfirmButton
          label="Delete group"
          question={`Delete all ${group.device_count} devices of ${group.external_id}?`}
          confirm="Delete all"
          busy={action.busy}
          onConfirm={() =>
            void action.run(
              () => act(api.DELETE('/api/v1/groups/{external_id}', path)),
              () => navigate('/groups'),
            )
          }
        />
      </div>
      <form
        class="row"
        onSubmit={(event) => {
          event.preventDefault();
          patch({ expires_at: fromLocalInput(expires) }, expires === '' ? 'Expiry removed.' : 'Expiry set.');
        }}
      >
        <TextField
          label="Expiry for all"
          name="expires_at"
          dateTime
          problem={action.problem}
          hint="Empty: never."
          value={expires}
          onValue={setExpires}
        />
        <button type="submit" disabled={action.busy}>
          Set expiry
        </button>
      </form>
      <p role="status">{done}</p>
      <FormProblem problem={action.problem} shown={['expires_at']} />
    </section>
  );
}

/**
 * The group's slots, or that it has none, once some plan has a cap; loaded apart from the group, so the group
 * page never waits for them.
 */
function Slots({ externalId, used }: { externalId: string; used: number }) {
  const [slots] = useLoad(() => loadGroupSlots(externalId), [externalId, used]);
  if (slots.state !== 'ready' || slots.data === undefined) return null;
  const max = slots.data;
  return (
    <>
      <dt>Slots</dt>
      {max === null ? (
        <dd>No cap: no plan of its devices limits the group</dd>
      ) : (
        <dd>
          <meter min={0} max={max} value={used} aria-label={`${used} of ${max} devices`} /> {formatCount(used)} /{' '}
          {formatCount(max)} used
        </dd>
      )}
    </>
  );
}

/** A group's totals and one page of its devices (the cursor `after` in the URL), with the whole group's actions. */
export function GroupPage({ externalId, query }: { externalId: string; query: URLSearchParams }) {
  const canWrite = useCanWrite();
  const cursor = query.get('after') ?? '';
  const after = /^\d{1,15}$/.test(cursor) ? cursor : '';
  // Kept here, not in the Pager: the Pager is drawn anew with each page. A reloaded page has none: Previous
  // then goes back to the first page.
  const [trail, setTrail] = useState<string[]>([]);
  useEffect(() => setTrail([]), [externalId]);
  const [group, reload] = useLoad(
    () =>
      read(
        api.GET('/api/v1/groups/{external_id}', {
          params: {
            path: { external_id: externalId },
            query: { after: after === '' ? undefined : Number(after), limit: PAGE_SIZE },
          },
        }),
      ),
    [externalId, after],
    DEVICE_POLL_MS,
  );
  const page = (next: string) =>
    navigate(withQuery(`/groups/${encodeURIComponent(externalId)}`, { after: next }), { replace: true });
  const [servers] = useLoad(loadAllServers, []);
  const names = new Map<number, string>(
    servers.state === 'ready' ? servers.data.items.map((server) => [server.id, server.name]) : [],
  );
  return (
    <Page title={`Group ${externalId}`}>
      <Show loaded={group} what="the group">
        {(data) => (
          <>
            <dl class="facts">
              <dt>Devices</dt>
              <dd>{formatCount(data.device_count)}</dd>
              <Slots externalId={externalId} used={data.device_count} />
              <dt>This month</dt>
              <dd>
                {formatBytes(data.month_usage.total_bytes)} ({formatBytes(data.month_usage.rx_bytes)} down,{' '}
                {formatBytes(data.month_usage.tx_bytes)} up)
              </dd>
            </dl>
            {/* Above the devices: they act on the whole group, and a page of 50 devices is long on a phone. */}
            {canWrite && <GroupActions group={data} onChanged={reload} />}
            <section aria-labelledby="group-devices">
              <h2 id="group-devices">Devices</h2>
              <p class="muted">
                This page shows {formatCount(data.devices.length)} of the group's {formatCount(data.device_count)}{' '}
                devices, oldest first.
              </p>
              <DeviceRows devices={data.devices} servers={names} />
              {(after !== '' || data.has_more) && (
                <Pager
                  cursor={{ after, trail }}
                  lastId={data.devices.at(-1)?.id}
                  hasMore={data.has_more}
                  onPage={(next) => {
                    setTrail(next.trail);
                    page(next.after);
                  }}
                />
              )}
            </section>
          </>
        )}
      </Show>
    </Page>
  );
}
