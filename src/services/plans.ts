import { type Clock, isoAt } from '../domain/clock.ts';
import type { LimitPeriod } from '../domain/devices.ts';
import { planNameTaken, planNotFound } from '../domain/error-cases.ts';
import type { Page, PageRequest } from '../domain/paging.ts';
import { type ExpiryStarts, nextThrottleSpeed, type QuotaAction, quotaActionPair } from '../domain/plans.ts';
import { isUniqueViolation } from '../store/constraint-violations.ts';
import type { Db } from '../store/db.ts';
import { deletePlan, findPlan, forgetPlan, insertPlan, listPlans, type PlanRow, updatePlan } from '../store/plans.ts';
import { planCreated, planDeleted, planUpdated } from './change-kinds.ts';
import type { ChangePublisher } from './changes.ts';
import { keptPages } from './row-views.ts';

/** A plan as docs/api.md "Plans" shows it: every column of its row. */
export type PlanView = PlanRow;

/** A plan's fields as a create gives them; a PATCH gives any of them. */
export interface PlanInput {
  name: string;
  dataLimit?: number;
  limitPeriod?: LimitPeriod;
  speedLimit?: number;
  durationDays?: number | null;
  maxDevices?: number | null;
  quotaAction?: QuotaAction;
  throttleSpeed?: number | null;
  expiryStarts?: ExpiryStarts;
}

/** A copy: listed rows are reused (listPlans). */
function planView(row: Readonly<PlanRow>): PlanView {
  return { ...row };
}

/** A unique-name violation as name_taken; anything else as it was. */
function nameTakenOr(error: unknown, name: string): unknown {
  return isUniqueViolation(error) ? planNameTaken(name) : error;
}

/**
 * Plans (issue 26; docs/api.md "Plans"): the values a shop sells, taken by the devices made from them. A plan's
 * change reaches no device: a device keeps the values it took (docs/decisions.md "Plans").
 */
export class PlanService {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #changes: ChangePublisher;

  constructor(db: Db, clock: Clock, changes: ChangePublisher) {
    this.#db = db;
    this.#clock = clock;
    this.#changes = changes;
  }

  async #row(id: number): Promise<PlanRow> {
    const row = await findPlan(this.#db, id);
    if (!row) throw planNotFound(id);
    return row;
  }

  async get(id: number): Promise<PlanView> {
    return planView(await this.#row(id));
  }

  /** Pages of listed plans' views, kept per reused rows (listPlans). */
  readonly #listedPage = keptPages(planView);

  async list(page: PageRequest): Promise<Page<PlanView>> {
    return this.#listedPage(await listPlans(this.#db, page), page);
  }

  async create(input: PlanInput, actor: string): Promise<PlanView> {
    const quota = quotaActionPair(input.quotaAction ?? 'cut', input.throttleSpeed ?? null);
    const now = isoAt(this.#clock.nowMs());
    try {
      const row = await this.#changes.commit(async (tx) => {
        const created = await insertPlan(tx, {
          name: input.name,
          data_limit: input.dataLimit ?? 0,
          limit_period: input.limitPeriod ?? 'monthly',
          speed_limit: input.speedLimit ?? 0,
          duration_days: input.durationDays ?? null,
          max_devices: input.maxDevices ?? null,
          quota_action: quota.quotaAction,
          throttle_speed: quota.throttleSpeed,
          expiry_starts: input.expiryStarts ?? 'created',
          created_at: now,
          updated_at: now,
        });
        return { result: created, change: planCreated(created, actor) };
      });
      return planView(row);
    } catch (error) {
      throw nameTakenOr(error, input.name);
    }
  }

  async update(id: number, patch: Partial<PlanInput>, actor: string): Promise<PlanView> {
    try {
      const row = await this.#changes.commit(async (tx) => {
        const before = await findPlan(tx, id);
        if (!before) throw planNotFound(id);
        const quota = nextThrottleSpeed(
          { quotaAction: before.quota_action, throttleSpeed: before.throttle_speed },
          { quotaAction: patch.quotaAction, throttleSpeed: patch.throttleSpeed },
        );
        const after = await updatePlan(tx, id, {
          name: patch.name,
          data_limit: patch.dataLimit,
          limit_period: patch.limitPeriod,
          speed_limit: patch.speedLimit,
          duration_days: patch.durationDays,
          max_devices: patch.maxDevices,
          quota_action: quota.quotaAction,
          throttle_speed: quota.throttleSpeed,
          expiry_starts: patch.expiryStarts,
          updated_at: isoAt(this.#clock.nowMs()),
        });
        if (!after) throw planNotFound(id);
        return { result: after, change: planUpdated(before, after, actor) };
      });
      return planView(row);
    } catch (error) {
      throw patch.name === undefined ? error : nameTakenOr(error, patch.name);
    }
  }

  /** Devices made from the plan keep the values they took (docs/decisions.md "Plans"). */
  async delete(id: number, actor: string): Promise<void> {
    await this.#changes.commit(async (tx) => {
      const before = await findPlan(tx, id);
      if (!before || !(await deletePlan(tx, id))) throw planNotFound(id);
      await forgetPlan(tx, id);
      return { result: undefined, change: planDeleted(before, actor) };
    });
  }
}
