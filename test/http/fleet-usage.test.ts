/**
 * GET /usage, the fleet's usage of the console's overview, on SQLite and PostgreSQL: its figures equal the
 * sums of the devices' own usage reports after ingests (days of the panel's zone, across a DST change), a
 * batch stored twice or naming a deleted device adds nothing, usage resets leave them alone, a deleted
 * device's bytes stay, and `days` is bounded.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { UsageReport } from '../../src/agent/protocol.ts';
import { ManualClock } from '../../src/domain/clock.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { type ChangePublisher, quietPublisher } from '../../src/services/changes.ts';
import { UsageService } from '../../src/services/usage.ts';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';

const ZONE = 'Europe/Berlin';
// Berlin moves its clocks on 2026-03-29 at 01:00 UTC: the 30 days ending today hold a 23-hour day.
const NOW = Date.parse('2026-03-29T12:00:00Z');

type Bucket = { start: string; rx_bytes: number; tx_bytes: number };

for (const kind of DATABASE_KINDS) {
  describe(`fleet usage, GET /usage (${kind}, ${ZONE})`, () => {
    let db: TestDatabase;
    let panel: AppUnderTest;
    let key: string;
    let usage: UsageService;
    let changes: ChangePublisher;
    let nodeId: number;
    const devices: number[] = [];
    let seq = 0;

    const api = () => panel.client(key);
    async function fleet(days?: number) {
      const { data, response } = await api().GET('/api/v1/usage', { params: { query: { days } } });
      assert.equal(response.status, 200);
      assert.ok(data);
      return data;
    }
    /** The devices' own daily buckets added up by day, and their month buckets of `month`. */
    async function deviceSums(ids: readonly number[]): Promise<{ daily: Bucket[]; month: Bucket | undefined }> {
      const days = new Map<string, Bucket>();
      const months = new Map<string, Bucket>();
      for (const id of ids) {
        const { data } = await api().GET('/api/v1/devices/{id}/usage', { params: { path: { id } } });
        assert.ok(data);
        for (const [into, buckets] of [
          [days, data.daily],
          [months, data.monthly],
        ] as const) {
          for (const b of buckets) {
            const sum = into.get(b.start) ?? { start: b.start, rx_bytes: 0, tx_bytes: 0 };
            into.set(b.start, {
              start: b.start,
              rx_bytes: sum.rx_bytes + b.rx_bytes,
              tx_bytes: sum.tx_bytes + b.tx_bytes,
            });
          }
        }
      }
      const daily = [...days.values()].sort((a, b) => a.start.localeCompare(b.start));
      return { daily, month: months.get('2026-03-01') };
    }
    function deliver(slotIso: string, entries: { deviceId: number; rx: number; tx: number }[]) {
      seq++;
      const report: UsageReport = {
        journalId: 'j',
        batches: [
          {
            seq,
            slotStartMs: Date.parse(slotIso),
            entries: entries.map((e) => ({ deviceId: e.deviceId, rxBytes: e.rx, txBytes: e.tx, meter: seq * 1000 })),
          },
        ],
        handshakes: [],
      };
      return usage.ingest({ id: nodeId }, report, changes);
    }

    before(async () => {
      db = await createTestDatabase(kind);
      const clock = new ManualClock(NOW);
      panel = await buildTestApp(db, { PANEL_TIMEZONE: ZONE }, clock);
      key = await panel.createKey('overview', 'devices:read,devices:write,servers:write', { rateLimitExempt: true });
      usage = new UsageService(panel.store.db, clock, new Calendar(ZONE));
      changes = quietPublisher(panel.store.db, clock);
      const server = await api().POST('/api/v1/servers', { body: { name: 'fra-1', country: 'DE' } });
      assert.ok(server.data);
      const serverId = server.data.id;
      nodeId = (await panel.store.db.selectFrom('nodes').select('id').executeTakeFirstOrThrow()).id;
      for (const name of ['a', 'b', 'c']) {
        const created = await api().POST('/api/v1/devices', { body: { server_id: serverId, name } });
        assert.ok(created.data);
        devices.push(created.data.id);
      }
    });
    after(async () => {
      await panel.close();
      await db.drop();
    });

    it('is zero with no usage, and names the panel time zone', async () => {
      assert.deepEqual(await fleet(), {
        time_zone: ZONE,
        today: { rx_bytes: 0, tx_bytes: 0, total_bytes: 0 },
        this_month: { rx_bytes: 0, tx_bytes: 0, total_bytes: 0 },
        daily: [],
      });
    });

    it("adds up to the devices' own usage, by days of the panel's zone", async () => {
      const [a, b, c] = devices as [number, number, number];
      await deliver('2026-02-27T10:00:00Z', [{ deviceId: a, rx: 1, tx: 2 }]); // 31 days ago: outside 30 days
      await deliver('2026-02-28T10:00:00Z', [{ deviceId: b, rx: 10, tx: 20 }]); // the first of the 30 days
      await deliver('2026-03-28T12:00:00Z', [
        { deviceId: a, rx: 100, tx: 200 },
        { deviceId: b, rx: 300, tx: 400 },
      ]);
      // 00:30 in Berlin on the 29th: today there, yesterday in UTC.
      await deliver('2026-03-28T23:30:00Z', [{ deviceId: c, rx: 1000, tx: 2000 }]);
      await deliver('2026-03-29T11:00:00Z', [
        { deviceId: a, rx: 5000, tx: 6000 },
        { deviceId: c, rx: 7000, tx: 0 },
      ]);
      const f = await fleet();
      const sums = await deviceSums(devices);
      assert.deepEqual(
        f.daily,
        sums.daily.filter((d) => d.start >= '2026-02-28'),
      );
      assert.deepEqual(
        f.daily.map((d) => d.start),
        ['2026-02-28', '2026-03-28', '2026-03-29'],
      );
      assert.deepEqual(f.today, { rx_bytes: 13_000, tx_bytes: 8000, total_bytes: 21_000 });
      assert.ok(sums.month);
      assert.deepEqual(f.this_month, {
        rx_bytes: sums.month.rx_bytes,
        tx_bytes: sums.month.tx_bytes,
        total_bytes: sums.month.rx_bytes + sums.month.tx_bytes,
      });
      assert.equal(f.this_month.total_bytes, 300 + 700 + 3000 + 11_000 + 7000);
    });

    it('adds nothing for a batch stored before, or for bytes of a device that no longer exists', async () => {
      const before = await fleet();
      seq--; // the last batch sent again
      await deliver('2026-03-29T11:00:00Z', [{ deviceId: devices[0] ?? 0, rx: 5000, tx: 6000 }]);
      await deliver('2026-03-29T11:00:00Z', [{ deviceId: 999_999, rx: 1, tx: 1 }]);
      assert.deepEqual(await fleet(), before);
    });

    it('is not changed by usage resets, and keeps the bytes of a deleted device', async () => {
      const before = await fleet();
      const [a, b] = devices as [number, number];
      const reset = await api().POST('/api/v1/devices/{id}/usage/reset', { params: { path: { id: a } } });
      assert.equal(reset.response.status, 200);
      assert.deepEqual(await fleet(), before);
      const deleted = await api().DELETE('/api/v1/devices/{id}', { params: { path: { id: b } } });
      assert.equal(deleted.response.status, 204);
      assert.deepEqual(await fleet(), before);
      const remaining = await deviceSums(devices.filter((id) => id !== b));
      assert.ok((remaining.month?.rx_bytes ?? 0) < before.this_month.rx_bytes, "b's bytes left the device reports");
    });

    it('covers `days` days ending today, 1 to 366', async () => {
      const one = await fleet(1);
      assert.deepEqual(
        one.daily.map((d) => d.start),
        ['2026-03-29'],
      );
      assert.deepEqual(one.today, (await fleet()).today);
      assert.deepEqual(
        (await fleet(31)).daily.map((d) => d.start),
        ['2026-02-27', '2026-02-28', '2026-03-28', '2026-03-29'],
      );
      assert.equal((await fleet(366)).daily.length, 4);
      for (const query of ['days=0', 'days=367', 'days=ten', 'days=1.5', 'since=2026-01-01']) {
        const answer = await panel.app.inject({
          method: 'GET',
          url: `/api/v1/usage?${query}`,
          headers: { authorization: `Bearer ${key}` },
        });
        assert.equal(answer.statusCode, 400, query);
        assert.equal(answer.json().error.code, 'bad_request', query);
      }
    });

    it('needs devices:read', async () => {
      const other = await panel.createKey('servers only', 'servers:read', { rateLimitExempt: true });
      const answer = await panel.app.inject({
        method: 'GET',
        url: '/api/v1/usage',
        headers: { authorization: `Bearer ${other}` },
      });
      assert.equal(answer.statusCode, 403);
      const anonymous = await panel.app.inject({ method: 'GET', url: '/api/v1/usage' });
      assert.equal(anonymous.statusCode, 401);
    });
  });
}
