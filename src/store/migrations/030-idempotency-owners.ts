import { type Kysely, sql } from 'kysely';
import type { MigrationContext } from '../migration-context.ts';

/**
 * An Idempotency-Key belongs to its owner: an API key (as before) or a console user, so the console may send
 * one too. Exactly one owner column is set; each owner has its own unique index on (owner, key), the lookup
 * the old primary key served. The table is made anew (SQLite can neither drop a primary key nor make a column
 * nullable); rows are copied in one statement and keep their API key. Both owners' rows go with their owner.
 * An id is the primary key now: sealed columns (response_body) and backups page by a table's primary key.
 */
export async function up(db: Kysely<unknown>, { idType, id }: MigrationContext): Promise<void> {
  await db.schema.alterTable('idempotency_keys').renameTo('idempotency_keys_029').execute();
  await db.schema
    .createTable('idempotency_keys')
    .addColumn('id', idType, id)
    .addColumn('api_key_id', 'integer', (c) => c.references('api_keys.id').onDelete('cascade'))
    .addColumn('console_user_id', 'integer', (c) => c.references('console_users.id').onDelete('cascade'))
    .addColumn('idempotency_key', 'text', (c) => c.notNull())
    .addColumn('fingerprint', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('response_body', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addCheckConstraint('idempotency_keys_one_owner', sql`(api_key_id is null) <> (console_user_id is null)`)
    .execute();
  await sql`
    insert into idempotency_keys
      (api_key_id, idempotency_key, fingerprint, state, status_code, response_body, created_at)
    select api_key_id, idempotency_key, fingerprint, state, status_code, response_body, created_at
    from idempotency_keys_029
  `.execute(db);
  await db.schema.dropTable('idempotency_keys_029').execute();
  await db.schema
    .createIndex('idempotency_keys_api_key')
    .on('idempotency_keys')
    .columns(['api_key_id', 'idempotency_key'])
    .unique()
    .execute();
  await db.schema
    .createIndex('idempotency_keys_console_user')
    .on('idempotency_keys')
    .columns(['console_user_id', 'idempotency_key'])
    .unique()
    .execute();
  await db.schema.createIndex('idempotency_keys_created').on('idempotency_keys').column('created_at').execute();
}
