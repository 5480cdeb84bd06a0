import { type Kysely, sql } from 'kysely';
import type { MigrationContext } from '../migration-context.ts';

/**
 * The whole fleet's usage by day and by month (panel time zone), so the overview's figures cost one row
 * each to read however many devices there are. Each usage batch adds its bytes here in the transaction
 * that adds them to the devices' buckets (src/store/usage.ts), so the two never disagree. These rows
 * are traffic that happened: deleting a device or resetting its usage leaves them as they are.
 * Filled here from the devices' buckets as they stand (a backup made before this migration is restored
 * at its own level and then migrated, so it gets them too; bytes of devices deleted before are lost).
 */
export async function up(db: Kysely<unknown>, { dialect }: MigrationContext): Promise<void> {
  for (const [fleet, perDevice] of [
    ['usage_fleet_daily', 'usage_daily'],
    ['usage_fleet_monthly', 'usage_monthly'],
  ] as const) {
    await db.schema
      .createTable(fleet)
      .addColumn('start', 'text', (c) => c.primaryKey())
      .addColumn('rx_bytes', 'bigint', (c) => c.notNull())
      .addColumn('tx_bytes', 'bigint', (c) => c.notNull())
      .execute();
    await sql`insert into ${sql.table(fleet)} (start, rx_bytes, tx_bytes)
      select start, sum(rx_bytes), sum(tx_bytes) from ${sql.table(perDevice)} group by start`.execute(db);
    // Every batch rewrites today's and this month's row: half-empty pages keep those updates HOT (see 016).
    if (dialect === 'postgres') await sql`alter table ${sql.table(fleet)} set (fillfactor = 50)`.execute(db);
  }
}
