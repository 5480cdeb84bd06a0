import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // A device's running counts, so lists and status filters need no join: the calendar month's, and
  // the period's (what counts toward the limit). `usage_month` is the month both belong to.
  const columns: [string, 'bigint' | 'text', unknown][] = [
    ['month_rx', 'bigint', 0],
    ['month_tx', 'bigint', 0],
    ['period_rx', 'bigint', 0],
    ['period_tx', 'bigint', 0],
    ['usage_month', 'text', ''],
    // The node journal and its meter of the device that the counts above include (see the agent's ledger).
    ['meter_journal', 'text', ''],
    ['meter', 'bigint', 0],
  ];
  for (const [name, type, value] of columns) {
    await db.schema
      .alterTable('devices')
      .addColumn(name, type, (c) => c.notNull().defaultTo(value))
      .execute();
  }
  // Set when device.limit_reached was posted for the period; cleared when the period restarts.
  await db.schema.alterTable('devices').addColumn('limit_reached_at', 'text').execute();
  // expires_at until device.expired has been posted for it, then null: the expiry job's work list.
  await db.schema.alterTable('devices').addColumn('expiry_due_at', 'text').execute();
  await db.schema.createIndex('devices_expiry_due').on('devices').column('expiry_due_at').execute();
  await sql`update devices set expiry_due_at = expires_at`.execute(db);

  for (const table of ['usage_daily', 'usage_monthly']) {
    await db.schema
      .createTable(table)
      .addColumn('device_id', 'integer', (c) => c.notNull())
      .addColumn('start', 'text', (c) => c.notNull())
      .addColumn('rx_bytes', 'bigint', (c) => c.notNull())
      .addColumn('tx_bytes', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint(`${table}_pk`, ['device_id', 'start'])
      .execute();
  }

  // Every node batch stored, so a batch sent twice is counted once.
  await db.schema
    .createTable('usage_batches')
    .addColumn('node_id', 'integer', (c) => c.notNull())
    .addColumn('journal_id', 'text', (c) => c.notNull())
    .addColumn('seq', 'bigint', (c) => c.notNull())
    .addColumn('stored_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('usage_batches_pk', ['node_id', 'journal_id', 'seq'])
    .execute();
  await db.schema.createIndex('usage_batches_stored').on('usage_batches').column('stored_at').execute();
}
