/**
 * The webhook sender's claim (claimDueDeliveries, what every poll and nudge runs) with 10,000 pending deliveries,
 * on SQLite and PostgreSQL, in-process on a migrated store. One webhook subscribed to `device.updated`; DEVICES
 * devices each get ROUNDS events (a round is one transaction of one event per device, a millisecond after the
 * previous round), so DEVICES × ROUNDS deliveries are pending, a device's in event order. Two shapes:
 * - all due: every delivery due now; each device's first is claimable, its followers wait for it;
 * - outage: each device's first delivery failed once and retries in an hour, its followers are due and all wait
 *   (the claim finds nothing, after looking at every due one).
 * Each claim takes up to 128 (the sender's: twice its 64 slots) and holds them only until its own instant, the
 * next claim a millisecond later, so every claim sees the same rows.
 *
 * BASE_ROOT (optional): another checkout (e.g. `git archive` of the base with this file copied into its bench/ and
 * node_modules linked); its claim is measured first, by running this file there, and the section shows both.
 * Run: node bench/webhook-claim.ts   Environment: DEVICES (1000), ROUNDS (10), CLAIMS (60), BASE_ROOT, BASE_LABEL
 * ('before'), NO_WRITE (print the section, leave docs/benchmarks.md alone), JSON (print the figures only).
 * Writes the section "Webhook claim with 10,000 pending".
 */
import { execFileSync } from 'node:child_process';
import { sql } from 'kysely';
import { join } from 'node:path';
import { isoAt, ManualClock } from '../src/domain/clock.ts';
import { eventDraft, recordEvents } from '../src/services/events.ts';
import { write } from '../src/store/db.ts';
import type { Store } from '../src/store/open.ts';
import { claimDueDeliveries, insertWebhook } from '../src/store/webhooks.ts';
import { DATABASE_KINDS, type DatabaseKind } from '../test/support/databases.ts';
import { openTestStore } from '../test/support/stores.ts';
import { loadAverage, machine, median, percentile, writeSection } from './report.ts';

const SECTION = 'Webhook claim with 10,000 pending';
const DEVICES = Number(process.env.DEVICES ?? 1_000);
const ROUNDS = Number(process.env.ROUNDS ?? 10);
const CLAIMS = Number(process.env.CLAIMS ?? 60);
const CLAIM_LIMIT = 128;
const HOUR_MS = 3_600_000;

interface Figures {
  kind: DatabaseKind;
  shape: 'all due' | 'outage';
  claimed: number;
  median: number;
  p90: number;
}

async function seed(store: Store, clock: ManualClock): Promise<void> {
  const now = isoAt(clock.nowMs());
  await insertWebhook(store.db, {
    url: 'https://receiver.example/hook',
    events: JSON.stringify(['device.updated']),
    description: 'bench',
    enabled: 1,
    secret: 'whsec_YmVuY2g=',
    created_by: 'bench',
    created_at: now,
    updated_at: now,
  });
  for (let round = 0; round < ROUNDS; round++) {
    const drafts = Array.from({ length: DEVICES }, (_, d) =>
      eventDraft({ kind: 'device.updated', device_id: d + 1, detail: `round ${round}`, actor: 'bench' }),
    );
    await write(store.db, (tx) => recordEvents(tx, clock, drafts));
    clock.advance(1);
  }
}

/** CLAIMS claims a millisecond apart, each holding what it took until its own instant: milliseconds each. */
async function claims(store: Store, clock: ManualClock): Promise<{ claimed: number; ms: number[] }> {
  const ms: number[] = [];
  let claimed = 0;
  for (let i = 0; i < CLAIMS + 5; i++) {
    clock.advance(1);
    const now = isoAt(clock.nowMs());
    const started = performance.now();
    const rows = await claimDueDeliveries(store.db, now, now, CLAIM_LIMIT);
    // The first few warm the caches and prepared statements.
    if (i >= 5) ms.push(performance.now() - started);
    claimed = rows.length;
  }
  return { claimed, ms };
}

