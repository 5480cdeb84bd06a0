import { AppError } from './errors.ts';
import type { LimitPeriod } from './devices.ts';

/** What a device does at its data limit (issue 26): `cut` removes the peer, `throttle` keeps it at throttle_speed. */
export const QUOTA_ACTIONS = ['cut', 'throttle'] as const;
export type QuotaAction = (typeof QUOTA_ACTIONS)[number];

/** When a plan's duration starts: at the device's creation or at its client's first handshake. */
export const EXPIRY_STARTS = ['created', 'first_handshake'] as const;
export type ExpiryStarts = (typeof EXPIRY_STARTS)[number];

export const PLAN_NAME_MAX = 64;
/** Ten years: longer durations are a typo, and far-off expiries overflow no date. */
export const DURATION_DAYS_MAX = 3650;
/** More devices per customer than any shop sells. */
export const MAX_DEVICES_MAX = 10_000;

/**
 * The quota action and throttle speed together, as they are stored: `throttle` needs a speed, `cut` has none
 * (a speed given with it is refused rather than kept unused).
 */
export function quotaActionPair(
  action: QuotaAction,
  throttleSpeed: number | null,
): { quotaAction: QuotaAction; throttleSpeed: number | null } {
  if (action === 'throttle' && throttleSpeed === null) {
    throw new AppError('validation_failed', 'throttle_speed is required with quota_action throttle', {
      throttle_speed: 'required with quota_action throttle',
    });
  }
  if (action === 'cut' && throttleSpeed !== null) {
    throw new AppError('validation_failed', 'throttle_speed is only for quota_action throttle', {
      throttle_speed: 'only with quota_action throttle',
    });
  }
  return { quotaAction: action, throttleSpeed };
}

/**
 * The throttle speed after a change: one given wins; switching to `cut` drops the old one; otherwise it stays.
 */
export function nextThrottleSpeed(
  before: { quotaAction: QuotaAction; throttleSpeed: number | null },
  patch: { quotaAction?: QuotaAction; throttleSpeed?: number | null },
): { quotaAction: QuotaAction; throttleSpeed: number | null } {
  const action = patch.quotaAction ?? before.quotaAction;
  if (patch.throttleSpeed !== undefined) return quotaActionPair(action, patch.throttleSpeed);
  return quotaActionPair(action, action === 'cut' ? null : before.throttleSpeed);
}

export const DAY_MS = 86_400_000;

/** The values of a plan a device takes. */
export interface PlanValues {
  dataLimit: number;
  limitPeriod: LimitPeriod;
  speedLimit: number;
  durationDays: number | null;
  quotaAction: QuotaAction;
  throttleSpeed: number | null;
  expiryStarts: ExpiryStarts;
}

/** A device's own settings as a create body gives them (undefined: not given). */
export interface DeviceLimits {
  dataLimit?: number;
  limitPeriod?: LimitPeriod;
  speedLimit?: number;
  expiresAt?: string | null;
  quotaAction?: QuotaAction;
  throttleSpeed?: number | null;
}

/**
 * A new device's limits from its plan (docs/api.md "Plans"): each field given wins over the plan's, and the expiry
 * is `nowMs` + the duration in days of 24 hours (docs/decisions.md "Plans"), or none yet when the plan's clock
 * starts at the first handshake. Without a plan, the fields given (quota action checked).
 */
export function deviceLimitsFrom(
  plan: PlanValues | undefined,
  given: DeviceLimits,
  nowMs: number,
): DeviceLimits & { handshakeExpiryDays?: number } {
  const quota = nextThrottleSpeed(
    { quotaAction: plan?.quotaAction ?? 'cut', throttleSpeed: plan?.throttleSpeed ?? null },
    given,
  );
  if (plan === undefined) return { ...given, ...quota };
  const limits = {
    dataLimit: given.dataLimit ?? plan.dataLimit,
    limitPeriod: given.limitPeriod ?? plan.limitPeriod,
    speedLimit: given.speedLimit ?? plan.speedLimit,
    ...quota,
  };
  const days = plan.durationDays;
  if (given.expiresAt !== undefined || days === null) return { ...limits, expiresAt: given.expiresAt ?? null };
  if (plan.expiryStarts === 'first_handshake') return { ...limits, expiresAt: null, handshakeExpiryDays: days };
  return { ...limits, expiresAt: expiryAfter(nowMs, days) };
}

/** `days` days of 24 hours after `startMs`, as stored (docs/decisions.md "Plans"). */
export function expiryAfter(startMs: number, days: number): string {
  return new Date(startMs + days * DAY_MS).toISOString();
}

/**
 * A group's device slots (docs/decisions.md "Device slots"): the largest `max_devices` among the plans of its devices
 * and of the one coming in; none (no cap) when one of those plans has no cap or none of them has a plan.
 */
export function groupSlots(planCaps: readonly (number | null)[]): number | null {
  if (planCaps.length === 0 || planCaps.includes(null)) return null;
  return Math.max(...planCaps.map((cap) => cap ?? 0));
}

/** What a renewal asks (docs/api.md "Renewal"): days or an instant, or a plan to switch to, and a usage reset. */
export interface RenewalTerms {
  days?: number;
  until?: string;
  /** The plan switched to: its days when no `days` is given, and its values. */
  plan?: PlanValues & { id: number };
  resetUsage: boolean;
}

/** Refuses a renewal that says neither how long nor which plan, or says both days and until. */
export function checkRenewal(terms: Pick<RenewalTerms, 'days' | 'until' | 'plan'>): void {
  if (terms.days !== undefined && terms.until !== undefined) {
    throw new AppError('validation_failed', 'give days or until, not both', { until: 'not with days' });
  }
  if (terms.days === undefined && terms.until === undefined && terms.plan === undefined) {
    throw new AppError('validation_failed', 'a renewal needs days, until or plan_id', {
      days: 'days, until or plan_id required',
    });
  }
}

/**
 * The expiry after a renewal: `until` as given; else max(now, the current expiry) + the days (given, or the plan's);
 * null when switching to a plan without a duration and no days are given (the device no longer expires).
 */
export function renewedExpiry(currentExpiresAt: string | null, nowMs: number, terms: RenewalTerms): string | null {
  if (terms.until !== undefined) return new Date(Date.parse(terms.until)).toISOString();
  const days = terms.days ?? terms.plan?.durationDays ?? null;
  if (days === null) return null;
  const currentMs = currentExpiresAt === null ? nowMs : Date.parse(currentExpiresAt);
  return expiryAfter(Math.max(nowMs, currentMs), days);
}
