import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Slots } from '../../src/workers/slots.ts';

/** A task that runs until `release` is called, recording how many tasks run at once. */
function gate() {
  let release = () => {};
  const done = new Promise<void>((resolve) => (release = resolve));
  return { done, release: () => release() };
}

describe('Slots', () => {
  it('runs at most its size at once, the rest in the order they came', async () => {
    const slots = new Slots(2);
    const gates = Array.from({ length: 5 }, gate);
    const started: number[] = [];
    let running = 0;
    let most = 0;
    const runs = gates.map((g, i) =>
      slots.run(async () => {
        started.push(i);
        running++;
        most = Math.max(most, running);
        await g.done;
        running--;
        return i;
      }),
    );
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(started, [0, 1]);
    gates[1]?.release();
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(started, [0, 1, 2]);
    for (const g of gates) g.release();
    assert.deepEqual(await Promise.all(runs), [0, 1, 2, 3, 4]);
    assert.deepEqual(started, [0, 1, 2, 3, 4]);
    assert.equal(most, 2);
  });

  it('frees the slot of a task that failed', async () => {
    const slots = new Slots(1);
    await assert.rejects(
      slots.run(() => Promise.reject(new Error('boom'))),
      /boom/,
    );
    assert.equal(await slots.run(() => Promise.resolve('next')), 'next');
  });
});
