import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // A remote agent's pinned certificate (trusted instead of a CA), and why its last heartbeat failed.
  await db.schema.alterTable('nodes').addColumn('cert_sha256', 'text').execute();
  await db.schema.alterTable('nodes').addColumn('last_error', 'text').execute();
}
