import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { KeyedQueue } from '../../src/agent/keyed-queue.ts';

/** A promise the test settles by hand. */
function gate(): { promise: Promise<void>; open: () => void; fail: (error: Error) => void } {
  const { promise, resolve, reject } = Promise.withResolvers<void>();
  return { promise, open: () => resolve(), fail: reject };
}

/** Lets every pending promise callback run. */
function drain(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

describe('KeyedQueue', () => {
  test('work for one key runs one at a time, in the order given', async () => {
    const queue = new KeyedQueue<number>();
    const log: string[] = [];
    const first = gate();
    const a = queue.run(1, async () => {
      log.push('a starts');
      await first.promise;
      log.push('a ends');
      return 'a';
    });
    const b = queue.run(1, async () => {
      log.push('b runs');
      return 'b';
    });
    await drain();
    assert.deepEqual(log, ['a starts'], 'b waits for a');
    first.open();
    assert.deepEqual(await Promise.all([a, b]), ['a', 'b']);
    assert.deepEqual(log, ['a starts', 'a ends', 'b runs']);
  });

  test('work for different keys runs side by side', async () => {
    const queue = new KeyedQueue<number>();
    const held = gate();
    const one = queue.run(1, () => held.promise);
    let otherRan = false;
    await queue.run(2, async () => {
      otherRan = true;
    });
    assert.equal(otherRan, true, 'key 2 does not wait for key 1');
    held.open();
    await one;
  });

  test('a failure is returned to its caller and the work behind it still runs', async () => {
    const queue = new KeyedQueue<string>();
    const held = gate();
    const failing = queue.run('s', () => held.promise);
    const next = queue.run('s', async () => 'after');
    const thrown = queue.run('s', () => {
      throw new Error('synchronous');
    });
    const last = queue.run('s', async () => 'last');
    held.fail(new Error('broken'));
    await assert.rejects(failing, /broken/);
    assert.equal(await next, 'after');
    await assert.rejects(thrown, /synchronous/);
    assert.equal(await last, 'last');
  });

  test('a key with nothing queued or running is forgotten', async () => {
    const queue = new KeyedQueue<number>();
    const held = gate();
    const running = queue.run(1, () => held.promise);
    const failing = queue.run(2, async () => {
      throw new Error('gone');
    });
    assert.equal(queue.size, 2);
    await assert.rejects(failing);
    await drain();
    assert.equal(queue.size, 1, 'only key 1 is busy');
    held.open();
    await running;
    await drain();
    assert.equal(queue.size, 0);
  });
});
