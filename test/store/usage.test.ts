/**
 * The ingest's set statements on SQLite and PostgreSQL: a batch of any size is one statement per
 * table (more devices than the 500-row chunks the statements once took, plus a remainder), each
 * device's counts, meter and buckets come out right, a device that is gone is skipped, limits are
 * marked once, handshakes are written only where they changed, and a device that moved no bytes
 * keeps its row untouched.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import type { UsageReport } from '../../src/agent/protocol.ts';
import { isoAt, ManualClock } from '../../src/domain/clock.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { quietPublisher } from '../../src/services/changes.ts';
import { UsageService } from '../../src/services/usage.ts';
import { type Db, write } from '../../src/store/db.ts';
import {
  addToDayBuckets,
  addToDeviceCounts,
  type BatchPeriod,
  fileRolledDays,
  listDayBuckets,
  listMonthBuckets,
  markLimitReached,
  recordHandshakes,
  type UsageDelta,
} from '../../src/store/usage.ts';
import { DATABASE_KINDS, type DatabaseKind } from '../support/databases.ts';
import { deviceValues, migratedStoreForSuite, seedNode, seedServer } from '../support/usage-fixtures.ts';

/** More than two of the old 500-row chunks, and a remainder. */
const DEVICES = 1234;
const MONTH = '2026-11';
const NOW = '2026-11-21T08:00:00.000Z';
const DAY = `${MONTH}-21`;
const period = (journalId: string, day = DAY): BatchPeriod => ({
  month: day.slice(0, 7),
  day,
  journalId,
  currentMonth: MONTH,
});

function fakeKey(i: number): string {
  return Buffer.alloc(32, 0).fill(String(i).padStart(32, '0')).toString('base64');
}

/** DEVICES devices on one server; every third has a 10,000-byte total limit. Returns their ids in order. */
async function seedDevices(db: Db, name: string): Promise<number[]> {
  const node = await seedNode(db, name, NOW);
  const server = await seedServer(db, node, { name, listenPort: 51820, subnet: '10.1.0.0/16', capacity: 65533 }, NOW);
  const values = Array.from({ length: DEVICES }, (_, i) =>
    deviceValues(
      server.id,
      {
        name: `d${i}`,
        address: `10.1.${i >> 8}.${(i & 255) + 2}`,
        publicKey: fakeKey(i),
        dataLimit: i % 3 === 0 ? 10_000 : 0,
      },
      NOW,
    ),
  );
  const ids: number[] = [];
  for (let start = 0; start < values.length; start += 500) {
    const rows = await db
      .insertInto('devices')
      .values(values.slice(start, start + 500))
      .returning('id')
      .execute();
    ids.push(...rows.map((r) => r.id));
  }
  return ids.sort((a, b) => a - b);
}

/** Rows written by what `work` runs: PostgreSQL shows a row's new version in its xmin, SQLite counts changes. */
async function rowsWritten(
  db: Db,
  kind: DatabaseKind,
  ids: readonly number[],
  work: () => Promise<void>,
): Promise<number> {
  if (kind === 'sqlite') {
    const changes = async () => (await sql<{ n: number }>`select total_changes() as n`.execute(db)).rows[0]?.n ?? 0;
    const before = await changes();
    await work();
    return (await changes()) - before;
  }
  const versions = async () =>
    new Map(
      (
        await sql<{
          id: number;
          xmin: string;
        }>`select id, xmin::text as xmin from devices where id = any(${[...ids]})`.execute(db)
      ).rows.map((r) => [r.id, r.xmin]),
    );
  const before = await versions();
  await work();
  const after = await versions();
  return [...after].filter(([id, xmin]) => before.get(id) !== xmin).length;
}

