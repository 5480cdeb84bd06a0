/**
 * Usage thresholds (issue 26 item 6, docs/api.md "Reminders") on SQLite and PostgreSQL: device.usage_threshold when
 * a device's count crosses each of USAGE_THRESHOLDS of its allowance, naming the percent, once per threshold per
 * period; both at once when one batch crosses both; again in the next month and after a usage reset.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { ManualClock } from '../../src/domain/clock.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { quietPublisher } from '../../src/services/changes.ts';
import { UsageService } from '../../src/services/usage.ts';
import { UsageThresholds } from '../../src/workers/usage-thresholds.ts';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { usageReporter } from '../support/usage-fixtures.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';

for (const kind of DATABASE_KINDS) {
  describe(`usage thresholds (${kind})`, () => {
    let db: TestDatabase;
    let panel: AppUnderTest;
    let key: string;
    let serverId = 0;
    let use: (deviceId: number, bytes: number) => Promise<void>;
    let thresholds: UsageThresholds;
    const clock = new ManualClock(Date.parse('2026-11-20T12:00:00Z'));
    const api = () => panel.client(key);

    async function posted(deviceId: number): Promise<string[]> {
      const { data } = await api().GET('/api/v1/events', { params: { query: { device_id: deviceId, limit: 100 } } });
      return (data?.data ?? [])
        .filter((e) => e.kind === 'device.usage_threshold')
        .map((e) => /(\d+) %/.exec(e.detail)?.[1] ?? '');
    }
    async function device(): Promise<number> {
      const { data } = await api().POST('/api/v1/devices', { body: { server_id: serverId, data_limit: 1000 } });
      return data?.id ?? 0;
    }

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await buildTestApp(db, {}, clock);
      key = await panel.createKey('shop', 'all', { rateLimitExempt: true });
      const { data } = await api().POST('/api/v1/servers', { body: { name: 'fra-1', country: 'DE' } });
      serverId = data?.id ?? 0;
      const nodeId = (await panel.store.db.selectFrom('nodes').select('id').executeTakeFirstOrThrow()).id;
      use = usageReporter(panel.store.db, clock, nodeId);
      const usage = new UsageService(panel.store.db, clock, new Calendar('UTC'));
      const changes = quietPublisher(panel.store.db, clock);
      thresholds = new UsageThresholds(panel.store.db, usage, changes, {
        percents: [80, 95],
        log: pino({ level: 'silent' }),
      });
    });
    after(async () => {
      await panel.close();
      await db.drop();
    });

    it('posts each threshold once as the count crosses it, both when one batch crosses both', async () => {
      const id = await device();
      const jump = await device();
      await use(id, 700);
      assert.equal(await thresholds.runOnce(), 0);
      await use(id, 150);
      assert.equal(await thresholds.runOnce(), 1);
      assert.equal(await thresholds.runOnce(), 0);
      await use(id, 200);
      await use(jump, 990);
      assert.equal(await thresholds.runOnce(), 3);
      assert.equal(await thresholds.runOnce(), 0);
      assert.deepEqual(await posted(id), ['80', '95']);
      assert.deepEqual((await posted(jump)).sort(), ['80', '95']);
    });

    it('posts them again in the next month and after a usage reset', async () => {
      const id = await device();
      await use(id, 850);
      assert.equal(await thresholds.runOnce(), 1);
      const reset = await api().POST('/api/v1/devices/{id}/usage/reset', { params: { path: { id } } });
      assert.equal(reset.response.status, 200);
      assert.equal(await thresholds.runOnce(), 0);
      await use(id, 850);
      assert.equal(await thresholds.runOnce(), 1);
      clock.advance(Date.parse('2026-12-02T00:00:00Z') - clock.nowMs());
      await use(id, 900);
      assert.equal(await thresholds.runOnce(), 1);
      assert.deepEqual(await posted(id), ['80', '80', '80']);
    });
  });
}
