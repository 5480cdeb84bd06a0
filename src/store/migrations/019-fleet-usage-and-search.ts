import { type Kysely, sql } from 'kysely';
import type { MigrationContext } from '../migration-context.ts';

/**
 * Issue 14's overview and device search. The whole fleet's usage by day and by month (panel time zone), so
 * the overview's figures cost one row each to read however many devices there are. Each usage batch adds
 * its bytes here in the transaction that adds them to the devices' buckets (src/store/usage.ts), so the two
 * never disagree. These rows are traffic that happened: deleting a device or resetting its usage leaves
 * them as they are. Filled here from the devices' buckets as they stand (a backup made before this migration
 * is restored at its own level and then migrated, so it gets them too; bytes of devices deleted before are
 * lost).
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
  if (dialect === 'postgres') await trigramIndexes(db);
}

/**
 * PostgreSQL: trigram indexes turn a device search (ILIKE '%text%', src/store/text-search.ts) of three
 * characters or more into an index lookup instead of a pass over the table (at 100,000 devices 10-16 ms
 * instead of about 150 ms, under 1 ms once vacuumed: docs/benchmarks.md, docs/decisions.md "Device search").
 * pg_trgm comes with PostgreSQL's contrib and is a trusted extension (PostgreSQL 13 on): a user who may create
 * in the database may add it. Where it cannot be added (no contrib, no right), the search still works by
 * reading the table, so that failure is undone and the migration goes on.
 * Usage rounds do not change these columns, so their updates stay HOT (see 016).
 */
async function trigramIndexes(db: Kysely<unknown>): Promise<void> {
  await sql`savepoint trigram`.execute(db);
  try {
    await sql`create extension if not exists pg_trgm`.execute(db);
  } catch {
    await sql`rollback to savepoint trigram`.execute(db);
    return;
  }
  await sql`release savepoint trigram`.execute(db);
  for (const column of ['name', 'external_id']) {
    await sql`create index ${sql.id(`devices_${column}_trigrams`)} on devices
      using gin (${sql.id(column)} gin_trgm_ops)`.execute(db);
  }
}
