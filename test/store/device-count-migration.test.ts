/** Migration 018 on both databases: each server's device_count starts as COUNT(*) of the devices it holds. */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { migrate } from '../../src/store/migrate.ts';
import { openStore } from '../../src/store/open.ts';
import { createTestDatabase, DATABASE_KINDS } from '../support/databases.ts';
import { deviceValues, seedNode, seedServer } from '../support/usage-fixtures.ts';

const NOW = '2026-03-04T05:06:07.089Z';

for (const kind of DATABASE_KINDS) {
  describe(`migration 018 counts each server's devices (${kind})`, () => {
    const made = createTestDatabase(kind);
    after(async () => (await made).drop());

    it('fills device_count from the devices, an empty server at 0', async () => {
      const database = await made;
      const store = openStore({ databaseUrl: database.env.DATABASE_URL, dataDir: database.dataDir });
      try {
        await migrate(store, '017-dual-stack-addresses');
        const node = await seedNode(store.db, 'n1', NOW);
        const counts = [3, 0, 2];
        for (const [s, count] of counts.entries()) {
          const fields = { name: `s${s}`, listenPort: 51820 + s, subnet: `10.${s}.0.0/24`, capacity: 253 };
          const server = await seedServer(store.db, node, fields, NOW);
          for (let d = 0; d < count; d++) {
            const device = deviceValues(server.id, { name: `d${d}`, address: `10.${s}.0.${d + 2}` }, NOW);
            await store.db.insertInto('devices').values(device).execute();
          }
        }
        await migrate(store);
        const rows = await store.db.selectFrom('servers').select('device_count').orderBy('id').execute();
        assert.deepEqual(
          rows.map((r) => r.device_count),
          counts,
        );
      } finally {
        await store.close();
      }
    });
  });
}
