/** A node's desired state read a page of devices at a time (src/services/desired-state.ts). */
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { collectAll } from '../../src/domain/async-iterables.ts';
import { isoAt, ManualClock } from '../../src/domain/clock.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { desiredStateOfNode } from '../../src/services/desired-state.ts';
import { UsageService } from '../../src/services/usage.ts';
import { DATABASE_KINDS } from '../support/databases.ts';
import { migratedStoreForSuite, seedFleet, seedNode } from '../support/usage-fixtures.ts';

for (const kind of DATABASE_KINDS) {
  describe(`desired state of a node (${kind})`, () => {
    const suite = migratedStoreForSuite(kind);
    const clock = new ManualClock(Date.parse('2026-11-24T10:00:00Z'));

    beforeEach(async () => {
      for (const table of ['devices', 'servers', 'nodes'] as const) await suite.store.db.deleteFrom(table).execute();
    });

    it('holds every enabled device of each server across pages, in id order, and no disabled one', async () => {
      const db = suite.store.db;
      const now = isoAt(clock.nowMs());
      const node = await seedNode(db, 'n', now);
      // 2,501 a server: two full pages of 1,000 and a part, and each 7th device disabled.
      await seedFleet(db, node, { devices: 5002, servers: 2 }, now, (values, i) => ({
        ...values,
        enabled: i % 7 === 3 ? 0 : 1,
      }));
      const usage = new UsageService(db, clock, new Calendar('UTC'));
      const states = await collectAll(desiredStateOfNode(db, node.id, usage));
      assert.equal(states.length, 2);
      for (const state of states) {
        const rows = await db
          .selectFrom('devices')
          .select(['id', 'enabled'])
          .where('server_id', '=', state.server.serverId)
          .orderBy('id')
          .execute();
        assert.equal(rows.length, 2501);
        const enabled = rows.filter((r) => r.enabled === 1).map((r) => r.id);
        assert.deepEqual(
          state.peers.map((p) => p.deviceId),
          enabled,
        );
      }
    });

    it('sends the quota action and throttle speed of a throttled device only (issue 26 wire contract)', async () => {
      const db = suite.store.db;
      const now = isoAt(clock.nowMs());
      const node = await seedNode(db, 'n', now);
      await seedFleet(db, node, { devices: 2, servers: 1 }, now, (values, i) => ({
        ...values,
        data_limit: 1_000_000,
        quota_action: i === 1 ? 'throttle' : 'cut',
        throttle_speed: i === 1 ? 512 : null,
      }));
      const usage = new UsageService(db, clock, new Calendar('UTC'));
      const [state] = await collectAll(desiredStateOfNode(db, node.id, usage));
      const [cut, throttled] = state?.peers ?? [];
      assert.ok(cut && throttled);
      // A cut device's limits are what an older panel sends: its digest and the node's behaviour stay.
      assert.equal('quotaAction' in cut.limits, false);
      assert.equal('throttleKbps' in cut.limits, false);
      assert.deepEqual(
        [Reflect.get(throttled.limits, 'quotaAction'), Reflect.get(throttled.limits, 'throttleKbps')],
        ['throttle', 512],
      );
    });
  });
}
