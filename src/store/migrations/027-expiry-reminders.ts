import type { Kysely } from 'kysely';

/**
 * Expiry reminders (issue 26): the expiry a device was last reminded of and the reminder's window (ms before it),
 * so each reminder goes once per expiry and a new expiry (a renewal) is reminded again; and an index on expiry for
 * the reminder rounds, which read only devices expiring within the longest window.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('devices').addColumn('reminded_expiry', 'text').execute();
  await db.schema.alterTable('devices').addColumn('reminded_window_ms', 'bigint').execute();
  await db.schema
    .createIndex('devices_expires')
    .on('devices')
    .column('expires_at')
    .where('expires_at', 'is not', null)
    .execute();
}
