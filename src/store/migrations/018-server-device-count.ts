import { type Kysely, sql } from 'kysely';

/**
 * Each server's number of devices kept on its row (issue 16), so placing a device (`server_id: auto`), the
 * capacity check of a create or move and the server and node views read one row per server instead of
 * counting devices, a cost that grew with the panel. Filled here from the devices; from then on every path
 * that adds, moves or removes a device changes it in the same transaction (src/store/devices.ts), the
 * servers locked lowest id first. A backup carries the column; one made before this migration is restored at
 * its level and migrated, so it is counted here.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('servers')
    .addColumn('device_count', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await sql`update servers
    set device_count = (select count(*) from devices where devices.server_id = servers.id)`.execute(db);
}
