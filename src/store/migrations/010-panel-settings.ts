import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Settings of the panel as a whole (e.g. which panel secret encrypts its keys); in every backup.
  await db.schema
    .createTable('panel_settings')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('value', 'text', (c) => c.notNull())
    .execute();
}
