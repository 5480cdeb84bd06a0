import { useEffect, useRef, useState } from 'preact/hooks';
import { api, type Problem, read, type Server } from '../api.ts';
import type { paths } from '../api-types.ts';
import { fromLocalInput, gigabytesToBytes } from '../format.ts';
import { navigate, withQuery } from '../router.ts';
import { FormProblem, Page, SelectField, TextField, useAction, useCanWrite, useLoad, SubmitOrCancel } from '../ui.tsx';
import { DeviceList, type DeviceFilter, LimitFields } from '../devices.tsx';
import { describePlan, loadAllPlans, type Plan } from '../plans.tsx';
import { loadAllServers } from '../servers.tsx';

type NewDevice = paths['/api/v1/devices']['post']['requestBody']['content']['application/json'];

const STATUSES: ReadonlyArray<{ value: string; label: string }> = [
  { value: '', label: 'Any status' },
  { value: 'active', label: 'Active' },
  { value: 'disabled', label: 'Disabled' },
  { value: 'expired', label: 'Expired' },
  { value: 'limit_reached', label: 'Limit reached' },
];

function statusOf(value: string | null): DeviceFilter['status'] {
  return value === 'active' || value === 'disabled' || value === 'expired' || value === 'limit_reached'
    ? value
    : undefined;
}

/** The plans to make a device from; the chosen one's values are shown as what the device gets. */
function PlanChoice(props: { plans: Plan[]; value: string; onValue: (plan: string) => void; problem: Problem | null }) {
  const chosen = props.plans.find((plan) => String(plan.id) === props.value);
  return (
    <>
      <SelectField
        label="Plan"
        name="plan_id"
        problem={props.problem}
        value={props.value}
        onValue={props.onValue}
        options={[
          { value: '', label: 'No plan' },
          ...props.plans.map((plan) => ({ value: String(plan.id), label: plan.name })),
        ]}
      />
      {chosen !== undefined && (
        <p class="hint" role="status">
          The device gets {describePlan(chosen)}. A data limit or expiry filled in below wins over the plan's.
        </p>
      )}
    </>
  );
}

function NewDeviceForm(props: { servers: Server[]; plans: Plan[]; server: string; onCancel: () => void }) {
  const [form, setForm] = useState({
    name: '',
    server: props.server,
    plan: '',
    externalId: '',
    dataLimit: '',
    expires: '',
  });
  const set = (change: Partial<typeof form>) => setForm({ ...form, ...change });
  const action = useAction();
  const first = useRef<HTMLFormElement>(null);
  useEffect(() => first.current?.querySelector('input')?.focus(), []);
  const submit = (event: SubmitEvent) => {
    event.preventDefault();
    const body: NewDevice = { server_id: form.server === 'auto' ? 'auto' : Number(form.server) };
    if (form.name.trim() !== '') body.name = form.name.trim();
    if (form.plan !== '') body.plan_id = Number(form.plan);
    if (form.externalId.trim() !== '') body.external_id = form.externalId.trim();
    if (form.dataLimit.trim() !== '') body.data_limit = gigabytesToBytes(form.dataLimit);
    if (form.expires !== '') body.expires_at = fromLocalInput(form.expires);
    void action.run(
      () => read(api.POST('/api/v1/devices', { body })),
      (device) => navigate(`/devices/${device.id}`),
    );
  };
  const { problem } = action;
  return (
    <form ref={first} onSubmit={submit} class="form panel" aria-labelledby="new-device">
      <h2 id="new-device">New device</h2>
      <FormProblem
        problem={problem}
        shown={['name', 'server_id', 'plan_id', 'external_id', 'data_limit', 'expires_at']}
      />
      <TextField label="Name" name="name" problem={problem} value={form.name} onValue={(name) => set({ name })} />
      <SelectField
        label="Server"
        name="server_id"
        problem={problem}
        value={form.server}
        onValue={(server) => set({ server })}
        options={[
          { value: 'auto', label: 'Any running server with room' },
          ...props.servers.map((server) => ({
            value: String(server.id),
            label: `${server.name} (${server.device_count}/${server.capacity})`,
          })),
        ]}
      />
      <PlanChoice plans={props.plans} value={form.plan} onValue={(plan) => set({ plan })} problem={problem} />
      <TextField
        label="External ID"
        name="external_id"
        problem={problem}
        hint="Your own id, e.g. a customer's; devices sharing one form a group."
        value={form.externalId}
        onValue={(externalId) => set({ externalId })}
      />
      <LimitFields form={form} set={set} problem={problem} />
      <SubmitOrCancel label="Create" busy={action.busy} onCancel={props.onCancel} />
    </form>
  );
}

export function DevicesPage({ query }: { query: URLSearchParams }) {
  const canWrite = useCanWrite();
  const searched = query.get('search') ?? '';
  const status = statusOf(query.get('status'));
  const server = query.get('server') ?? '';
  const grouped = query.get('group') ?? '';
  const creating = canWrite && query.get('new') === '1';
  const [search, setSearch] = useState(searched);
  const [group, setGroup] = useState(grouped);
  const [servers] = useLoad(loadAllServers, []);
  const [plans] = useLoad(loadAllPlans, []);
  const go = (change: Record<string, string | undefined>) =>
    navigate(
      withQuery('/devices', {
        search: searched,
        group: grouped,
        status,
        server,
        new: creating ? '1' : undefined,
        ...change,
      }),
      {
        replace: true,
      },
    );
  const filter: DeviceFilter = {};
  if (searched !== '') filter.search = searched;
  // A group is its external_id exactly (the search above finds parts of it).
  if (grouped !== '') filter.external_id = grouped;
  if (status !== undefined) filter.status = status;
  if (/^\d+$/.test(server)) filter.server_id = Number(server);
  const serverList = servers.state === 'ready' ? servers.data.items : [];

  return (
    <Page
      title="Devices"
      actions={
        canWrite &&
        !creating && (
          <button type="button" class="primary" onClick={() => go({ new: '1' })}>
            New device
          </button>
        )
      }
    >
      {creating && (
        <NewDeviceForm
          servers={serverList}
          plans={plans.state === 'ready' ? plans.data.items : []}
          server={/^\d+$/.test(server) ? server : 'auto'}
          onCancel={() => go({ new: undefined })}
        />
      )}
      <search aria-label="Find devices">
        <form
          class="filters"
          onSubmit={(event) => {
            event.preventDefault();
            go({ search: search.trim(), group: group.trim() });
          }}
        >
          <TextField label="Name or external ID" name="search" problem={null} value={search} onValue={setSearch} />
          <TextField label="Group" name="group" problem={null} value={group} onValue={setGroup} />
          <SelectField
            label="Status"
            name="status"
            problem={null}
            value={status ?? ''}
            options={STATUSES}
            onValue={(value) => go({ status: value })}
          />
          <SelectField
            label="Server"
            name="server"
            problem={null}
            value={server}
            options={[
              { value: '', label: 'Any server' },
              ...serverList.map((one) => ({ value: String(one.id), label: one.name })),
            ]}
            onValue={(value) => go({ server: value })}
          />
          <button type="submit">Search</button>
        </form>
      </search>
      <DeviceList filter={filter} />
    </Page>
  );
}
