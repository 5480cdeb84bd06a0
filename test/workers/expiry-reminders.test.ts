/**
 * Expiry reminders (issue 26 item 6, docs/api.md "Reminders") on SQLite and PostgreSQL: device.expiring at each
 * of EXPIRY_REMINDERS before expires_at, once per reminder per expiry; a device made inside several windows gets
 * the nearest one's only; a renewal re-arms them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { ManualClock } from '../../src/domain/clock.ts';
import { quietPublisher } from '../../src/services/changes.ts';
import { ExpiryReminders } from '../../src/workers/expiry-reminders.ts';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';

const HOUR_MS = 3_600_000;
const START_MS = Date.parse('2026-11-20T12:00:00Z');

for (const kind of DATABASE_KINDS) {
  describe(`expiry reminders (${kind})`, () => {
    let db: TestDatabase;
    let panel: AppUnderTest;
    let key: string;
    let serverId = 0;
    let reminders: ExpiryReminders;
    const clock = new ManualClock(START_MS);
    const api = () => panel.client(key);

    async function reminded(deviceId: number): Promise<string[]> {
      const { data } = await api().GET('/api/v1/events', { params: { query: { device_id: deviceId, limit: 100 } } });
      return (data?.data ?? []).filter((e) => e.kind === 'device.expiring').map((e) => e.detail);
    }
    async function device(expiresInHours: number): Promise<number> {
      const expires_at = new Date(clock.nowMs() + expiresInHours * HOUR_MS).toISOString();
      const { data } = await api().POST('/api/v1/devices', { body: { server_id: serverId, expires_at } });
      return data?.id ?? 0;
    }

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await buildTestApp(db, {}, clock);
      key = await panel.createKey('shop', 'all', { rateLimitExempt: true });
      const { data } = await api().POST('/api/v1/servers', { body: { name: 'fra-1', country: 'DE' } });
      serverId = data?.id ?? 0;
      const changes = quietPublisher(panel.store.db, clock);
      const windowsMs = [72 * HOUR_MS, 24 * HOUR_MS];
      reminders = new ExpiryReminders(panel.store.db, clock, changes, { windowsMs, log: pino({ level: 'silent' }) });
    });
    after(async () => {
      await panel.close();
      await db.drop();
    });

    it('reminds at 72 h and at 24 h before the expiry, each once; a renewal re-arms them', async () => {
      const id = await device(100);
      assert.equal(await reminders.runOnce(), 0);
      clock.advance(29 * HOUR_MS); // 71 h left
      assert.equal(await reminders.runOnce(), 1);
      assert.equal(await reminders.runOnce(), 0);
      clock.advance(47 * HOUR_MS); // 24 h left
      assert.equal(await reminders.runOnce(), 1);
      clock.advance(12 * HOUR_MS);
      assert.equal(await reminders.runOnce(), 0);
      assert.deepEqual(
        (await reminded(id)).map((d) => /reminder (\d+) h/.exec(d)?.[1]),
        ['72', '24'],
      );
      // Renewed by 30 days: the new expiry gets its own reminders.
      const renewed = await api().POST('/api/v1/devices/{id}/renew', { params: { path: { id } }, body: { days: 30 } });
      assert.equal(renewed.response.status, 200);
      assert.equal(await reminders.runOnce(), 0);
      clock.advance(30 * 24 * HOUR_MS - 60 * HOUR_MS);
      assert.equal(await reminders.runOnce(), 1);
      assert.equal((await reminded(id)).length, 3);
    });

    it('gives a device made inside both windows the nearest reminder only', async () => {
      const id = await device(10);
      assert.equal(await reminders.runOnce(), 1);
      clock.advance(9 * HOUR_MS);
      assert.equal(await reminders.runOnce(), 0);
      assert.deepEqual(
        (await reminded(id)).map((d) => /reminder (\d+) h/.exec(d)?.[1]),
        ['24'],
      );
    });
  });
}
