import type { Kysely } from 'kysely';

/**
 * Usage thresholds (issue 26): the highest percent of its allowance a device was told it used, and the period that
 * was in (its key: the usage reset time, and for a monthly count its month), so each threshold goes once per period.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('devices')
    .addColumn('threshold_notified', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable('devices')
    .addColumn('threshold_period', 'text', (c) => c.notNull().defaultTo(''))
    .execute();
}
