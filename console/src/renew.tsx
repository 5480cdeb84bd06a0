/** Selling more of a device: renewing it (days, a date or another plan) and topping up its data. */
import { useState } from 'preact/hooks';
import { api, type Device, read } from './api.ts';
import type { paths } from './api-types.ts';
import { fromLocalInput, gigabytesToBytes } from './format.ts';
import type { Plan } from './plans.tsx';
import { CheckField, FormProblem, SelectField, TextField, useAction, useIdempotencyKey } from './ui.tsx';

type Renewal = NonNullable<paths['/api/v1/devices/{id}/renew']['post']['requestBody']>['content']['application/json'];
type Mode = 'days' | 'until' | 'plan';

const MODES: ReadonlyArray<{ value: Mode; label: string }> = [
  { value: 'days', label: 'By a number of days' },
  { value: 'until', label: 'Until a date' },
  { value: 'plan', label: 'Switch to a plan (its values and duration)' },
];

function modeOf(value: string): Mode {
  return value === 'until' || value === 'plan' ? value : 'days';
}

function renewalOf(form: { mode: Mode; days: string; until: string; plan: string; reset: boolean }): Renewal {
  const body: Renewal = { reset_usage: form.reset };
  if (form.mode === 'days') body.days = Number(form.days);
  if (form.mode === 'until') body.until = fromLocalInput(form.until) ?? '';
  if (form.mode === 'plan') body.plan_id = Number(form.plan);
  return body;
}

/** Renew: the expiry moves from max(now, expiry); an expired or limit-reached device connects again. */
export function Renew(props: { device: Device; plans: Plan[]; onRenewed: (device: Device) => void }) {
  const [form, setForm] = useState({ mode: modeOf(''), days: '30', until: '', plan: '', reset: true });
  const set = (change: Partial<typeof form>) => setForm({ ...form, ...change });
  const action = useAction();
  const idempotency = useIdempotencyKey();
  const [done, setDone] = useState('');
  const { problem } = action;
  const submit = (event: SubmitEvent) => {
    event.preventDefault();
    setDone('');
    const body = renewalOf(form);
    const key = idempotency.keyFor([props.device.id, body]);
    void action.run(
      () =>
        read(
          api.POST('/api/v1/devices/{id}/renew', {
            params: { path: { id: props.device.id }, header: { 'idempotency-key': key } },
            body,
          }),
        ),
      (renewed) => {
        idempotency.done();
        setDone('Renewed.');
        props.onRenewed(renewed);
      },
    );
  };
  return (
    <form onSubmit={submit} class="form" aria-labelledby="renew">
      <h2 id="renew">Renew</h2>
      <FormProblem problem={problem} shown={['days', 'until', 'plan_id', 'reset_usage']} />
      <SelectField
        label="Renew"
        name="mode"
        problem={null}
        value={form.mode}
        options={MODES}
        onValue={(mode) => set({ mode: modeOf(mode) })}
      />
      {form.mode === 'days' && (
        <TextField
          label="Days"
          name="days"
          inputMode="numeric"
          required
          hint="Added to the expiry, or to now if it has passed."
          problem={problem}
          value={form.days}
          onValue={(days) => set({ days })}
        />
      )}
      {form.mode === 'until' && (
        <TextField
          label="Until"
          name="until"
          dateTime
          required
          problem={problem}
          value={form.until}
          onValue={(until) => set({ until })}
        />
      )}
      {form.mode === 'plan' && (
        <SelectField
          label="Plan"
          name="plan_id"
          problem={problem}
          value={form.plan}
          options={[
            { value: '', label: 'Choose a plan' },
            ...props.plans.map((plan) => ({ value: String(plan.id), label: plan.name })),
          ]}
          onValue={(plan) => set({ plan })}
        />
      )}
      <CheckField
        label="Reset usage (count toward the data limit from now)"
        name="reset_usage"
        problem={problem}
        checked={form.reset}
        onChecked={(reset) => set({ reset })}
      />
      <div class="actions">
        <button type="submit" class="primary" disabled={action.busy}>
          Renew
        </button>
        <span role="status">{done}</span>
      </div>
    </form>
  );
}

/** Top-up: data added to this period's allowance only (it lapses at the next monthly reset). */
export function TopUp(props: { device: Device; onToppedUp: (device: Device) => void }) {
  const [amount, setAmount] = useState('');
  const action = useAction();
  const idempotency = useIdempotencyKey();
  const [done, setDone] = useState('');
  const submit = (event: SubmitEvent) => {
    event.preventDefault();
    setDone('');
    const body = { bytes: gigabytesToBytes(amount) };
    const key = idempotency.keyFor([props.device.id, body]);
    void action.run(
      () =>
        read(
          api.POST('/api/v1/devices/{id}/top-up', {
            params: { path: { id: props.device.id }, header: { 'idempotency-key': key } },
            body,
          }),
        ),
      (device) => {
        idempotency.done();
        setAmount('');
        setDone('Topped up.');
        props.onToppedUp(device);
      },
    );
  };
  return (
    <form onSubmit={submit} class="form" aria-labelledby="top-up">
      <h2 id="top-up">Top up</h2>
      <FormProblem problem={action.problem} shown={['bytes']} />
      <TextField
        label="Add data (GB)"
        name="bytes"
        inputMode="decimal"
        required
        hint="For this period only: it lapses at the next monthly reset. A device at its limit connects again at once."
        problem={action.problem}
        value={amount}
        onValue={setAmount}
      />
      <div class="actions">
        <button type="submit" class="primary" disabled={action.busy}>
          Top up
        </button>
        <span role="status">{done}</span>
      </div>
    </form>
  );
}
