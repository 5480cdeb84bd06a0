import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // One link per device: the device id is the key, so a new link replaces the old one.
  await db.schema
    .createTable('share_links')
    .addColumn('device_id', 'integer', (c) => c.primaryKey().references('devices.id').onDelete('cascade'))
    .addColumn('token', 'text', (c) => c.notNull().unique())
    .addColumn('expires_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
}
