import type { Kysely } from 'kysely';
import type { MigrationContext } from '../migration-context.ts';

export async function up(db: Kysely<unknown>, { idType, id }: MigrationContext): Promise<void> {
  await db.schema
    .createTable('devices')
    .addColumn('id', idType, id)
    .addColumn('server_id', 'integer', (c) => c.notNull().references('servers.id'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('external_id', 'text')
    .addColumn('metadata', 'text')
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('public_key', 'text', (c) => c.notNull())
    .addColumn('private_key', 'text')
    .addColumn('enabled', 'integer', (c) => c.notNull())
    .addColumn('data_limit', 'bigint', (c) => c.notNull())
    .addColumn('limit_period', 'text', (c) => c.notNull())
    .addColumn('usage_reset_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text')
    .addColumn('speed_limit', 'integer', (c) => c.notNull())
    .addColumn('last_handshake', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  // The rules of docs/decisions.md "Device names and addresses" held by the database too, so concurrent
  // creates cannot break them.
  await db.schema.createIndex('devices_server_name').on('devices').columns(['server_id', 'name']).unique().execute();
  await db.schema
    .createIndex('devices_server_address')
    .on('devices')
    .columns(['server_id', 'address'])
    .unique()
    .execute();
  await db.schema
    .createIndex('devices_server_key')
    .on('devices')
    .columns(['server_id', 'public_key'])
    .unique()
    .execute();
  await db.schema.createIndex('devices_external_id').on('devices').columns(['external_id', 'id']).execute();
}
