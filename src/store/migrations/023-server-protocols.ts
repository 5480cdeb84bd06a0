import type { Kysely } from 'kysely';

/**
 * AmneziaWG servers (issue 24): a server's protocol (every server before is WireGuard) and its obfuscation
 * parameters (JSON text, null for WireGuard), and the protocols each node reported it can run (JSON text; null
 * until it reports, read as WireGuard only).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('servers')
    .addColumn('protocol', 'text', (c) => c.notNull().defaultTo('wireguard'))
    .execute();
  await db.schema.alterTable('servers').addColumn('obfuscation', 'text').execute();
  await db.schema.alterTable('nodes').addColumn('protocols', 'text').execute();
}
