/**
 * Issue 27, chaos: PostgreSQL restarted, then stopped for 30 s, under a loop of device writes through two
 * panels sharing it. No 500 ever; writes while it is down answer 503 with the error body; every write a
 * panel acknowledged is there afterwards; both panels write again without a restart; the duty lease moves
 * at most once. The cluster is the test's own (test/support/chaos-store.ts), never the shared one.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import pg from 'pg';
import {
  type Answered,
  forbiddenServerErrors,
  lostWrites,
  OwnPostgres,
  type PanelPair,
  record,
  startPanelPair,
  writeLoop,
} from '../support/chaos-store.ts';
import { sleep, waitFor } from '../support/netns.ts';

const OUTAGE_MS = 30_000;

let postgres: OwnPostgres;
let dir: string;
let pair: PanelPair | undefined;

/** What the run of the faults (in `before`) saw, for the tests to judge. */
interface Outcome {
  readonly log: Answered[];
  readonly downAt: number;
  readonly upAt: number;
  /** Per panel, how long after PostgreSQL was back its first write was acknowledged; undefined: none within 30 s. */
  readonly recoveredMs: (number | undefined)[];
  /** Each holder of the duty lease in turn. */
  readonly holders: string[];
  readonly lost: string[];
}
let outcome: Outcome;

before(async () => {
  postgres = await OwnPostgres.start();
  dir = mkdtempSync(join(tmpdir(), 'chaos-store-'));
  // Each panel its own DATA_DIR, as on a host of its own.
  const [a, b] = ['a', 'b'].map((name) => {
    mkdirSync(join(dir, name), { mode: 0o700 });
    return postgres.database(join(dir, name));
  });
  assert.ok(a !== undefined && b !== undefined);
  pair = await startPanelPair([a, b]);
  outcome = await runFaults(pair);
});

after(async () => {
  await pair?.stop();
  postgres.destroy();
  rmSync(dir, { recursive: true, force: true });
});

/** The holder of the duty lease now, read on a connection of its own; undefined while the database is down. */
async function leaseHolder(): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${postgres.port}/postgres` });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const { rows } = await client.query<{ holder: string }>("select holder from duty_leases where name = 'duties'");
    return rows[0]?.holder;
  } catch {
    return undefined;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Writes through both panels while PostgreSQL is restarted (fast), then stopped for 30 s and started again. */
async function runFaults({ panels, key, serverId }: PanelPair): Promise<Outcome> {
  const holders: string[] = [];
  const log: Answered[] = [];
  let done = false;
  const watchLease = (async () => {
    while (!done) {
      const holder = await leaseHolder();
      if (holder !== undefined && holder !== holders.at(-1)) holders.push(holder);
      await sleep(250);
    }
  })();
  const writes = writeLoop(
    panels.map((p) => p.url),
    key,
    serverId,
    () => done,
    log,
  );
  try {
    await waitFor('a panel to hold the duty lease', async () => holders.at(-1), 15_000);
    await sleep(2_000);
    postgres.restart();
    await sleep(3_000);
    postgres.stop();
    const downAt = Date.now();
    await sleep(OUTAGE_MS);
    const upAt = Date.now();
    postgres.start();
    const recoveredMs = await Promise.all(
      panels.map((panel, i) =>
        waitFor(
          `panel ${i} to write again`,
          async () => {
            const answer = await record(log, panel.url, key, 'POST', '/devices', { server_id: serverId });
            return answer?.status === 201 ? Date.now() - upAt : undefined;
          },
          30_000,
          100,
        ).catch(() => undefined),
      ),
    );
    await sleep(2_000);
    done = true;
    const acked = await writes;
    await watchLease;
    const lost = (await Promise.all(panels.map((panel) => lostWrites(panel.url, key, acked)))).flat();
    process.stdout.write(
      `# ${log.length} requests; acknowledged devices left ${acked.live.size}, deleted ${acked.deleted.size}; ` +
        `each panel wrote again ${recoveredMs.join(' ms, ')} ms after PostgreSQL was back; ` +
        `lease holders: ${holders.join(' -> ')}\n`,
    );
    return { log, downAt, upAt, recoveredMs, holders, lost };
  } finally {
    done = true;
    await writes;
    await watchLease;
  }
}

test('both panels live, write again within 10 s of PostgreSQL back, and keep every acknowledged write', () => {
  const unanswered = outcome.log.filter((w) => w.status === undefined).map((w) => `${w.method} ${w.path}`);
  assert.deepEqual(unanswered, [], 'every request answered: no panel process ended');
  for (const ms of outcome.recoveredMs) assert.ok(ms !== undefined && ms < 10_000, `wrote again after ${ms} ms`);
  assert.deepEqual(outcome.lost, [], 'nothing acknowledged was lost');
});

test('the duty lease moves at most once', () => {
  assert.ok(outcome.holders.length <= 2, `holders: ${outcome.holders.join(' -> ')}`);
});

test('no 500: a write while PostgreSQL is down answers 503 with the error body', {}, () => {
  assert.deepEqual(forbiddenServerErrors(outcome.log), [], 'no 5xx but 503 with the error body');
  // A request sent well inside the outage (not one that began before it) is refused with 503.
  const inOutage = outcome.log.filter((w) => w.at > outcome.downAt + 1_000 && w.at < outcome.upAt);
  assert.ok(inOutage.length > 10, `writes were tried during the outage: ${inOutage.length}`);
  const notRefused = inOutage.filter((w) => w.status !== 503).map((w) => `${w.method} ${w.path}: ${w.status}`);
  assert.deepEqual(notRefused, [], 'every write during the outage answers 503');
});
