import { type Insertable, type Selectable, sql, type Updateable } from 'kysely';
import type { PageRequest } from '../domain/paging.ts';
import type { PlanValues } from '../domain/plans.ts';
import type { Db, Dialect, Queryable } from './db.ts';
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

/** 'grps': the first advisory lock key of device groups; the second is the hash of the group's external id. */
const GROUP_LOCK_KEY = 0x67727073;

/**
 * Holds the group until the transaction ends, so two creates or moves into it count its devices one after the
 * other. SQLite runs one write transaction at a time, which is that lock already.
 */
export async function lockGroup(db: Queryable, externalId: string, dialect: Dialect): Promise<void> {
  if (dialect !== 'postgres') return;
  await sql`select pg_advisory_xact_lock(${GROUP_LOCK_KEY}, hashtext(${externalId}))`.execute(db);
}

/** How many devices the group holds and the device caps of the plans its devices came from (one per plan). */
export async function groupPlanCaps(
  db: Queryable,
  externalId: string,
): Promise<{ devices: number; caps: (number | null)[] }> {
  const [count, plans] = await Promise.all([
    db
      .selectFrom('devices')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('external_id', '=', externalId)
      .executeTakeFirstOrThrow(),
    db
      .selectFrom('plans')
      .select('max_devices')
      .where('id', 'in', (eb) =>
        eb
          .selectFrom('devices')
          .select('plan_id')
          .where('external_id', '=', externalId)
          .where('plan_id', 'is not', null),
      )
      .execute(),
  ]);
  return { devices: Number(count.n), caps: plans.map((p) => p.max_devices) };
}
