import { useState } from 'preact/hooks';
import { act, api, read, type Result } from '../api.ts';
import type { paths } from '../api-types.ts';
import { bytesToGigabytes, gigabytesToBytes, kbitsToMegabits, megabitsToKbits } from '../format.ts';
import { DataLimitField, PeriodSpeedFields } from '../devices.tsx';
import { describePlan, type Plan, QuotaFields } from '../plans.tsx';
import {
  ConfirmButton,
  FIRST_PAGE,
  FormProblem,
  Page,
  Pager,
  SelectField,
  Show,
  SubmitOrCancel,
  Table,
  TextField,
  useAction,
  useCanWrite,
  useLoad,
} from '../ui.tsx';

type PlanBody = paths['/api/v1/plans']['post']['requestBody']['content']['application/json'];

const PAGE_SIZE = 50;
const FIELDS = [
  'name',
  'data_limit',
  'limit_period',
  'speed_limit',
  'duration_days',
  'max_devices',
  'quota_action',
  'throttle_speed',
  'expiry_starts',
];

interface PlanForm {
  name: string;
  dataLimit: string;
  period: 'monthly' | 'total';
  speed: string;
  days: string;
  maxDevices: string;
  action: 'cut' | 'throttle';
  throttle: string;
  starts: 'created' | 'first_handshake';
}

function wholeOrNull(text: string): number | null {
  return text.trim() === '' ? null : Number(text);
}

/**
 * Days or devices that are not a number, as the API would name them: sent as JSON they would be null, which
 * means "never expires" or "no cap", so they are refused here instead.
 */
function notNumbers(form: PlanForm): Result<never> | undefined {
  const fields: Record<string, string> = {};
  if (Number.isNaN(wholeOrNull(form.days))) fields.duration_days = 'a whole number of days, or empty';
  if (Number.isNaN(wholeOrNull(form.maxDevices))) fields.max_devices = 'a whole number of devices, or empty';
  if (Object.keys(fields).length === 0) return undefined;
  return { ok: false, status: 422, problem: { code: 'validation_failed', message: 'not a number', fields } };
}

function formOf(plan: Plan | undefined): PlanForm {
  return {
    name: plan?.name ?? '',
    dataLimit: bytesToGigabytes(plan?.data_limit ?? 0),
    period: plan?.limit_period ?? 'monthly',
    speed: kbitsToMegabits(plan?.speed_limit ?? 0),
    days: plan?.duration_days == null ? '' : String(plan.duration_days),
    maxDevices: plan?.max_devices == null ? '' : String(plan.max_devices),
    action: plan?.quota_action ?? 'cut',
    throttle: kbitsToMegabits(plan?.throttle_speed ?? null),
    starts: plan?.expiry_starts ?? 'created',
  };
}

function bodyOf(form: PlanForm): PlanBody {
  return {
    name: form.name.trim(),
    data_limit: gigabytesToBytes(form.dataLimit),
    limit_period: form.period,
    speed_limit: megabitsToKbits(form.speed),
    duration_days: wholeOrNull(form.days),
    max_devices: wholeOrNull(form.maxDevices),
    quota_action: form.action,
    throttle_speed: form.action === 'throttle' ? megabitsToKbits(form.throttle) : null,
    expiry_starts: form.starts,
  };
}

