/** Plan pieces more than one page uses: every plan, read page by page, and what a plan gives a device. */
import { api, type Problem, type Result, readPages, type Schemas } from './api.ts';
import { formatBytes, formatSpeed } from './format.ts';
import { SelectField, TextField } from './ui.tsx';

export type Plan = Schemas['Plan'];

/** 200 devices a page: a group at the largest cap the API takes (10,000) is read whole. */
const MAX_GROUP_PAGES = 50;

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

/**
 * A group's cap by the panel's rule (docs/api.md "Plans"): the largest `max_devices` among the plans of its
 * devices; null (no cap) when none of them has a plan or one of those plans has none. Undefined when a plan is
 * not among `plans`.
 */
export function slotsOf(planIds: ReadonlyArray<number | null>, plans: readonly Plan[]): number | null | undefined {
  const caps = new Set<number | null | undefined>();
  for (const id of new Set(planIds)) if (id !== null) caps.add(plans.find((plan) => plan.id === id)?.max_devices);
  if (caps.has(undefined)) return undefined;
  if (caps.size === 0 || caps.has(null)) return null;
  return Math.max(...[...caps].map((cap) => cap ?? 0));
}

/**
 * The cap of the group `externalId` (see slotsOf), counted from every device of it, not a page. Undefined, so
 * not shown, when no plan has a cap (nothing sold limits a group) or a list is too long to read whole; the
 * devices are read only when some plan has a cap.
 */
export async function loadGroupSlots(externalId: string): Promise<Result<number | null | undefined>> {
  const plans = await loadAllPlans();
  if (!plans.ok) return plans;
  if (!plans.data.complete || plans.data.items.every((plan) => plan.max_devices === null))
    return { ok: true, data: undefined };
  const devices = await readPages(
    (after) => api.GET('/api/v1/devices', { params: { query: { external_id: externalId, after, limit: 200 } } }),
    MAX_GROUP_PAGES,
  );
  if (!devices.ok) return devices;
  if (!devices.data.complete) return { ok: true, data: undefined };
  const planIds = devices.data.items.map((device) => device.plan_id);
  return { ok: true, data: slotsOf(planIds, plans.data.items) };
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
