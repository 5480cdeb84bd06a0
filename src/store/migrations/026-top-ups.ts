import type { Kysely } from 'kysely';

/**
 * Top-ups (issue 26): bytes added to a device's allowance for one period, and the month (`YYYY-MM`, panel zone) they
 * were added in: a monthly count drops them when its month is over; a total count keeps them until a usage reset.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('devices')
    .addColumn('top_up_bytes', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable('devices')
    .addColumn('top_up_month', 'text', (c) => c.notNull().defaultTo(''))
    .execute();
}
