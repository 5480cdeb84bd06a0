import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Pages of one server's devices walk this index in id order instead of sorting the whole server.
  await db.schema.createIndex('devices_server_id').on('devices').columns(['server_id', 'id']).execute();
}
