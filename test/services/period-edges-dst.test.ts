/**
 * Period and expiry edges in the panel's time zone across daylight saving changes (issue 26), on SQLite and
 * PostgreSQL with a fake clock: a renewal by days adds days of 24 hours (docs/api.md "Renewal"), so across the
 * October change an expiry keeps its UTC time and moves an hour on the wall clock, and its reminders (re-armed by
 * the renewal) fall exactly 72 h and 24 h before it; a monthly count restarts at midnight of the 1st in the panel's
 * zone whichever offset that midnight has (Europe/Berlin after the October and the March change, America/New_York on
 * the day its October change happens and after the March one); a usage threshold is posted once per period: a
 * crossing, the monthly reset, the same crossing again are two events, not three.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { ManualClock } from '../../src/domain/clock.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { quietPublisher } from '../../src/services/changes.ts';
import { UsageService } from '../../src/services/usage.ts';
import { findDevice } from '../../src/store/devices.ts';
import { ExpiryReminders } from '../../src/workers/expiry-reminders.ts';
import { UsageThresholds } from '../../src/workers/usage-thresholds.ts';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';
import { usageReporter } from '../support/usage-fixtures.ts';

const HOUR_MS = 3_600_000;
const at = (iso: string): number => Date.parse(iso);

for (const kind of DATABASE_KINDS) {
  describe(`period and expiry edges across daylight saving changes (${kind})`, () => {
    let db: TestDatabase;
    let panel: AppUnderTest;
    let key: string;
    let serverId = 0;
    let nodeId = 0;
    const clock = new ManualClock(at('2026-10-20T10:00:00Z'));
    const api = () => panel.client(key);
    const moveTo = (iso: string) => clock.advance(at(iso) - clock.nowMs());
    const reporters = new Map<string, (deviceId: number, bytes: number) => Promise<void>>();
    /** The node's reports stored in `zone`'s months: one reporter a zone, as its batches go on one journal. */
    const reporter = (zone: string) => {
      const use = reporters.get(zone) ?? usageReporter(panel.store.db, clock, nodeId, zone, zone);
      reporters.set(zone, use);
      return use;
    };

    async function device(body: { expires_at?: string; data_limit?: number }): Promise<number> {
      const { data, error } = await api().POST('/api/v1/devices', { body: { server_id: serverId, ...body } });
      assert.ok(data, JSON.stringify(error));
      return data.id;
    }
    async function details(deviceId: number, kind: string): Promise<string[]> {
      const { data } = await api().GET('/api/v1/events', { params: { query: { device_id: deviceId, kind } } });
      return (data?.data ?? []).map((e) => e.detail);
    }

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await buildTestApp(db, { PANEL_TIMEZONE: 'Europe/Berlin' }, clock);
      key = await panel.createKey('shop', 'all', { rateLimitExempt: true });
      const { data } = await api().POST('/api/v1/servers', { body: { name: 'fra-1', country: 'DE' } });
      serverId = data?.id ?? 0;
      nodeId = (await panel.store.db.selectFrom('nodes').select('id').executeTakeFirstOrThrow()).id;
    });
    after(async () => {
      await panel.close();
      await db.drop();
    });

    it('renews by 24-hour days across the October change; re-armed reminders come 72 h and 24 h before', async () => {
      const changes = quietPublisher(panel.store.db, clock);
      const windowsMs = [72 * HOUR_MS, 24 * HOUR_MS];
      const reminders = new ExpiryReminders(panel.store.db, clock, changes, {
        windowsMs,
        log: pino({ level: 'silent' }),
      });
      // 12:00 in Berlin (CEST, UTC+2), 48 h ahead: inside the 72 h window.
      const id = await device({ expires_at: '2026-10-22T10:00:00.000Z' });
      assert.equal(await reminders.runOnce(), 1);

      const renewed = await api().POST('/api/v1/devices/{id}/renew', { params: { path: { id } }, body: { days: 7 } });
      assert.equal(renewed.response.status, 200, JSON.stringify(renewed.error));
      // Berlin leaves summer time on 25 October: 7 × 24 h later is 11:00 CET, not 12:00.
      assert.equal(renewed.data?.expires_at, '2026-10-29T10:00:00.000Z');
      assert.equal(await reminders.runOnce(), 0, 'the new expiry is 9 days away');

      moveTo('2026-10-26T09:59:59Z');
      assert.equal(await reminders.runOnce(), 0, 'not before 72 h');
      moveTo('2026-10-26T10:00:00Z');
      assert.equal(await reminders.runOnce(), 1, '72 h before, across the change');
      moveTo('2026-10-28T09:59:59Z');
      assert.equal(await reminders.runOnce(), 0, 'not before 24 h');
      moveTo('2026-10-28T10:00:00Z');
      assert.equal(await reminders.runOnce(), 1, '24 h before');
      assert.equal((await details(id, 'device.expiring')).length, 3, 'one for the old expiry, two for the new');
    });

    it('restarts monthly counts at midnight of the 1st in the zone, whichever its offset', async () => {
      const edges = [
        // Berlin, winter time since 25 October: 1 November 00:00 CET.
        { zone: 'Europe/Berlin', last: '2026-10-31T22:59:59Z', first: '2026-10-31T23:00:00Z', month: '2026-11' },
        // New York leaves summer time at 02:00 on 1 November itself: midnight is still EDT (UTC-4).
        { zone: 'America/New_York', last: '2026-11-01T03:59:59Z', first: '2026-11-01T04:00:00Z', month: '2026-11' },
        // Berlin, summer time since 28 March: 1 April 00:00 CEST.
        { zone: 'Europe/Berlin', last: '2027-03-31T21:59:59Z', first: '2027-03-31T22:00:00Z', month: '2027-04' },
        // New York, summer time since 14 March: 1 April 00:00 EDT.
        { zone: 'America/New_York', last: '2027-04-01T03:59:59Z', first: '2027-04-01T04:00:00Z', month: '2027-04' },
      ];
      for (const edge of edges) {
        const usage = new UsageService(panel.store.db, clock, new Calendar(edge.zone));
        const use = reporter(edge.zone);
        const id = await device({ data_limit: 1000 });
        const row = async () => {
          const found = await findDevice(panel.store.db, id);
          assert.ok(found);
          return found;
        };
        moveTo(edge.last);
        await use(id, 1000);
        assert.notEqual(usage.currentMonth(), edge.month, `${edge.zone} ${edge.last}`);
        assert.equal(usage.isLimitReached(await row()), true, `${edge.zone}: the limit is reached before midnight`);
        moveTo(edge.first);
        assert.equal(usage.currentMonth(), edge.month, `${edge.zone} ${edge.first}`);
        assert.equal(usage.isLimitReached(await row()), false, `${edge.zone}: a new month at midnight`);
        assert.equal(usage.periodUsage(await row()).total_bytes, 0);
      }
    });

    it('posts a threshold once per period: a crossing, the reset at Berlin midnight, the crossing again', async () => {
      const usage = new UsageService(panel.store.db, clock, new Calendar('Europe/Berlin'));
      const changes = quietPublisher(panel.store.db, clock);
      const thresholds = new UsageThresholds(panel.store.db, usage, changes, {
        percents: [80],
        log: pino({ level: 'silent' }),
      });
      const use = reporter('Europe/Berlin');
      moveTo('2027-10-31T21:00:00Z');
      const id = await device({ data_limit: 1000 });
      // 31 October 2027, 22:30 CET (Berlin left summer time that morning).
      moveTo('2027-10-31T21:30:00Z');
      await use(id, 850);
      assert.equal(await thresholds.runOnce(), 1, 'the crossing');
      moveTo('2027-10-31T22:59:00Z');
      await use(id, 50);
      assert.equal(await thresholds.runOnce(), 0, 'the same period');
      moveTo('2027-10-31T23:00:00Z');
      assert.equal(await thresholds.runOnce(), 0, 'the new period has no usage yet');
      await use(id, 850);
      assert.equal(await thresholds.runOnce(), 1, 'the same crossing in the next period');
      await use(id, 50);
      assert.equal(await thresholds.runOnce(), 0);
      assert.equal((await details(id, 'device.usage_threshold')).length, 2, 'two events, not three');
    });
  });
}
