import { type Kysely, sql } from 'kysely';
import type { MigrationContext } from '../migration-context.ts';

export async function up(db: Kysely<unknown>, { idType, id }: MigrationContext): Promise<void> {
  // The people who sign in to the console (src/store/console-users.ts).
  await db.schema
    .createTable('console_users')
    .addColumn('id', idType, id)
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('password_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addColumn('last_sign_in_at', 'text')
    .execute();
  // Sign-in ignores the case of a name, so two names that differ only in case could not both sign in.
  await db.schema.createIndex('console_users_name').on('console_users').expression(sql`lower(name)`).unique().execute();

  // Their sessions, in the database so that every panel sharing it honours them and a removal ends them at once.
  await db.schema
    .createTable('console_sessions')
    .addColumn('id', idType, id)
    .addColumn('user_id', 'integer', (c) => c.notNull().references('console_users.id').onDelete('cascade'))
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('last_used_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('console_sessions_user').on('console_sessions').column('user_id').execute();
}
