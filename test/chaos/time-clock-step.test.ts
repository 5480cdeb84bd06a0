/**
 * Chaos: the panel's clock stepped an hour forward across a monthly reset, back across it, and forward again
 * (issue 27). The panel runs as the README starts it, under libfaketime (test/support/chaos-time.ts), so only its
 * process sees the steps; a remote node (FakeAgent) reports usage batches stamped by the node's own, right, clock.
 * Shown: the month's usage restarts once (the bytes of the new month counted before the step back still count
 * after it), the limit is reached once, an expiry comes when the panel's clock passes it (never while the clock
 * is back, within the expiry watch's 1 s tick after), and no request answers 5xx meanwhile. SQLite only: the store
 * takes every time from the panel's clock (no SQL now()), so the database's own clock plays no part.
 */
import assert from 'node:assert/strict';
import { existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { UsageBatch } from '../../src/agent/protocol.ts';
import { SteppedClock } from '../support/chaos-time.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { FakeAgent } from '../support/fake-agent.ts';
import { waitFor } from '../support/netns.ts';
import { type ApiCall, callApi, type PanelProcess, startPanel } from '../support/panel.ts';

const HOUR_MS = 3_600_000;
const SLOT_MS = 15 * 60_000;
const LIMIT_BYTES = 10_000;
/** The expiry watch's tick, the libfaketime file's re-read (1 s) and a poll of this test (250 ms), with margin. */
const EXPIRY_SLACK_MS = 3_500;
/** Usage is collected every 5 s (NODE_MONITOR_DEFAULTS); a batch shows within two rounds. */
const COLLECT_BOUND_MS = 15_000;

/** The first instant of the month after `ms`, in UTC (the panel runs with PANEL_TIMEZONE=UTC). */
function nextMonthStartMs(ms: number): number {
  const date = new Date(ms);
  return Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1);
}

