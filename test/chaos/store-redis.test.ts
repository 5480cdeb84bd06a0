/**
 * Issue 27, chaos: the Redis that two panels share their rate limits in is SIGKILLed under a load of reads
 * and writes. The API keeps answering with no 5xx; each panel then counts a key's limit on its own
 * (docs/operating.md "Several panels": one budget per panel without Redis); Redis back, one budget again.
 * The Redis is the test's own (test/support/chaos-store.ts), never the shared one.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import {
  type Answered,
  forbiddenServerErrors,
  OwnRedis,
  type PanelPair,
  record,
  startPanelPair,
  writeLoop,
} from '../support/chaos-store.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { sleep, waitFor } from '../support/netns.ts';
import { allowedWithin, burst } from '../support/rate-limit.ts';

let redis: OwnRedis;
let db: TestDatabase;
let pair: PanelPair | undefined;

before(async () => {
  redis = await OwnRedis.start();
  db = await createTestDatabase('postgres');
  pair = await startPanelPair([db, db], { REDIS_URL: redis.url });
});

after(async () => {
  await pair?.stop();
  await redis.kill();
  await db.drop();
});

/** How many clients Redis has besides the one asking: each panel holds one connection. */
function redisClients(): number {
  const list = execFileSync('redis-cli', ['-p', String(redis.port), 'client', 'list'], { encoding: 'utf8' });
  return list.trim().split('\n').length - 1;
}

/** A burst of `count` reads with a new key through `urls`: how many passed, and in how many seconds. */
async function limitedBurst(urls: string[], count: number): Promise<{ passed: number; seconds: number }> {
  const first = pair?.panels[0];
  assert.ok(first !== undefined);
  const key = await first.createKey(`burst-${randomBytes(3).toString('hex')}`, 'servers:read');
  const { answers, seconds } = await burst(urls, key, count);
  const unexpected = answers.filter((a) => a.status !== 200 && a.status !== 429);
  assert.deepEqual(unexpected, [], 'only 200 or 429');
  return { passed: answers.filter((a) => a.status === 200).length, seconds };
}

test('Redis SIGKILLed under load: no 5xx, each panel limits alone, shared limits again with Redis back', async () => {
  assert.ok(pair !== undefined);
  const { key: writer, serverId } = pair;
  const [a, b] = pair.panels;
  assert.ok(a !== undefined && b !== undefined);
  const urls = [a.url, b.url];

  const shared = await limitedBurst(urls, 90);
  assert.ok(shared.passed <= allowedWithin(shared.seconds), `one budget across both panels: ${shared.passed}`);

  const log: Answered[] = [];
  let done = false;
  const writes = writeLoop(urls, writer, serverId, () => done, log);
  const reader = await a.createKey('reader', 'devices:read');
  const reads = (async () => {
    for (let i = 0; !done; i++) await record(log, urls[i % 2] ?? '', reader, 'GET', '/devices?limit=5');
  })();
  try {
    await sleep(1_000);
    const killedAt = Date.now();
    await redis.kill();
    await sleep(3_000);

    // Per panel: each lets a new key's burst through once, and refuses past it.
    const alone = await limitedBurst([a.url], 80);
    assert.ok(alone.passed >= 60 && alone.passed <= allowedWithin(alone.seconds), `one panel: ${alone.passed}`);
    const both = await limitedBurst(urls, 160);
    assert.ok(both.passed > allowedWithin(both.seconds), `a budget per panel: ${both.passed} through two`);
    assert.ok(both.passed <= 2 * allowedWithin(both.seconds), `and no more: ${both.passed}`);

    await redis.start();
    const startedAt = Date.now();
    await waitFor('both panels to reconnect to Redis', async () => (redisClients() >= 2 ? true : undefined), 15_000);
    const reconnectedMs = Date.now() - startedAt;
    const again = await limitedBurst(urls, 90);
    assert.ok(again.passed <= allowedWithin(again.seconds), `one budget again: ${again.passed}`);

    done = true;
    await Promise.all([writes, reads]);
    const during = log.filter((w) => w.at > killedAt && w.at < startedAt);
    process.stdout.write(
      `# ${log.length} requests, ${during.length} while Redis was down; per panel ${alone.passed} of 80, ` +
        `${both.passed} of 160 through two; both panels reconnected ${reconnectedMs} ms after Redis was back\n`,
    );
    assert.ok(during.length > 20, 'the load went on while Redis was down');
    assert.deepEqual(forbiddenServerErrors(log), [], 'no 5xx');
    assert.deepEqual(
      log.filter((w) => w.status === undefined || w.status >= 500).map((w) => `${w.method} ${w.path}: ${w.status}`),
      [],
      'every request answered, none with a 5xx',
    );
  } finally {
    done = true;
    await Promise.all([writes, reads]);
  }
});
