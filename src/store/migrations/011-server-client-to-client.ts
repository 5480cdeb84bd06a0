import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Whether clients of a server may reach each other (client isolation, docs/dataplane.md); off unless asked.
  await db.schema
    .alterTable('servers')
    .addColumn('client_to_client', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
}
