/** Plan pieces more than one page uses: every plan, read page by page, and what a plan gives a device. */
import { api, type Problem, readPages, type Schemas } from './api.ts';
import { formatBytes, formatSpeed } from './format.ts';
import { SelectField, TextField } from './ui.tsx';

export type Plan = Schemas['Plan'];

export function loadAllPlans() {
  return readPages((after) => api.GET('/api/v1/plans', { params: { query: { after, limit: 200 } } }), 10);
}

/** "10 GB a month, 20 Mbit/s, 30 days, 3 devices, throttled to 1 Mbit/s at the limit", as a plan's line says it. */
export function describePlan(plan: Plan): string {
  const per = plan.limit_period === 'monthly' ? 'a month' : 'in total';
  const parts = [
    plan.data_limit === 0 ? 'no data limit' : `${formatBytes(plan.data_limit)} ${per}`,
    plan.speed_limit === 0 ? 'no speed limit' : formatSpeed(plan.speed_limit),
    plan.duration_days === null
      ? 'never expires'
      : `${plan.duration_days} days${plan.expiry_starts === 'first_handshake' ? ' from the first handshake' : ''}`,
    plan.max_devices === null ? 'any number of devices' : `at most ${plan.max_devices} devices per customer`,
  ];
  if (plan.quota_action === 'throttle' && plan.throttle_speed !== null)
    parts.push(`throttled to ${formatSpeed(plan.throttle_speed)} at the limit`);
  return parts.join(', ');
}

/** A group's slots: the largest cap among its devices' plans (the panel's rule), or undefined when none caps it. */
export function slotsOf(planIds: ReadonlyArray<number | null>, plans: readonly Plan[]): number | undefined {
  const caps = plans.filter((plan) => planIds.includes(plan.id) && plan.max_devices !== null);
  return caps.length === 0 ? undefined : Math.max(...caps.map((plan) => plan.max_devices ?? 0));
}

/** At the data limit: cut off, or throttled to a speed in Mbit/s (asked only with throttle), of a plan or a device. */
export function QuotaFields(props: {
  form: { action: 'cut' | 'throttle'; throttle: string };
  set: (change: { action?: 'cut' | 'throttle'; throttle?: string }) => void;
  problem: Problem | null;
}) {
  const { form, set, problem } = props;
  return (
    <>
      <SelectField
        label="At the data limit"
        name="quota_action"
        problem={problem}
        value={form.action}
        options={[
          { value: 'cut', label: 'Cut off' },
          { value: 'throttle', label: 'Throttle' },
        ]}
        onValue={(action) => set({ action: action === 'throttle' ? 'throttle' : 'cut' })}
      />
      {form.action === 'throttle' && (
        <TextField
          label="Throttle speed (Mbit/s)"
          name="throttle_speed"
          inputMode="decimal"
          required
          hint="Each way, once the data limit is reached."
          problem={problem}
          value={form.throttle}
          onValue={(throttle) => set({ throttle })}
        />
      )}
    </>
  );
}
