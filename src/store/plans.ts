import type { Insertable, Selectable, Updateable } from 'kysely';
import type { PageRequest } from '../domain/paging.ts';
import type { PlanValues } from '../domain/plans.ts';
import type { Db, Queryable } from './db.ts';
import { ReusedPageShape, type ReusedRows } from './query-shapes.ts';
import type { PlanTable } from './schema.ts';

export type PlanRow = Selectable<PlanTable>;

export function insertPlan(db: Queryable, plan: Insertable<PlanTable>): Promise<PlanRow> {
  return db.insertInto('plans').values(plan).returningAll().executeTakeFirstOrThrow();
}

export function findPlan(db: Queryable, id: number): Promise<PlanRow | undefined> {
  return db.selectFrom('plans').selectAll().where('id', '=', id).executeTakeFirst();
}

const planPage = new ReusedPageShape(
  (db, limit, afterId: number) =>
    db.selectFrom('plans').selectAll().where('id', '>', afterId).orderBy('id').limit(limit),
  [-1001],
);

/** Oldest first, `limit + 1` rows (see toPage). */
export function listPlans(db: Db, page: PageRequest): Promise<ReusedRows<PlanRow>> {
  return planPage.execute(db, page.limit + 1, page.afterId);
}

export function updatePlan(db: Queryable, id: number, changes: Updateable<PlanTable>): Promise<PlanRow | undefined> {
  return db.updateTable('plans').set(changes).where('id', '=', id).returningAll().executeTakeFirst();
}

export async function deletePlan(db: Queryable, id: number): Promise<boolean> {
  const result = await db.deleteFrom('plans').where('id', '=', id).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/** The values a device takes from the plan. */
export function planValues(row: PlanRow): PlanValues {
  return {
    dataLimit: row.data_limit,
    limitPeriod: row.limit_period,
    speedLimit: row.speed_limit,
    durationDays: row.duration_days,
    quotaAction: row.quota_action,
    throttleSpeed: row.throttle_speed,
    expiryStarts: row.expiry_starts,
  };
}

/** Devices made from a deleted plan keep their values and name no plan (docs/decisions.md "Plans"). */
export async function forgetPlan(db: Queryable, id: number): Promise<void> {
  await db.updateTable('devices').set({ plan_id: null }).where('plan_id', '=', id).execute();
}
