/**
 * The overview's fleet usage and the device search (issue 14), on SQLite and PostgreSQL at 100,000 devices:
 * 1. Ingest cost of the fleet tables (migration 019): a batch booked as UsageService.ingest books it (device
 *    counts, day and month buckets), with and without the two fleet upserts, alternated in one run, for
 *    batches of 100, 10,000 and 100,000 devices; the median of each and their ratio.
 * 2. GET /usage's read (UsageService.fleetReport, 30 days) against what it replaces: the same figures summed
 *    from the devices' day and month buckets (the 100,000 devices having used bytes on each of 30 days).
 * 3. GET /devices?search= (searchDevices, a page of 50): a term no device has (the whole table is read), a term
 *    five devices have (external id), a term most devices have (the page fills at once), and the rare term
 *    with the status filter; against the same page without search.
 * Run: node bench/fleet-usage.ts   (DEVICES, DAYS, REPEATS, KINDS=sqlite,postgres may be set); each database
 * kind writes its own section of docs/benchmarks.md.
 */
import { loadavg } from 'node:os';
import { sql } from 'kysely';
import { systemClock } from '../src/domain/clock.ts';
import { Calendar } from '../src/domain/usage.ts';
import { quietPublisher } from '../src/services/changes.ts';
import { UsageService } from '../src/services/usage.ts';
import { write } from '../src/store/db.ts';
import { listDevices, searchDevices } from '../src/store/devices.ts';
import type { Store } from '../src/store/open.ts';
import { addToDeviceCounts, addToFleet, type UsageDelta } from '../src/store/usage.ts';
import { DATABASE_KINDS } from '../test/support/databases.ts';
import { openTestStore } from '../test/support/stores.ts';
import { seedFleet, seedNode } from '../test/support/usage-fixtures.ts';
import { machine, median, writeSection } from './report.ts';

const DEVICES = Number(process.env.DEVICES ?? 100_000);
const DAYS = Number(process.env.DAYS ?? 30);
const REPEATS = Number(process.env.REPEATS ?? 7);
const BATCH_SIZES = [100, 10_000, DEVICES];
const ZONE = 'Europe/Berlin';
const DAY_MS = 86_400_000;

const ms = (value: number) => `${value.toFixed(value < 10 ? 2 : 0)} ms`;
const count = (n: number) => n.toLocaleString('en');

async function clocked(work: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await work();
  return performance.now() - start;
}

/**
 * Medians of `a` and `b`, run alternately `REPEATS` times each (which goes first alternates too), so a noisy
 * neighbour slows both alike.
 */
async function sideBySide(a: () => Promise<unknown>, b: () => Promise<unknown>): Promise<[number, number]> {
  const as: number[] = [];
  const bs: number[] = [];
  for (let i = 0; i < REPEATS; i++) {
    if (i % 2 === 0) {
      as.push(await clocked(a));
      bs.push(await clocked(b));
    } else {
      bs.push(await clocked(b));
      as.push(await clocked(a));
    }
  }
  return [median(as), median(bs)];
}

