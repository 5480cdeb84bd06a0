/**
 * DeviceViews keeps the device list's page of reused rows (the same rows object while nothing is committed): the
 * kept page must still change at each instant that changes what it shows, with a fake clock on the same rows: the
 * handshake leaving the online window, the expiry, and the month's end (a monthly count and its start restart on
 * the 1st). A commit (a server's config changed) gives new rows, so a new page.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isoAt, ManualClock } from '../../src/domain/clock.ts';
import { ONLINE_WINDOW_MS } from '../../src/domain/devices.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { DeviceViews } from '../../src/services/device-views.ts';
import { UsageService } from '../../src/services/usage.ts';
import { listDevices } from '../../src/store/devices.ts';
import { deviceValues, migratedStoreForSuite, seedNode, seedServer } from '../support/usage-fixtures.ts';

const at = (iso: string) => Date.parse(iso);
/** Moves `clock` to `ms` (back too). */
const setTo = (clock: ManualClock, ms: number) => clock.advance(ms - clock.nowMs());

describe('device pages kept per reused rows (sqlite)', () => {
  const suite = migratedStoreForSuite('sqlite');

  it('change when the handshake ages out, at the expiry and at the month end', async () => {
    const startMs = at('2026-11-30T22:50:00Z');
    const clock = new ManualClock(startMs);
    const db = suite.store.db;
    const views = new DeviceViews(db, clock, new UsageService(db, clock, new Calendar('UTC')));
    const now = isoAt(startMs);
    const node = await seedNode(db, 'n', now);
    const server = await seedServer(
      db,
      node,
      { name: 's', listenPort: 51820, subnet: '10.1.0.0/24', capacity: 9 },
      now,
    );
    const inserted = await db
      .insertInto('devices')
      .values({
        ...deviceValues(server.id, { name: 'd', address: '10.1.0.2', dataLimit: 1000, limitPeriod: 'monthly' }, now),
        last_handshake: isoAt(startMs - 60_000),
        expires_at: isoAt(startMs + 120 * 60_000),
        usage_month: '2026-11',
        month_rx: 1000,
        period_rx: 1000,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    // The device list's rows as GET /devices reads them: reused while nothing is committed.
    const request = { afterId: 0, limit: 50 };
    const page = async () => {
      suite.store.requestBegins();
      return views.listedPage(await listDevices(db, { serverId: server.id }, request), request);
    };
    const device = async () => {
      const [listed] = (await page()).data;
      assert.ok(listed);
      return listed;
    };

    const first = await page();
    assert.equal(first.data[0]?.online, true);
    assert.equal(first.data[0]?.status, 'limit_reached');
    assert.equal(first.data[0]?.period_usage.total_bytes, 1000);
    assert.equal(await page(), first, 'the same rows at the same time: the kept page');

    setTo(clock, startMs - 60_000 + ONLINE_WINDOW_MS - 1);
    assert.equal(await page(), first, 'nothing it shows changed yet');
    setTo(clock, startMs - 60_000 + ONLINE_WINDOW_MS);
    assert.equal((await device()).online, false);

    // 2026-12-01T00:00Z: the monthly count restarts, so the limit is no longer reached.
    setTo(clock, at('2026-12-01T00:00:00Z'));
    const december = await device();
    assert.equal(december.status, 'active');
    assert.equal(december.period_usage.total_bytes, 0);
    assert.equal(december.month_usage.total_bytes, 0);
    assert.equal(december.usage_reset_at, '2026-12-01T00:00:00.000Z');

    setTo(clock, startMs + 120 * 60_000);
    assert.equal((await device()).status, 'expired');

    // Back before a kept page was made: made again, not taken from a later instant.
    setTo(clock, startMs);
    assert.equal((await device()).status, 'limit_reached');
    assert.equal((await device()).config, views.configText(await views.place(inserted), false));
  });

  it("lists each device with its server's config as committed: a server's change shows in the next page", async () => {
    const clock = new ManualClock(at('2026-11-01T00:00:00Z'));
    const db = suite.store.db;
    const views = new DeviceViews(db, clock, new UsageService(db, clock, new Calendar('UTC')));
    const request = { afterId: 0, limit: 50 };
    const page = async () => {
      suite.store.requestBegins();
      return views.listedPage(await listDevices(db, {}, request), request);
    };
    const before = await page();
    assert.equal(await page(), before);
    assert.doesNotMatch(before.data[0]?.config ?? '', /vpn\.example\.net/);
    await db.updateTable('servers').set({ endpoint: 'vpn.example.net' }).execute();
    const after = await page();
    assert.notEqual(after, before);
    assert.match(after.data[0]?.config ?? '', /Endpoint = vpn\.example\.net:/);
  });
});