describe('the panel clock stepped an hour forward, back and forward across a monthly reset (sqlite)', {
  skip: existsSync(SteppedClock.library) ? false : `no ${SteppedClock.library} (apt package faketime)`,
}, () => {
  const resetMs = nextMonthStartMs(Date.now());
  const clockFile = join(tmpdir(), `vpn-panel-chaos-time-${process.pid}.faketime`);
  const clock = new SteppedClock(clockFile, resetMs - 30_000 - Date.now());
  const agent = new FakeAgent();
  let database: TestDatabase;
  let panel: PanelProcess;
  let key: string;
  let metered = 0;
  let expiring = 0;
  let expiresAtMs = 0;
  let meter = 0;
  let seq = 0;
  const serverErrors: string[] = [];
  /** Panel-clock times at which the expiring device was seen expired. */
  const seenExpiredAtMs: number[] = [];
  let polling: Promise<void> | undefined;
  let stopPolling = false;
  const call: ApiCall = (method, path, body) => callApi(panel.url, key, method, path, body);

  before(async () => {
    await agent.start();
    database = await createTestDatabase('sqlite');
    panel = await startPanel({ database, env: { ...clock.env, PANEL_TIMEZONE: 'UTC', LOCAL_NODE: 'off' } });
    key = await panel.createKey('chaos', 'all', ['--no-rate-limit']);
    assert.equal(
      (await panel.cli(['nodes', 'add', '--name', 'n', '--url', agent.url, '--token', agent.token])).code,
      0,
    );
    await untilPanelClock();
  });

  after(async () => {
    stopPolling = true;
    await polling;
    await panel?.stop();
    await agent.stop();
    await database?.drop();
    rmSync(clockFile, { force: true });
  });

  /** Waits until the panel's answers are dated by the clock as last stepped (HTTP `date`, whole seconds). */
  async function untilPanelClock(): Promise<void> {
    await waitFor(
      'the panel to see its clock step',
      async () => {
        const dated = Date.parse((await fetch(`${panel.url}/healthz`)).headers.get('date') ?? '');
        return Math.abs(dated - clock.nowMs()) < 2_500 ? true : undefined;
      },
      10_000,
      100,
    );
  }

  /** Has the fake node report `bytes` more for the metered device, in the quarter hour of `atMs` (node clock). */
  function report(bytes: number, atMs: number): void {
    meter += bytes;
    seq += 1;
    const slotStartMs = Math.floor(atMs / SLOT_MS) * SLOT_MS;
    const entries = [{ deviceId: metered, rxBytes: bytes, txBytes: 0, meter }];
    agent.usage.push({ seq, slotStartMs, entries } satisfies UsageBatch);
  }

  const usageOf = async () => {
    const device = (await call('GET', `/devices/${metered}`)).expect(200);
    return { period: device.period_usage.total_bytes, month: device.month_usage.total_bytes, status: device.status };
  };

  /** Waits until the device's month reads `bytes` (the batch is counted); fails naming what it reads. */
  const untilMonthUsage = async (bytes: number) => {
    let last = await usageOf();
    const counted = async () => {
      last = await usageOf();
      return last.month === bytes ? true : undefined;
    };
    try {
      await waitFor('the batch counted', counted, COLLECT_BOUND_MS);
    } catch (error) {
      throw new Error(`${String(error)}: the device reads ${JSON.stringify(last)}`);
    }
  };

  /** Reads the devices and events every 250 ms until the end, noting 5xx and when the expiry was seen. */
  async function poll(): Promise<void> {
    while (!stopPolling) {
      const panelNowMs = clock.nowMs();
      const answers = await Promise.all([
        callApi(panel.url, key, 'GET', `/devices/${metered}`),
        callApi(panel.url, key, 'GET', `/devices/${expiring}`),
        callApi(panel.url, key, 'GET', `/devices/${metered}/usage`),
        callApi(panel.url, key, 'GET', '/events?limit=20'),
      ]);
      for (const answer of answers) if (answer.status >= 500) serverErrors.push(JSON.stringify(answer.json));
      const [, expiringAnswer] = answers;
      if (expiringAnswer?.status === 200 && expiringAnswer.expect(200).status === 'expired') {
        seenExpiredAtMs.push(panelNowMs);
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  test('before the reset: the month counts the node’s bytes', async () => {
    const node = (await call('GET', '/nodes')).expect(200).data[0]?.id ?? assert.fail('no node');
    const server = (await call('POST', '/servers', { name: 'ct-1', node_id: node })).expect(201).id;
    const create = (name: string) => call('POST', '/devices', { server_id: server, name, data_limit: LIMIT_BYTES });
    metered = (await create('metered')).expect(201).id;
    expiring = (await create('expiring')).expect(201).id;
    polling = poll();
    report(4_000, resetMs - SLOT_MS);
    await untilMonthUsage(4_000);
    assert.deepEqual(await usageOf(), { period: 4_000, month: 4_000, status: 'active' });
  });

  test('an hour forward past the reset: the new month starts once', async () => {
    clock.step(HOUR_MS);
    await untilPanelClock();
    report(6_000, resetMs + HOUR_MS - SLOT_MS);
    await untilMonthUsage(6_000);
    assert.deepEqual(await usageOf(), { period: 6_000, month: 6_000, status: 'active' });
    // Due 40 s of panel time from now: after the hour back and the step forward again.
    expiresAtMs = clock.nowMs() + 40_000;
    const expires_at = new Date(expiresAtMs).toISOString();
    assert.equal((await call('PATCH', `/devices/${expiring}`, { expires_at })).expect(200).status, 'active');
  });

  test('an hour back across the reset: the new month’s bytes still count', async () => {
    clock.step(-HOUR_MS);
    await untilPanelClock();
    report(1_000, resetMs + HOUR_MS);
    await untilMonthUsage(7_000);
    assert.deepEqual(await usageOf(), { period: 7_000, month: 7_000, status: 'active' });
  });

  test('forward again: no second reset, the limit is reached once, the expiry comes on time', async (t) => {
    clock.step(HOUR_MS);
    await untilPanelClock();
    const steppedAtMs = clock.nowMs();
    assert.ok(steppedAtMs < expiresAtMs, 'the expiry is still ahead after the steps');
    report(4_000, resetMs + HOUR_MS + SLOT_MS);
    await untilMonthUsage(11_000);
    assert.deepEqual(await usageOf(), { period: 11_000, month: 11_000, status: 'limit_reached' });

    await waitFor('the expiry', async () => seenExpiredAtMs[0], expiresAtMs - clock.nowMs() + 10_000);
    const firstSeenMs = seenExpiredAtMs[0] ?? 0;
    assert.ok(firstSeenMs >= expiresAtMs - 1_000, `expired ${expiresAtMs - firstSeenMs} ms early`);
    assert.ok(firstSeenMs <= expiresAtMs + EXPIRY_SLACK_MS, `expired ${firstSeenMs - expiresAtMs} ms late`);
    t.diagnostic(`expiry seen ${firstSeenMs - expiresAtMs} ms after expires_at (panel clock, 250 ms polls)`);
    // The status turns at expires_at by itself; the event is posted by the expiry watch's next round (1 s).
    const expiredEvent = async () => {
      const events = (await call('GET', '/events?limit=200')).expect(200).data;
      return events.some((e) => e.kind === 'device.expired' && e.device_id === expiring) ? events : undefined;
    };
    const events = await waitFor('the device.expired event', expiredEvent, EXPIRY_SLACK_MS);
    const expired = events.filter((e) => e.kind === 'device.expired' && e.device_id === expiring);
    const limited = events.filter((e) => e.kind === 'device.limit_reached' && e.device_id === metered);
    assert.equal(expired.length, 1, 'one device.expired');
    assert.equal(limited.length, 1, 'one device.limit_reached');
    assert.deepEqual(
      events.filter((e) => e.kind === 'node.offline'),
      [],
      'no node went offline over the steps',
    );
  });

  test('no 5xx while the clock stepped', async () => {
    stopPolling = true;
    await polling;
    assert.deepEqual(serverErrors, []);
  });
});
