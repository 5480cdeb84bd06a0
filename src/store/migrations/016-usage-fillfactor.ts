import { type Kysely, sql } from 'kysely';
import type { MigrationContext } from '../migration-context.ts';

/**
 * PostgreSQL: each collection round writes a new version of the row of every device that moved bytes
 * and of its day and month buckets. With pages filled only half, the new version fits on the row's own
 * page (a HOT update): no index entry is added and the old version is pruned in place, so a round takes
 * about a third less time and the tables and their indexes do not bloat between vacuums
 * (docs/benchmarks.md). Pages written before keep their fill until their rows move. SQLite writes rows in
 * place and has no such setting.
 */
export async function up(db: Kysely<unknown>, { dialect }: MigrationContext): Promise<void> {
  if (dialect !== 'postgres') return;
  for (const table of ['devices', 'usage_daily', 'usage_monthly']) {
    await sql`alter table ${sql.table(table)} set (fillfactor = 50)`.execute(db);
  }
}
