import type { Kysely } from 'kysely';

/**
 * Devices from plans (issue 26): the plan a device was made from (null: none, or the plan was deleted) and what
 * the device does at its data limit (every device before is `cut`, as the node treated it), and the days its expiry
 * lies after its first handshake while that has not come (a plan with `expiry_starts: first_handshake`).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('devices').addColumn('plan_id', 'integer').execute();
  await db.schema
    .alterTable('devices')
    .addColumn('quota_action', 'text', (c) => c.notNull().defaultTo('cut'))
    .execute();
  await db.schema.alterTable('devices').addColumn('throttle_speed', 'integer').execute();
  await db.schema.alterTable('devices').addColumn('handshake_expiry_days', 'integer').execute();
  // A plan's devices are counted per group for its device slots.
  await db.schema.createIndex('devices_plan').on('devices').column('plan_id').execute();
  // Devices waiting for their first handshake, read at every usage collection that brought a handshake.
  await db.schema
    .createIndex('devices_awaiting_handshake')
    .on('devices')
    .column('handshake_expiry_days')
    .where('handshake_expiry_days', 'is not', null)
    .execute();
}
