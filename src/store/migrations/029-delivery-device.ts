import { type Kysely, sql } from 'kysely';

/**
 * A delivery names the device its event is about, so the claim's check "does an earlier delivery of this
 * webhook and device wait" is one lookup in a small index of the pending rows, not a numbering of every pending
 * row joined to its event. Pending rows take their event's device (an indexed lookup each; few are pending);
 * delivered and failed ones are never checked and stay without. Finished rows are pruned by `created_at`.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_deliveries').addColumn('device_id', 'integer').execute();
  await sql`
    update webhook_deliveries
    set device_id = (select e.device_id from events e where e.id = webhook_deliveries.event_id)
    where state = 'pending'
  `.execute(db);
  await db.schema
    .createIndex('deliveries_device_queue')
    .on('webhook_deliveries')
    .columns(['webhook_id', 'device_id', 'event_id'])
    .where(sql.ref('state'), '=', sql.lit('pending'))
    .execute();
  await db.schema
    .createIndex('deliveries_finished')
    .on('webhook_deliveries')
    .column('created_at')
    .where(sql.ref('state'), '!=', sql.lit('pending'))
    .execute();
}