/** The plan's fields, for a new plan (`plan` undefined) or a change of one. */
function PlanEditor({ plan, onSaved, onDone }: { plan?: Plan; onSaved: () => void; onDone: () => void }) {
  const [form, setForm] = useState(formOf(plan));
  const set = (change: Partial<PlanForm>) => setForm({ ...form, ...change });
  const action = useAction();
  const { problem } = action;
  const title = plan === undefined ? 'New plan' : `Change ${plan.name}`;
  const submit = (event: SubmitEvent) => {
    event.preventDefault();
    const body = bodyOf(form);
    const refused = notNumbers(form);
    void action.run(
      async () =>
        refused ??
        (plan === undefined
          ? read(api.POST('/api/v1/plans', { body }))
          : read(api.PATCH('/api/v1/plans/{id}', { params: { path: { id: plan.id } }, body }))),
      () => {
        onSaved();
        onDone();
      },
    );
  };
  return (
    <form class="form panel" aria-label={title} onSubmit={submit}>
      <h2>{title}</h2>
      <FormProblem problem={problem} shown={FIELDS} />
      <TextField
        label="Name"
        name="name"
        required
        problem={problem}
        value={form.name}
        onValue={(name) => set({ name })}
      />
      <DataLimitField value={form.dataLimit} onValue={(dataLimit) => set({ dataLimit })} problem={problem} />
      <PeriodSpeedFields form={form} set={set} problem={problem} />
      <TextField
        label="Duration (days)"
        name="duration_days"
        inputMode="numeric"
        hint="Empty: devices from the plan never expire."
        problem={problem}
        value={form.days}
        onValue={(days) => set({ days })}
      />
      <SelectField
        label="Duration starts"
        name="expiry_starts"
        problem={problem}
        value={form.starts}
        options={[
          { value: 'created', label: 'When the device is made' },
          { value: 'first_handshake', label: "At the client's first handshake" },
        ]}
        onValue={(starts) => set({ starts: starts === 'first_handshake' ? 'first_handshake' : 'created' })}
      />
      <TextField
        label="Devices per customer"
        name="max_devices"
        inputMode="numeric"
        hint="Per external ID group; empty: no cap."
        problem={problem}
        value={form.maxDevices}
        onValue={(maxDevices) => set({ maxDevices })}
      />
      <QuotaFields form={form} set={set} problem={problem} />
      <SubmitOrCancel label={plan === undefined ? 'Create plan' : 'Save plan'} busy={action.busy} onCancel={onDone} />
    </form>
  );
}

function PlanRow({ plan, onChanged }: { plan: Plan; onChanged: () => void }) {
  const canWrite = useCanWrite();
  const [editing, setEditing] = useState(false);
  const action = useAction();
  return (
    <tr>
      <td>{plan.name}</td>
      <td>{describePlan(plan)}</td>
      {canWrite && (
        <td>
          <div class="row">
            {!editing && (
              <button type="button" onClick={() => setEditing(true)}>
                Change<span class="visually-hidden"> {plan.name}</span>
              </button>
            )}
            <ConfirmButton
              label={`Delete ${plan.name}`}
              question={`Delete ${plan.name}? Devices made from it keep their values.`}
              confirm={`Yes, delete ${plan.name}`}
              busy={action.busy}
              onConfirm={() =>
                void action.run(
                  () => act(api.DELETE('/api/v1/plans/{id}', { params: { path: { id: plan.id } } })),
                  onChanged,
                )
              }
            />
          </div>
          {editing && <PlanEditor plan={plan} onSaved={onChanged} onDone={() => setEditing(false)} />}
          <FormProblem problem={action.problem} />
        </td>
      )}
    </tr>
  );
}

/** What is sold: plans a new device or a renewal takes its limits, duration and slots from. */
export function PlansPage() {
  const canWrite = useCanWrite();
  const [creating, setCreating] = useState(false);
  const [cursor, setCursor] = useState(FIRST_PAGE);
  const { after } = cursor;
  const [page, reload] = useLoad(
    () =>
      read(
        api.GET('/api/v1/plans', {
          params: { query: { after: after === '' ? undefined : Number(after), limit: PAGE_SIZE } },
        }),
      ),
    [after],
  );
  return (
    <Page
      title="Plans"
      actions={
        canWrite &&
        !creating && (
          <button type="button" class="primary" onClick={() => setCreating(true)}>
            New plan
          </button>
        )
      }
    >
      <p class="muted">
        A device made from a plan takes its values (fields given with the device win). Changing or deleting a plan
        leaves the devices already made from it as they are.
      </p>
      {creating && <PlanEditor onSaved={reload} onDone={() => setCreating(false)} />}
      <Show loaded={page} what="plans">
        {(data) => (
          <>
            {data.data.length === 0 ? (
              <p>No plan yet.</p>
            ) : (
              <Table caption="Plans" head={['Plan', 'What a device gets', ...(canWrite ? ['Change'] : [])]}>
                {data.data.map((plan) => (
                  <PlanRow key={`${plan.id}-${plan.updated_at}`} plan={plan} onChanged={reload} />
                ))}
              </Table>
            )}
            {(after !== '' || data.has_more) && (
              <Pager cursor={cursor} lastId={data.data.at(-1)?.id} hasMore={data.has_more} onPage={setCursor} />
            )}
          </>
        )}
      </Show>
    </Page>
  );
}
