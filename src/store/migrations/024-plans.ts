import type { Kysely } from 'kysely';
import type { MigrationContext } from '../migration-context.ts';

/**
 * Plans (issue 26): named sets of device values a shop sells. Limits are stored as devices store theirs; a
 * plan without a duration or a device count holds null there. Names are unique.
 */
export async function up(db: Kysely<unknown>, { idType, id }: MigrationContext): Promise<void> {
  await db.schema
    .createTable('plans')
    .addColumn('id', idType, id)
    .addColumn('name', 'text', (c) => c.notNull().unique())
    .addColumn('data_limit', 'bigint', (c) => c.notNull())
    .addColumn('limit_period', 'text', (c) => c.notNull())
    .addColumn('speed_limit', 'integer', (c) => c.notNull())
    .addColumn('duration_days', 'integer')
    .addColumn('max_devices', 'integer')
    .addColumn('quota_action', 'text', (c) => c.notNull())
    .addColumn('throttle_speed', 'integer')
    .addColumn('expiry_starts', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
}