for (const kind of DATABASE_KINDS) {
  describe(`usage set statements (${kind})`, () => {
    const suite = migratedStoreForSuite(kind);

    it(`adds a batch of ${DEVICES} devices to counts and buckets at once, twice, skipping a gone device`, async () => {
      const db = suite.store.db;
      const ids = await seedDevices(db, 'counts');
      const gone = (ids.at(-1) ?? 0) + 1_000_000;
      const deltas: UsageDelta[] = [...ids, gone].map((deviceId, i) => ({
        deviceId,
        rx: 1000 + i,
        tx: 2 * i,
        meter: 1000 + 3 * i,
      }));
      for (const round of [1, 2]) {
        const existing = await write(db, async (tx) => {
          const { stored, late, rolled } = await addToDeviceCounts(tx, deltas, period(`journal-${round}`));
          assert.deepEqual([late, rolled], [[], []], 'no day is late or rolled out');
          return stored;
        });
        assert.deepEqual(
          [...existing].sort((a, b) => a - b),
          ids,
          'every existing device, not the one that is gone',
        );
        const rows = await db.selectFrom('devices').selectAll().where('id', 'in', ids).orderBy('id').execute();
        assert.equal(rows.length, DEVICES);
        for (const [i, row] of rows.entries()) {
          const expected = {
            month_rx: round * (1000 + i),
            month_tx: round * 2 * i,
            period_rx: round * (1000 + i),
            period_tx: round * 2 * i,
          };
          assert.deepEqual(
            { month_rx: row.month_rx, month_tx: row.month_tx, period_rx: row.period_rx, period_tx: row.period_tx },
            expected,
            `device ${row.id}`,
          );
          assert.equal(row.usage_month, MONTH);
          assert.equal(row.meter, 1000 + 3 * i);
          assert.equal(row.meter_journal, `journal-${round}`);
        }
        assert.deepEqual(
          rows.map((r) => [r.id, r.usage_day, r.day_rx, r.day_tx]),
          ids.map((id, i) => [id, DAY, round * (1000 + i), round * 2 * i]),
          `the days in the rows after round ${round}`,
        );
        const filed = await db.selectFrom('usage_daily').select('device_id').where('device_id', 'in', ids).execute();
        assert.deepEqual(filed, [], 'a day in its row is written nowhere else');
      }
    });

    it(`marks the devices over their limit among ${DEVICES}, once`, async () => {
      const db = suite.store.db;
      const ids = await seedDevices(db, 'limits');
      // Every device moves 6,000 bytes twice: the limited ones (every third) pass 10,000 at the second.
      const deltas = ids.map((deviceId) => ({ deviceId, rx: 5000, tx: 1000, meter: 6000 }));
      const round = () =>
        write(db, async (tx) => {
          const { overLimit } = await addToDeviceCounts(tx, deltas, period('j'));
          return {
            overLimit: [...overLimit].sort((a, b) => a - b),
            marked: await markLimitReached(tx, overLimit, MONTH, NOW),
          };
        });
      assert.deepEqual(await round(), { overLimit: [], marked: [] }, 'none has reached 10,000 bytes');
      const limited = ids.filter((_, i) => i % 3 === 0);
      const second = await round();
      assert.deepEqual(second.overLimit, limited);
      assert.deepEqual(
        second.marked.map((r) => r.id),
        limited,
      );
      assert.ok(second.marked.every((r) => r.limit_reached_at === NOW));
      assert.deepEqual(await round(), { overLimit: [], marked: [] }, 'a device is marked once a period');
      assert.deepEqual(
        await write(db, (tx) => markLimitReached(tx, ids, MONTH, NOW)),
        [],
        'even when every id is asked',
      );
    });

    it(`sets the handshakes of ${DEVICES} devices and writes no row that holds its handshake already`, async () => {
      const db = suite.store.db;
      const ids = await seedDevices(db, 'handshakes');
      const first = ids.map((deviceId) => ({ deviceId, at: NOW }));
      assert.equal(await rowsWritten(db, kind, ids, () => recordHandshakes(db, first)), DEVICES);
      const handshakes = async () =>
        (await db.selectFrom('devices').select('last_handshake').where('id', 'in', ids).execute()).map(
          (r) => r.last_handshake,
        );
      assert.ok((await handshakes()).every((at) => at === NOW));
      // A node restarted reports every handshake again; 11 of them are newer.
      const later = '2026-11-21T08:02:00.000Z';
      const again = first.map((h, i) => (i % 123 === 0 ? { ...h, at: later } : h));
      assert.equal(await rowsWritten(db, kind, ids, () => recordHandshakes(db, again)), 11);
      assert.equal((await handshakes()).filter((at) => at === later).length, 11);
    });

    it('leaves the row of a device that moved no bytes as it was (counts, meter, journal), no bucket', async () => {
      const db = suite.store.db;
      const clock = new ManualClock(Date.parse(NOW));
      const usage = new UsageService(db, clock, new Calendar('UTC'));
      const node = await seedNode(db, 'quiet', isoAt(clock.nowMs()));
      const server = await seedServer(
        db,
        node,
        { name: 'quiet', listenPort: 51821, subnet: '10.2.0.0/24', capacity: 253 },
        NOW,
      );
      const [busy, quiet] = await Promise.all(
        ['busy', 'quiet'].map(
          async (name, i) =>
            (
              await db
                .insertInto('devices')
                .values(deviceValues(server.id, { name, address: `10.2.0.${i + 2}` }, NOW))
                .returning('id')
                .executeTakeFirstOrThrow()
            ).id,
        ),
      );
      assert.ok(busy !== undefined && quiet !== undefined);
      const report = (
        journalId: string,
        seq: number,
        slotIso: string,
        quietBytes: number,
        quietMeter: number,
      ): UsageReport => ({
        journalId,
        batches: [
          {
            seq,
            slotStartMs: Date.parse(slotIso),
            entries: [
              { deviceId: busy, rxBytes: 100, txBytes: 10, meter: 110 * seq },
              { deviceId: quiet, rxBytes: quietBytes, txBytes: 0, meter: quietMeter },
            ],
          },
        ],
        handshakes: [],
      });
      const changes = quietPublisher(db, clock);
      await usage.ingest(node, report('j1', 1, '2026-11-20T10:00:00Z', 500, 500), changes);
      const before = await db.selectFrom('devices').selectAll().where('id', '=', quiet).executeTakeFirstOrThrow();
      // Another journal (the node lost its own) sends the quiet device with no bytes, on another day.
      await usage.ingest(node, report('j2', 1, '2026-11-21T07:45:00Z', 0, 0), changes);
      assert.deepEqual(
        await db.selectFrom('devices').selectAll().where('id', '=', quiet).executeTakeFirstOrThrow(),
        before,
      );
      const days = async (id: number) => {
        const row = await db.selectFrom('devices').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
        return (await listDayBuckets(db, row, '2026-01-01')).map((r) => r.start);
      };
      assert.deepEqual(await days(quiet), ['2026-11-20']);
      assert.deepEqual(await days(busy), ['2026-11-20', '2026-11-21'], 'the busy device of the same batch is stored');
      const busyRow = await db.selectFrom('devices').selectAll().where('id', '=', busy).executeTakeFirstOrThrow();
      assert.deepEqual([busyRow.meter_journal, busyRow.meter, busyRow.month_rx], ['j2', 110, 200]);
    });

    it("a device's months are the sums of its days, from the given month on, a month per row", async () => {
      const db = suite.store.db;
      const [id = 0, other = 0] = await seedDevices(db, 'months');
      const days: [number, string, number, number][] = [
        [id, '2026-09-30', 5, 6],
        [id, '2026-10-01', 1, 2],
        [id, '2026-10-31', 10, 20],
        [id, '2026-11-02', 100, 200],
        [id, '2026-11-30', 4_000_000_000, 5_000_000_000],
        [other, '2026-11-02', 7, 7],
      ];
      for (const [deviceId, start, rx, tx] of days) {
        await write(db, (tx2) => addToDayBuckets(tx2, start, [{ deviceId, rx, tx, meter: 0 }]));
      }
      const noDay = { usage_day: '', day_rx: 0, day_tx: 0 };
      assert.deepEqual(await listMonthBuckets(db, { id, ...noDay }, '2026-10-01'), [
        { start: '2026-10-01', rx_bytes: 11, tx_bytes: 22 },
        { start: '2026-11-01', rx_bytes: 4_000_000_100, tx_bytes: 5_000_000_200 },
      ]);
      assert.deepEqual(await listMonthBuckets(db, { id: other, ...noDay }, '2026-01-01'), [
        { start: '2026-11-01', rx_bytes: 7, tx_bytes: 7 },
      ]);
      assert.deepEqual(
        await listMonthBuckets(db, { id: other, usage_day: '2026-12-01', day_rx: 1, day_tx: 2 }, '2026-01-01'),
        [
          { start: '2026-11-01', rx_bytes: 7, tx_bytes: 7 },
          { start: '2026-12-01', rx_bytes: 1, tx_bytes: 2 },
        ],
        "the row's day is a day of its month",
      );
    });

    it("moves a row's day to usage_daily when a later day comes, and a late day's bytes there", async () => {
      const db = suite.store.db;
      const [a = 0, b = 0, c = 0] = await seedDevices(db, 'days');
      const batch = (day: string, journalId: string, deltas: UsageDelta[]) =>
        write(db, async (tx) => {
          const added = await addToDeviceCounts(tx, deltas, period(journalId, day));
          const late = deltas.filter((d) => added.late.includes(d.deviceId));
          await addToDayBuckets(tx, day, late);
          await fileRolledDays(tx, added.rolled);
          return { late: added.late, rolled: added.rolled };
        });
      const delta = (deviceId: number, rx: number): UsageDelta => ({ deviceId, rx, tx: 1, meter: 0 });
      assert.deepEqual(await batch('2026-11-20', 'j', [delta(a, 10), delta(b, 20)]), { late: [], rolled: [] });
      assert.deepEqual(await batch('2026-11-20', 'j', [delta(a, 1)]), { late: [], rolled: [] });
      // The next day: a and c move bytes; a's day of the 20th goes to usage_daily, c had none.
      assert.deepEqual(await batch('2026-11-21', 'j', [delta(a, 5), delta(c, 7)]), { late: [], rolled: [a] });
      // A batch of the 20th stored late: a's bytes go to its filed day, b's (still on the 20th) to its row.
      assert.deepEqual(await batch('2026-11-20', 'j', [delta(a, 100), delta(b, 2)]), { late: [a], rolled: [] });
      const row = (id: number) => db.selectFrom('devices').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
      const days = async (id: number, since = '2026-01-01') =>
        (await listDayBuckets(db, await row(id), since)).map((d) => [d.start, d.rx_bytes, d.tx_bytes]);
      assert.deepEqual(await days(a), [
        ['2026-11-20', 111, 3],
        ['2026-11-21', 5, 1],
      ]);
      assert.deepEqual(await days(a, '2026-11-21'), [['2026-11-21', 5, 1]]);
      assert.deepEqual(await days(b), [['2026-11-20', 22, 2]]);
      assert.deepEqual(await days(c), [['2026-11-21', 7, 1]]);
      const rolled = await db
        .selectFrom('devices')
        .select(['rolled_day', 'rolled_rx', 'rolled_tx'])
        .where('id', 'in', [a, b, c])
        .execute();
      assert.ok(
        rolled.every((r) => r.rolled_day === '' && r.rolled_rx === 0 && r.rolled_tx === 0),
        'nothing left rolled out',
      );
      assert.equal((await row(a)).month_rx, 116, 'the month counts every batch once');
      // A day filed before migration 021 that is also the row's day: the report adds the two.
      await write(db, (tx) => addToDayBuckets(tx, '2026-11-21', [delta(c, 1000)]));
      assert.deepEqual(await days(c), [['2026-11-21', 1007, 2]]);
      assert.deepEqual(
        (await listMonthBuckets(db, await row(a), '2026-01-01')).map((m) => [m.start, m.rx_bytes]),
        [['2026-11-01', 116]],
      );
    });

    if (kind === 'postgres') {
      it('keeps half of each page free for the rows the ingest rewrites (HOT updates)', async () => {
        const options = await sql<{ relname: string; reloptions: string[] | null }>`
          select relname, reloptions from pg_class
          where relname in ('devices', 'usage_daily') order by relname`.execute(suite.store.db);
        assert.deepEqual(
          options.rows.map((r) => [r.relname, r.reloptions]),
          [
            ['devices', ['fillfactor=50']],
            ['usage_daily', ['fillfactor=50']],
          ],
        );
      });
    }
  });
}
