/**
 * The panel's usage counts across month ends with a fake clock, on SQLite and PostgreSQL: monthly
 * counts restart on the 1st of the panel's time zone and total ones do not; device.limit_reached is
 * posted once per period; a batch of an earlier month stored late changes only that month; the
 * status filter of GET /devices agrees with the rule.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { UsageReport } from '../../src/agent/protocol.ts';
import { isoAt, ManualClock } from '../../src/domain/clock.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { quietPublisher } from '../../src/services/changes.ts';
import { UsageService } from '../../src/services/usage.ts';
import { type DeviceRow, findDevice, searchDevices } from '../../src/store/devices.ts';
import { DATABASE_KINDS } from '../support/databases.ts';
import { deviceValues, migratedStoreForSuite, seedNode, seedServer } from '../support/usage-fixtures.ts';

const at = (iso: string) => Date.parse(iso);

for (const kind of DATABASE_KINDS) {
  describe(`usage periods across month ends (${kind}, Europe/Berlin)`, () => {
    const suite = migratedStoreForSuite(kind);

    it(
      'restarts monthly counts on the 1st, keeps total ones, ' + 'and posts device.limit_reached once per period',
      async () => {
        const clock = new ManualClock(at('2026-11-30T20:00:00Z'));
        const usage = new UsageService(suite.store.db, clock, new Calendar('Europe/Berlin'));
        const now = isoAt(clock.nowMs());
        const node = await seedNode(suite.store.db, 'n', now);
        const server = await seedServer(
          suite.store.db,
          node,
          { name: 's', listenPort: 51820, subnet: '10.1.0.0/24', capacity: 253 },
          now,
        );
        const device = async (name: string, limitPeriod: 'monthly' | 'total'): Promise<number> => {
          const values = deviceValues(
            server.id,
            { name, address: `10.1.0.${name === 'monthly' ? 2 : 3}`, dataLimit: 1000, limitPeriod },
            now,
          );
          return (await suite.store.db.insertInto('devices').values(values).returningAll().executeTakeFirstOrThrow())
            .id;
        };
        const monthly = await device('monthly', 'monthly');
        const total = await device('total', 'total');
        let seq = 0;
        const deliver = (slotIso: string, bytes: number) => {
          seq++;
          const report: UsageReport = {
            journalId: 'j',
            batches: [
              {
                seq,
                slotStartMs: at(slotIso),
                entries: [monthly, total].map((deviceId) => ({
                  deviceId,
                  rxBytes: bytes,
                  txBytes: 0,
                  meter: seq * bytes,
                })),
              },
            ],
            handshakes: [],
          };
          return usage.ingest(node, report, quietPublisher(suite.store.db, clock));
        };
        const row = async (id: number): Promise<DeviceRow> => {
          const found = await findDevice(suite.store.db, id);
          assert.ok(found);
          return found;
        };
        const limitEvents = async (id: number) =>
          (
            await suite.store.db
              .selectFrom('events')
              .select('id')
              .where('kind', '=', 'device.limit_reached')
              .where('device_id', '=', id)
              .execute()
          ).length;
        const statusList = (status: 'active' | 'limit_reached') =>
          searchDevices(
            suite.store.db,
            { status, nowIso: isoAt(clock.nowMs()), currentMonth: usage.currentMonth() },
            { afterId: 0, limit: 10 },
          ).then((rows) => rows.map((r) => r.id));

        // 30 November, 21:45 Berlin (20:45 UTC): 600 bytes each.
        await deliver('2026-11-30T20:45:00Z', 600);
        // 22:45-23:00 UTC is 23:45-24:00 Berlin, still November: 500 more crosses both limits.
        clock.advance(2 * 3_600_000);
        await deliver('2026-11-30T22:45:00Z', 500);
        assert.equal(usage.isLimitReached(await row(monthly)), true);
        assert.equal(usage.isLimitReached(await row(total)), true);
        assert.equal(await limitEvents(monthly), 1);
        assert.equal(await limitEvents(total), 1);
        assert.deepEqual((await statusList('limit_reached')).sort(), [monthly, total].sort());
        await deliver('2026-11-30T22:45:00Z', 10);
        assert.equal(await limitEvents(monthly), 1, 'still one event in the period');

        // 23:00 UTC is 1 December 00:00 in Berlin: the monthly count restarts without any new usage.
        clock.advance(at('2026-11-30T23:00:00Z') - clock.nowMs());
        assert.equal(usage.currentMonth(), '2026-12');
        assert.equal(usage.isLimitReached(await row(monthly)), false, 'a new month');
        assert.deepEqual(
          usage.monthUsage(await row(total)),
          { rx_bytes: 0, tx_bytes: 0, total_bytes: 0 },
          'month usage restarts for every device',
        );
        assert.equal(usage.periodUsage(await row(total)).total_bytes, 1110, 'a total count goes on');
        assert.deepEqual(await statusList('active'), [monthly]);
        assert.deepEqual(await statusList('limit_reached'), [total]);

        // A December batch, then a late one from November (the node kept it while the panel was away).
        await deliver('2026-11-30T23:00:00Z', 300);
        assert.deepEqual(usage.periodUsage(await row(monthly)), { rx_bytes: 300, tx_bytes: 0, total_bytes: 300 });
        await deliver('2026-11-30T22:30:00Z', 50);
        assert.equal(usage.periodUsage(await row(monthly)).total_bytes, 300, 'November bytes do not count in December');
        assert.equal(usage.monthUsage(await row(monthly)).total_bytes, 300);
        assert.equal(usage.periodUsage(await row(total)).total_bytes, 1460, 'they do count in a total period');
        const report = await usage.report(await row(monthly));
        assert.deepEqual(
          report.monthly.map((m) => [m.start, m.rx_bytes]),
          [
            ['2026-11-01', 1160],
            ['2026-12-01', 300],
          ],
        );
        assert.deepEqual(
          report.daily.map((d) => [d.start, d.rx_bytes]),
          [
            ['2026-11-30', 1160],
            ['2026-12-01', 300],
          ],
        );
        assert.equal(report.usage_reset_at, '2026-11-30T23:00:00.000Z', 'the monthly period started on the 1st');

        // Crossing again in December posts the event of the new period.
        await deliver('2026-12-01T10:00:00Z', 700);
        assert.equal(await limitEvents(monthly), 2, 'one event per period');
        assert.equal(await limitEvents(total), 1, 'the total period is the same one');
      },
    );
  });
}
