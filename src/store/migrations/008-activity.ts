import type { Kysely } from 'kysely';
import type { MigrationContext } from '../migration-context.ts';

export async function up(db: Kysely<unknown>, { idType, id }: MigrationContext): Promise<void> {
  // The activity log: one row per change, written in the transaction of the change.
  await db.schema
    .createTable('activity')
    .addColumn('id', idType, id)
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('actor', 'text', (c) => c.notNull())
    .addColumn('request_id', 'text')
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('resource', 'text', (c) => c.notNull())
    .addColumn('resource_id', 'text', (c) => c.notNull())
    .addColumn('summary', 'text', (c) => c.notNull())
    .addColumn('before', 'text')
    .addColumn('after', 'text')
    .execute();
  await db.schema.createIndex('activity_created').on('activity').column('created_at').execute();
  await db.schema.createIndex('activity_resource').on('activity').columns(['resource', 'resource_id', 'id']).execute();
}