async function measure(kind: DatabaseKind): Promise<Figures[]> {
  const opened = await openTestStore(kind);
  try {
    const { store } = opened;
    const clock = new ManualClock(Date.parse('2026-11-28T00:00:00Z'));
    await seed(store, clock);
    await analyze(store);
    const out: Figures[] = [];
    const figures = (shape: Figures['shape'], run: { claimed: number; ms: number[] }): Figures => ({
      kind,
      shape,
      claimed: run.claimed,
      median: median(run.ms),
      p90: percentile(run.ms, 90),
    });
    out.push(figures('all due', await claims(store, clock)));
    // Each device's first delivery (the lowest event of its device) failed once and waits an hour.
    const firsts = await store.db
      .selectFrom('webhook_deliveries')
      .innerJoin('events', 'events.id', 'webhook_deliveries.event_id')
      .select('webhook_deliveries.id')
      .where('events.detail', '=', 'round 0')
      .execute();
    await store.db
      .updateTable('webhook_deliveries')
      .set({ attempts: 1, next_attempt_at: isoAt(clock.nowMs() + HOUR_MS), error: 'HTTP 503' })
      .where(
        'id',
        'in',
        firsts.map((row) => row.id),
      )
      .execute();
    await analyze(store);
    out.push(figures('outage', await claims(store, clock)));
    return out;
  } finally {
    await opened.close();
  }
}

/** PostgreSQL's statistics after a bulk change, as autovacuum would bring them soon after. */
async function analyze(store: Store): Promise<void> {
  if (store.dialect === 'postgres') await sql`analyze webhook_deliveries`.execute(store.db);
}

async function measureAll(): Promise<Figures[]> {
  const out: Figures[] = [];
  for (const kind of DATABASE_KINDS) out.push(...(await measure(kind)));
  return out;
}

function baseFigures(root: string): Figures[] {
  const text = execFileSync(process.execPath, [join(root, 'bench', 'webhook-claim.ts')], {
    cwd: root,
    env: { ...process.env, JSON: '1', BASE_ROOT: '' },
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
  });
  const parsed: unknown = JSON.parse(text);
  if (!Array.isArray(parsed)) throw new Error('the base run printed no figures');
  return parsed.filter(
    (f): f is Figures =>
      typeof f === 'object' && f !== null && 'kind' in f && 'shape' in f && 'median' in f && 'p90' in f,
  );
}

const ms = (value: number) => value.toFixed(2);

async function main(): Promise<void> {
  if (process.env.JSON) {
    process.stdout.write(JSON.stringify(await measureAll()));
    return;
  }
  const loadBefore = loadAverage();
  const baseRoot = process.env.BASE_ROOT;
  const base = baseRoot ? baseFigures(baseRoot) : [];
  const now = await measureAll();
  const label = process.env.BASE_LABEL ?? 'before';
  const rows = now.map((f) => {
    const was = base.find((b) => b.kind === f.kind && b.shape === f.shape);
    const before = was ? `${ms(was.median)} / ${ms(was.p90)} (${was.claimed})` : '–';
    return `| ${f.kind} | ${f.shape} | ${before} | ${ms(f.median)} / ${ms(f.p90)} (${f.claimed}) |`;
  });
  const body = [
    `Command: \`node bench/webhook-claim.ts\` (DEVICES=${DEVICES}, ROUNDS=${ROUNDS}, CLAIMS=${CLAIMS}` +
      `${baseRoot ? `, BASE_ROOT=<${label}>` : ''}); ${machine()}; load average ${loadBefore} at the start, ` +
      `${loadAverage()} at the end (a shared machine).`,
    '',
    `claimDueDeliveries on a migrated store in this process, ${DEVICES * ROUNDS} pending deliveries of one webhook: ` +
      `${DEVICES} devices × ${ROUNDS} events each, up to ${CLAIM_LIMIT} a claim. "all due": every delivery due, ` +
      'each device\'s first claimable; "outage": each device\'s first retrying in an hour, its ' +
      `${DEVICES * (ROUNDS - 1)} followers due and waiting, so the claim takes nothing. Median / p90 ms of ` +
      `${CLAIMS} claims (rows claimed).`,
    '',
    `| database | shape | ${label} | after |`,
    '|---|---|---:|---:|',
    ...rows,
    '',
    'Plans (EXPLAIN, both databases): the due rows by `deliveries_due` (state, next_attempt_at) in order, and for ' +
      'each an index-only probe of `deliveries_device_queue` (webhook_id, device_id, event_id, partial: pending) for ' +
      'an earlier pending delivery of its webhook and device; SQLite: `SEARCH p USING COVERING INDEX ' +
      'deliveries_device_queue (webhook_id=? AND device_id=? AND event_id<?)`, PostgreSQL: `Nested Loop Anti Join` ' +
      'over `Index Only Scan using deliveries_device_queue`. "all due" stops after 128 candidates (what is left of ' +
      'it is the UPDATE that holds and returns the 128 rows); "outage" probes every due follower, one probe each, ' +
      'and finds none to take. Before, every claim numbered all 10,000 pending rows joined to their events.',
  ].join('\n');
  if (process.env.NO_WRITE) process.stdout.write(`${body}\n`);
  else writeSection(SECTION, body);
}

await main();
