/**
 * DeviceViews keeps a view per row object (a page's rows are reused while nothing is committed): the
 * kept view must still change at each instant that changes what it shows, with a fake clock on the
 * same row object: the handshake leaving the online window, the expiry, and the month's end (a monthly
 * count and its start restart on the 1st). A config is kept while the server's config columns are the same.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isoAt, ManualClock } from '../../src/domain/clock.ts';
import { ONLINE_WINDOW_MS } from '../../src/domain/devices.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { DeviceViews } from '../../src/services/device-views.ts';
import { UsageService } from '../../src/services/usage.ts';
import { findDevice } from '../../src/store/devices.ts';
import { deviceValues, migratedStoreForSuite, seedNode, seedServer } from '../support/usage-fixtures.ts';

const at = (iso: string) => Date.parse(iso);
/** Moves `clock` to `ms` (back too). */
const setTo = (clock: ManualClock, ms: number) => clock.advance(ms - clock.nowMs());

describe('device views kept per row (sqlite)', () => {
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
    const row = await findDevice(db, inserted.id);
    assert.ok(row);

    const first = views.view(row);
    assert.equal(first.online, true);
    assert.equal(first.status, 'limit_reached');
    assert.equal(first.period_usage.total_bytes, 1000);
    assert.equal(views.view(row), first, 'the same row at the same time is the kept view');

    setTo(clock, startMs - 60_000 + ONLINE_WINDOW_MS);
    assert.equal(views.view(row).online, false);

    // 2026-12-01T00:00Z: the monthly count restarts, so the limit is no longer reached.
    setTo(clock, at('2026-12-01T00:00:00Z'));
    const december = views.view(row);
    assert.equal(december.status, 'active');
    assert.equal(december.period_usage.total_bytes, 0);
    assert.equal(december.month_usage.total_bytes, 0);
    assert.equal(december.usage_reset_at, '2026-12-01T00:00:00.000Z');

    setTo(clock, startMs + 120 * 60_000);
    assert.equal(views.view(row).status, 'expired');

    // Back before a kept view was made: computed again, not taken from a later instant.
    setTo(clock, startMs);
    assert.equal(views.view(row).status, 'limit_reached');
  });

  it('renders the config again when a config column of the server changes', async () => {
    const clock = new ManualClock(at('2026-11-01T00:00:00Z'));
    const db = suite.store.db;
    const views = new DeviceViews(db, clock, new UsageService(db, clock, new Calendar('UTC')));
    const [row] = await db.selectFrom('devices').selectAll().execute();
    assert.ok(row);
    const placed = await views.place(row);
    const before = views.configText(placed, false);
    assert.equal(views.configText({ ...placed, server: { ...placed.server } }, false), before);
    const moved = { ...placed, server: { ...placed.server, endpoint: 'vpn.example.net' } };
    assert.match(views.configText(moved, false), /Endpoint = vpn\.example\.net:/);
    assert.notEqual(views.configText(moved, false), before);
  });
});
