import { deviceLimitReached } from '../domain/error-cases.ts';
import { groupSlots } from '../domain/plans.ts';
import type { Dialect, Tx } from '../store/db.ts';
import { findPlan, groupPlanCaps, lockGroup } from '../store/plans.ts';

/**
 * Checks that the group `externalId` has a free device slot for a device of plan `planId` coming in (created or
 * moved there), holding the group until the transaction ends: 409 device_limit_reached, nothing changed, when it
 * has none (docs/decisions.md "Device slots").
 */
export async function claimGroupSlot(
  tx: Tx,
  dialect: Dialect,
  externalId: string,
  planId: number | null,
): Promise<void> {
  await lockGroup(tx, externalId, dialect);
  const { devices, caps } = await groupPlanCaps(tx, externalId);
  const incoming = planId === null ? undefined : await findPlan(tx, planId);
  const slots = groupSlots(incoming === undefined ? caps : [...caps, incoming.max_devices]);
  if (slots !== null && devices >= slots) throw deviceLimitReached(externalId, slots);
}
