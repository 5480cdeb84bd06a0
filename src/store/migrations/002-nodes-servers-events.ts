import type { Kysely } from 'kysely';
import type { MigrationContext } from '../migration-context.ts';

export async function up(db: Kysely<unknown>, { idType, id }: MigrationContext): Promise<void> {
  await db.schema
    .createTable('nodes')
    .addColumn('id', idType, id)
    .addColumn('name', 'text', (c) => c.notNull().unique())
    .addColumn('url', 'text')
    .addColumn('token', 'text')
    .addColumn('public_host', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('driver', 'text')
    .addColumn('version', 'text')
    .addColumn('last_seen_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('servers')
    .addColumn('id', idType, id)
    .addColumn('node_id', 'integer', (c) => c.notNull().references('nodes.id'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('country', 'text', (c) => c.notNull())
    .addColumn('city', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('endpoint', 'text', (c) => c.notNull())
    .addColumn('listen_port', 'integer', (c) => c.notNull())
    .addColumn('private_key', 'text', (c) => c.notNull())
    .addColumn('public_key', 'text', (c) => c.notNull())
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('subnet', 'text', (c) => c.notNull())
    .addColumn('dns', 'text', (c) => c.notNull())
    .addColumn('dns_on_server', 'integer', (c) => c.notNull())
    .addColumn('mtu', 'integer', (c) => c.notNull())
    .addColumn('persistent_keepalive', 'integer', (c) => c.notNull())
    .addColumn('client_allowed_ips', 'text', (c) => c.notNull())
    .addColumn('capacity', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  // Every server's UDP socket lives in its node's host namespace.
  await db.schema.createIndex('servers_node_port').on('servers').columns(['node_id', 'listen_port']).unique().execute();
  await db.schema.createIndex('servers_country').on('servers').column('country').execute();

  await db.schema
    .createTable('events')
    .addColumn('id', idType, id)
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('server_id', 'integer')
    .addColumn('server_name', 'text')
    .addColumn('device_id', 'integer')
    .addColumn('device_name', 'text')
    .addColumn('node_name', 'text')
    .addColumn('ip', 'text')
    .addColumn('country', 'text')
    .addColumn('detail', 'text', (c) => c.notNull())
    .addColumn('actor', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('events_created').on('events').column('created_at').execute();
  await db.schema.createIndex('events_server').on('events').columns(['server_id', 'id']).execute();
  await db.schema.createIndex('events_device').on('events').columns(['device_id', 'id']).execute();
}
