import type { Kysely } from 'kysely';
import type { MigrationContext } from '../migration-context.ts';

export async function up(db: Kysely<unknown>, { idType, id }: MigrationContext): Promise<void> {
  // Notification mails, written in the transaction of the change they tell about; the mail sender
  // sends and retries them.
  await db.schema
    .createTable('mail_outbox')
    .addColumn('id', idType, id)
    .addColumn('topic', 'text', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('text_body', 'text', (c) => c.notNull())
    .addColumn('html_body', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull())
    .addColumn('next_attempt_at', 'text')
    .addColumn('locked_until', 'text')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('sent_at', 'text')
    .execute();
  await db.schema.createIndex('mail_outbox_due').on('mail_outbox').columns(['state', 'next_attempt_at']).execute();

  // Devices that reached their limit or expired, waiting for the next digest mail (at most one a minute).
  await db.schema
    .createTable('mail_notices')
    .addColumn('id', idType, id)
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('line', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  // One row: when the last digest was made, claimed by a conditional update so panels sharing a
  // database make one a minute together.
  await db.schema
    .createTable('mail_digest')
    .addColumn('id', 'integer', (c) => c.primaryKey())
    .addColumn('last_made_at', 'text')
    .execute();
}
