import type { Kysely } from 'kysely';

/**
 * A device's current day of usage lives in its own row: a collection round then writes one row version per device
 * that moved bytes (its row) instead of two (its row and its day bucket), the main cost of a round at 1,000,000
 * devices (docs/benchmarks.md). `usage_day` is the day (`YYYY-MM-DD`, panel time zone) whose bytes `day_rx`/`day_tx`
 * hold, '' before any. When a batch of a later day comes, the row's day moves to `rolled_*` and from there, in the
 * same transaction, into usage_daily (src/store/usage.ts), so `rolled_day` is '' between transactions. A device's
 * days are its usage_daily rows plus its row's day; rows of days before this migration stay in usage_daily, where
 * a day may also be the row's current day: readers add the two.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const columns: [string, 'bigint' | 'text', unknown][] = [
    ['usage_day', 'text', ''],
    ['day_rx', 'bigint', 0],
    ['day_tx', 'bigint', 0],
    ['rolled_day', 'text', ''],
    ['rolled_rx', 'bigint', 0],
    ['rolled_tx', 'bigint', 0],
  ];
  for (const [name, type, value] of columns) {
    await db.schema
      .alterTable('devices')
      .addColumn(name, type, (c) => c.notNull().defaultTo(value))
      .execute();
  }
}
