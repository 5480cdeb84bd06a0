import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { type PanelProcess, startPanel } from '../support/panel.ts';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

interface Answer {
  status: number;
  retryAfter: string | null;
  rateLimit: string | null;
  policy: string | null;
  code: string | undefined;
}

async function get(url: string, key: string): Promise<Answer> {
  const response = await fetch(`${url}/api/v1/nodes`, { headers: { authorization: `Bearer ${key}` } });
  const body = await response.json();
  return {
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    rateLimit: response.headers.get('ratelimit'),
    policy: response.headers.get('ratelimit-policy'),
    code: body.error?.code,
  };
}

/** Sends `count` requests at once, spread over the given panels; returns the answers and the seconds it took. */
async function burst(urls: string[], key: string, count: number): Promise<{ answers: Answer[]; seconds: number }> {
  const started = performance.now();
  const answers = await Promise.all(Array.from({ length: count }, (_, i) => get(urls[i % urls.length] ?? '', key)));
  return { answers, seconds: (performance.now() - started) / 1000 };
}

/** Spec §8: bursts up to 60, then 10 a second; what a GCRA lets through in `seconds` after a full bucket. */
function allowedWithin(seconds: number): number {
  return 60 + Math.ceil(seconds * 10);
}

describe('rate limit per key (in process)', () => {
  let db: TestDatabase;
  let panel: PanelProcess;
  before(async () => {
    db = await createTestDatabase('sqlite');
    panel = await startPanel({ database: db });
  });
  after(async () => {
    await panel.stop();
    await db.drop();
  });

  it('passes a burst of 60, refuses the next with 429 and Retry-After, and refills at 10 a second', async () => {
    const key = await panel.createKey('burst', 'servers:read');
    const { answers, seconds } = await burst([panel.url], key, 61);
    const passed = answers.filter((a) => a.status === 200).length;
    assert.ok(passed >= 60, `the burst of 60 passes (${passed} did)`);
    assert.ok(passed <= allowedWithin(seconds), `${passed} passed in ${seconds.toFixed(3)} s`);
    if (seconds < 0.1) assert.equal(passed, 60, 'the 61st within the same instant is refused');
    const more = await burst([panel.url], key, 20);
    const refused = [...answers, ...more.answers].filter((a) => a.status === 429);
    assert.ok(refused.length >= 81 - allowedWithin(seconds + more.seconds), `${refused.length} refused`);
    for (const a of refused) {
      assert.equal(a.code, 'rate_limited');
      assert.match(a.retryAfter ?? '', /^[1-9][0-9]*$/, 'Retry-After in whole seconds');
      assert.match(a.rateLimit ?? '', /^"default";r=0;t=\d+$/);
    }
    assert.ok(answers.every((a) => a.policy === '"default";q=60;w=6'));
    assert.ok(
      answers.some((a) => a.rateLimit === '"default";r=59;t=1'),
      'the first answer says 59 remain',
    );

    // A timer fires late on a loaded machine: the refill is counted over the time that really passed.
    const waitStartedMs = performance.now();
    await new Promise((r) => setTimeout(r, 1000));
    const waitedS = (performance.now() - waitStartedMs) / 1000;
    const refill = await burst([panel.url], key, 15);
    const refilled = refill.answers.filter((a) => a.status === 200).length;
    const most = Math.ceil((waitedS + refill.seconds) * 10) + 1;
    assert.ok(refilled >= 9 && refilled <= most, `${refilled} passed after ${waitedS.toFixed(3)} s (at most ${most})`);
  });

  it('counts each key on its own', async () => {
    const a = await panel.createKey('key-a', 'servers:read');
    const b = await panel.createKey('key-b', 'servers:read');
    await burst([panel.url], a, 70);
    assert.equal((await get(panel.url, b)).status, 200);
  });

  it('exempts a key created with --no-rate-limit, and sends no limit fields for it', async () => {
    const bench = await panel.createKey('bench', 'servers:read', ['--no-rate-limit']);
    const { answers } = await burst([panel.url], bench, 100);
    assert.ok(answers.every((a) => a.status === 200));
    assert.equal(answers[0]?.rateLimit, null);
  });
});

describe('rate limit shared through Redis by two panels', () => {
  let db: TestDatabase;
  let panels: PanelProcess[];
  before(async () => {
    db = await createTestDatabase('postgres');
    panels = [
      await startPanel({ database: db, env: { REDIS_URL, LOCAL_NODE: 'off' } }),
      await startPanel({ database: db, env: { REDIS_URL, LOCAL_NODE: 'off' } }),
    ];
  });
  after(async () => {
    for (const panel of panels) await panel.stop();
    await db.drop();
  });

  it('lets one key through both panels together no more than one limit allows', async () => {
    const [first] = panels;
    if (!first) throw new Error('no panel');
    const key = await first.createKey('shared', 'servers:read');
    const { answers, seconds } = await burst(
      panels.map((p) => p.url),
      key,
      90,
    );
    const passed = answers.filter((a) => a.status === 200).length;
    assert.ok(passed >= 60, `the burst of 60 passes (${passed} did)`);
    assert.ok(passed <= allowedWithin(seconds), `${passed} passed through two panels in ${seconds.toFixed(3)} s`);
    const refused = answers.filter((a) => a.status === 429);
    assert.ok(refused.length > 0);
    assert.ok(refused.every((a) => a.code === 'rate_limited' && /^[1-9][0-9]*$/.test(a.retryAfter ?? '')));
  });
});
