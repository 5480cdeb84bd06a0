/**
 * Migration 019 on both databases: the fleet's day and month rows start as the sums of the devices' buckets
 * that a panel before it kept (so a database or a backup from before it shows its history on the overview);
 * on PostgreSQL the device search has trigram indexes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { MIGRATION_NAMES, migrate } from '../../src/store/migrate.ts';
import { openStore } from '../../src/store/open.ts';
import { createTestDatabase, DATABASE_KINDS } from '../support/databases.ts';

const FLEET_USAGE = '019-fleet-usage-and-search';
const BEFORE_FLEET_USAGE = MIGRATION_NAMES[MIGRATION_NAMES.indexOf(FLEET_USAGE) - 1] ?? '';

for (const kind of DATABASE_KINDS) {
  describe(`migration 019, fleet usage (${kind})`, () => {
    it("fills the fleet's days and months with the sums of the devices' buckets", async () => {
      const db = await createTestDatabase(kind);
      const store = openStore({ databaseUrl: db.env.DATABASE_URL, dataDir: db.dataDir });
      try {
        await migrate(store, BEFORE_FLEET_USAGE);
        // Buckets as a panel before 019 wrote them (the device ids need no row: the tables have no foreign key).
        for (const [table, rows] of [
          [
            'usage_daily',
            [
              [1, '2026-03-01', 10, 1],
              [2, '2026-03-01', 20, 2],
              [1, '2026-03-02', 5, 0],
            ],
          ],
          [
            'usage_monthly',
            [
              [1, '2026-03-01', 15, 1],
              [2, '2026-03-01', 20, 2],
              [2, '2026-02-01', 7, 7],
            ],
          ],
        ] as const) {
          for (const [device, start, rx, tx] of rows) {
            await sql`insert into ${sql.table(table)} (device_id, start, rx_bytes, tx_bytes)
              values (${device}, ${start}, ${rx}, ${tx})`.execute(store.db);
          }
        }
        await migrate(store);
        const read = (table: 'usage_fleet_daily' | 'usage_fleet_monthly') =>
          store.db.selectFrom(table).select(['start', 'rx_bytes', 'tx_bytes']).orderBy('start').execute();
        const numbers = (rows: { start: string; rx_bytes: number; tx_bytes: number }[]) =>
          rows.map((r) => [r.start, Number(r.rx_bytes), Number(r.tx_bytes)]);
        assert.deepEqual(numbers(await read('usage_fleet_daily')), [
          ['2026-03-01', 30, 3],
          ['2026-03-02', 5, 0],
        ]);
        assert.deepEqual(numbers(await read('usage_fleet_monthly')), [
          ['2026-02-01', 7, 7],
          ['2026-03-01', 35, 3],
        ]);
      } finally {
        await store.close();
        await db.drop();
      }
    });

    it('gives PostgreSQL trigram indexes for the device search, used by a search of three characters', {
      skip: kind === 'postgres' ? false : 'PostgreSQL only',
    }, async () => {
      const db = await createTestDatabase(kind);
      const store = openStore({ databaseUrl: db.env.DATABASE_URL, dataDir: db.dataDir });
      try {
        await migrate(store);
        const { rows } = await sql<{ indexname: string }>`select indexname from pg_indexes
          where tablename = 'devices' and indexname like '%trigrams' order by indexname`.execute(store.db);
        assert.deepEqual(
          rows.map((r) => r.indexname),
          ['devices_external_id_trigrams', 'devices_name_trigrams'],
        );
        // An empty table is read whole whatever its indexes: the plan is asked with table reads priced out.
        const plan = await store.db.transaction().execute(async (tx) => {
          await sql`set local enable_seqscan = off`.execute(tx);
          return sql<{ 'QUERY PLAN': string }>`explain select id from devices
            where name ilike '%anna%' or external_id ilike '%anna%'`.execute(tx);
        });
        assert.match(plan.rows.map((r) => r['QUERY PLAN']).join('\n'), /devices_name_trigrams/);
      } finally {
        await store.close();
        await db.drop();
      }
    });
  });
}
