import type { Kysely } from 'kysely';

/**
 * A device's month is the sum of its days: every batch was always added to its day bucket and its month bucket in
 * the same transaction, in the same time zone, and day buckets are never pruned. Writing the month too cost
 * PostgreSQL a third row version per device per collection round, the round's main cost at 1,000,000 devices
 * (docs/benchmarks.md); the usage report now sums the days of each month (an index range of at most 24 months of
 * days per device), so the month buckets go.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('usage_monthly').execute();
}