async function benchKind(store: Store): Promise<string[]> {
  const db = store.db;
  const now = Date.now();
  const node = await seedNode(db, 'bench', new Date(now).toISOString());
  // Ten servers; every fifth of the devices carries an external id shared by five devices (cust-0 .. cust-3999).
  await seedFleet(db, node, { devices: DEVICES, servers: 10 }, new Date(now).toISOString(), (values, i) => ({
    ...values,
    external_id: i % 5 === 0 ? `cust-${i % 20_000}` : null,
  }));
  const ids = (await db.selectFrom('devices').select('id').orderBy('id').execute()).map((r) => r.id);
  const calendar = new Calendar(ZONE);
  const usage = new UsageService(db, systemClock, calendar);
  const changes = quietPublisher(db, systemClock);
  const delta = (id: number, seq: number) => ({ deviceId: id, rxBytes: 1000, txBytes: 500, meter: seq * 1000 });
  let seq = 0;
  const seedStart = performance.now();
  for (let d = DAYS - 1; d >= 0; d--) {
    seq++;
    const batch = { seq, slotStartMs: now - d * DAY_MS, entries: ids.map((id) => delta(id, seq)) };
    await usage.ingest(node, { journalId: 'bench', batches: [batch], handshakes: [] }, changes);
  }
  const seedMs = (performance.now() - seedStart) / DAYS;
  // The planner's statistics as autovacuum keeps them on a running panel (PostgreSQL; SQLite's ANALYZE too).
  await sql`analyze`.execute(db);
  const lines = [
    `${count(ids.length)} devices, each with bytes on each of ${DAYS} days: a ${count(ids.length)}-device batch ` +
      `through UsageService.ingest took ${ms(seedMs)} on average.`,
    '',
    '| Batch | Booked without fleet tables | With them (as ingest does) | Ratio |',
    '|---:|---:|---:|---:|',
  ];

  const month = calendar.month(now);
  const day = calendar.day(now);
  for (const size of BATCH_SIZES) {
    const deltas: UsageDelta[] = ids.slice(0, size).map((id) => ({ deviceId: id, rx: 1000, tx: 500, meter: 0 }));
    const book = (fleet: boolean) =>
      write(db, async (tx) => {
        const counted = await addToDeviceCounts(tx, deltas, { month, day, journalId: 'bench', currentMonth: month });
        const existing = new Set(counted.stored);
        const stored = deltas.filter((d) => existing.has(d.deviceId));
        if (!fleet) return;
        const rx = stored.reduce((sum, d) => sum + d.rx, 0);
        const txBytes = stored.reduce((sum, d) => sum + d.tx, 0);
        await addToFleet(tx, 'usage_fleet_daily', day, rx, txBytes);
        await addToFleet(tx, 'usage_fleet_monthly', `${month}-01`, rx, txBytes);
      });
    const [without, withFleet] = await sideBySide(
      () => book(false),
      () => book(true),
    );
    lines.push(`| ${count(size)} | ${ms(without)} | ${ms(withFleet)} | ${(withFleet / without).toFixed(2)} |`);
  }

  const since = (() => {
    const [y, m, d] = day.split('-').map(Number);
    return new Date(Date.UTC(y ?? 1970, (m ?? 1) - 1, (d ?? 1) - (DAYS - 1))).toISOString().slice(0, 10);
  })();
  const summed = () =>
    Promise.all([
      db
        .selectFrom('usage_daily')
        .select((eb) => ['start', eb.fn.sum<number>('rx_bytes').as('rx'), eb.fn.sum<number>('tx_bytes').as('tx')])
        .where('start', '>=', since)
        .groupBy('start')
        .orderBy('start')
        .execute(),
      db
        .selectFrom('usage_daily')
        .select((eb) => [eb.fn.sum<number>('rx_bytes').as('rx'), eb.fn.sum<number>('tx_bytes').as('tx')])
        .where('start', '>=', `${month}-01`)
        .execute(),
    ]);
  const [fleetRead, summedRead] = await sideBySide(
    () => usage.fleetReport(DAYS),
    () => summed(),
  );
  lines.push(
    '',
    `GET /usage's read (fleetReport, ${DAYS} days): ${ms(fleetRead)}; the same figures summed from the devices' ` +
      `buckets (${count(ids.length * DAYS)} day rows): ${ms(summedRead)} ` +
      `(${(summedRead / fleetRead).toFixed(0)} times).`,
    '',
    '| Device list, a page of 50 | Query | Ratio to no search |',
    '|---|---:|---:|',
  );

  const filter = { nowIso: new Date(now).toISOString(), currentMonth: month };
  const page = { afterId: 0, limit: 50 };
  const cases: [string, Parameters<typeof searchDevices>[1]][] = [
    ['no search (baseline)', filter],
    ['search `nobody` (no match: the whole table)', { ...filter, search: 'nobody' }],
    ['search `CUST-1234` (5 devices, by external id)', { ...filter, search: 'CUST-1234' }],
    ['search `d1` (most devices: the page fills at once)', { ...filter, search: 'd1' }],
    ['search `CUST-1234` and status active', { ...filter, search: 'CUST-1234', status: 'active' }],
  ];
  let baseline = Number.NaN;
  for (const [name, query] of cases) {
    const times: number[] = [];
    // The list without a search or status is the reused query shape (GET /devices takes it).
    const list = query.search === undefined ? () => listDevices(db, query, page) : () => searchDevices(db, query, page);
    for (let i = 0; i < REPEATS; i++) times.push(await clocked(list));
    const t = median(times);
    if (Number.isNaN(baseline)) baseline = t;
    lines.push(`| ${name} | ${ms(t)} | ${(t / baseline).toFixed(1)} |`);
  }
  return lines;
}

const KINDS = (process.env.KINDS ?? DATABASE_KINDS.join(',')).split(',');
const COMMAND = `${process.env.KINDS === undefined ? '' : `KINDS=${process.env.KINDS} `}node bench/fleet-usage.ts`;
for (const kind of DATABASE_KINDS.filter((k) => KINDS.includes(k))) {
  const opened = await openTestStore(kind, { sealed: true });
  try {
    const lines = await benchKind(opened.store);
    console.log(lines.join('\n'));
    writeSection(
      `Fleet usage and device search (issue 14), ${kind}`,
      [
        `Command: \`${COMMAND}\` (DEVICES=${DEVICES}, DAYS=${DAYS}, REPEATS=${REPEATS}); ` +
          `${machine()}; load average ${loadavg()[0]?.toFixed(1)} at the end (a shared machine).`,
        'Medians of runs alternated in one process; ratios compare figures measured side by side.',
        '',
        ...lines,
      ].join('\n'),
    );
  } finally {
    await opened.close();
  }
}
