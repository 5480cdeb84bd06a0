import { AppError } from './errors.ts';

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
