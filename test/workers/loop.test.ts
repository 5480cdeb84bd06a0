import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import { type Lease, WorkerLoop } from '../../src/workers/loop.ts';

const INTERVAL_MS = 1_000;

/** Lets every pending promise callback and immediate run. */
function drain(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** A round that counts its calls and waits for the test to let each one finish. */
interface HeldRound {
  round: () => Promise<number>;
  calls: () => number;
  finish: () => void;
  fail: (error: Error) => void;
}

function heldRound(): HeldRound {
  let calls = 0;
  let current = Promise.withResolvers<void>();
  return {
    round: async () => {
      calls += 1;
      await current.promise;
      return calls;
    },
    calls: () => calls,
    finish: () => {
      current.resolve();
      current = Promise.withResolvers<void>();
    },
    fail: (error) => {
      current.reject(error);
      current = Promise.withResolvers<void>();
    },
  };
}

/** A lease the test hands over and takes back by hand. */
class ManualLease implements Lease {
  held = false;
  readonly #listeners = new Set<() => void>();
  onGained(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
  gain(): void {
    this.held = true;
    for (const listener of this.#listeners) listener();
  }
  get listeners(): number {
    return this.#listeners.size;
  }
}

function unexpected(error: unknown): void {
  assert.fail(`no round should fail here: ${String(error)}`);
}

// The interval is a fake clock (ticks advance by hand); immediates and promises stay real.
describe('WorkerLoop', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setInterval'] }));
  afterEach(() => mock.timers.reset());

  test('a tick starts a round; ticks while it runs start none (single flight)', async () => {
    const held = heldRound();
    const loop = new WorkerLoop(held.round, { intervalMs: INTERVAL_MS, onError: unexpected });
    loop.start();
    mock.timers.tick(INTERVAL_MS - 1);
    assert.equal(held.calls(), 0, 'nothing before the first interval');
    mock.timers.tick(1);
    assert.equal(held.calls(), 1);
    mock.timers.tick(5 * INTERVAL_MS);
    assert.equal(held.calls(), 1, 'ticks during the round are skipped');
    held.finish();
    await loop.idle();
    mock.timers.tick(INTERVAL_MS);
    assert.equal(held.calls(), 2, 'the next tick after the round starts the next one');
    held.finish();
    await loop.stop();
  });

  test('calls while a round runs share it and get its result', async () => {
    const held = heldRound();
    const loop = new WorkerLoop(held.round, { intervalMs: INTERVAL_MS, onError: unexpected });
    const first = loop.runOnce();
    const second = loop.runOnce();
    assert.equal(first, second);
    held.finish();
    assert.equal(await first, 1);
    const third = loop.runOnce();
    held.finish();
    assert.equal(await third, 2, 'a call after the round ends runs a new one');
  });

  test('stop() ends the ticks and waits for the round in flight', async () => {
    const held = heldRound();
    const loop = new WorkerLoop(held.round, { intervalMs: INTERVAL_MS, onError: unexpected });
    loop.start();
    mock.timers.tick(INTERVAL_MS);
    let stopped = false;
    const stopping = loop.stop().then(() => {
      stopped = true;
    });
    await drain();
    assert.equal(stopped, false, 'stop waits while the round runs');
    held.finish();
    await stopping;
    assert.equal(loop.busy, false);
    mock.timers.tick(10 * INTERVAL_MS);
    assert.equal(held.calls(), 1, 'no round after stop');
  });

  test('a failed round is reported to onError and the loop goes on', async () => {
    const held = heldRound();
    const errors: unknown[] = [];
    const loop = new WorkerLoop(held.round, { intervalMs: INTERVAL_MS, onError: (error) => errors.push(error) });
    loop.start();
    mock.timers.tick(INTERVAL_MS);
    held.fail(new Error('database gone'));
    await loop.idle();
    await drain();
    assert.deepEqual(
      errors.map((e) => (e instanceof Error ? e.message : e)),
      ['database gone'],
    );
    mock.timers.tick(INTERVAL_MS);
    assert.equal(held.calls(), 2, 'the next tick runs again');
    held.finish();
    await loop.stop();
    assert.equal(errors.length, 1);
  });

  test('a call that shares a failing round gets the failure; stop() does not throw it', async () => {
    const held = heldRound();
    const loop = new WorkerLoop(held.round, { intervalMs: INTERVAL_MS, onError: unexpected });
    const round = loop.runOnce();
    const stopping = loop.stop();
    held.fail(new Error('broken'));
    await assert.rejects(round, /broken/);
    await stopping;
  });

  test('nudges of one turn share a round, which starts without a tick', async () => {
    const held = heldRound();
    const loop = new WorkerLoop(held.round, { intervalMs: INTERVAL_MS, onError: unexpected });
    loop.nudge();
    loop.nudge();
    assert.equal(held.calls(), 0, 'a nudge runs the round soon, not inside the caller');
    assert.equal(loop.busy, true);
    await drain();
    assert.equal(held.calls(), 1);
    held.finish();
    await loop.idle();
    assert.equal(held.calls(), 1);
  });

  test('a nudge while a round runs makes one more round follow it', async () => {
    const held = heldRound();
    const loop = new WorkerLoop(held.round, { intervalMs: INTERVAL_MS, onError: unexpected });
    const first = loop.runOnce();
    loop.nudge();
    await drain();
    loop.nudge();
    await drain();
    assert.equal(held.calls(), 1);
    held.finish();
    await drain();
    assert.equal(held.calls(), 2, 'the nudges during the round asked for one more');
    held.finish();
    assert.equal(await first, 2, 'the caller waits for the round that follows');
    await loop.idle();
    assert.equal(held.calls(), 2);
  });

  test('onTick replaces what a tick does', async () => {
    const held = heldRound();
    let ticks = 0;
    const loop = new WorkerLoop(held.round, {
      intervalMs: INTERVAL_MS,
      onError: unexpected,
      onTick: () => {
        ticks += 1;
      },
    });
    loop.start();
    mock.timers.tick(3 * INTERVAL_MS);
    assert.equal(ticks, 3);
    assert.equal(held.calls(), 0);
    await loop.stop();
  });

  test(
    'with a lease, ticks and nudges start rounds only while it is held, ' + 'and gaining it starts one at once',
    async () => {
      const held = heldRound();
      const lease = new ManualLease();
      const loop = new WorkerLoop(held.round, { intervalMs: INTERVAL_MS, onError: unexpected, lease });
      loop.start();
      mock.timers.tick(3 * INTERVAL_MS);
      loop.nudge();
      await drain();
      assert.equal(held.calls(), 0, 'another panel holds the lease: no round');
      const called = loop.runOnce();
      assert.equal(held.calls(), 1, 'runOnce runs regardless');
      held.finish();
      await called;

      lease.gain();
      await drain();
      assert.equal(held.calls(), 2, 'a round starts when the lease is gained, before the next tick');
      held.finish();
      await loop.idle();
      mock.timers.tick(INTERVAL_MS);
      assert.equal(held.calls(), 3, 'ticks run rounds while it is held');
      held.finish();
      await loop.idle();

      lease.held = false;
      mock.timers.tick(3 * INTERVAL_MS);
      loop.nudge();
      await drain();
      assert.equal(held.calls(), 3, 'lost: no round again');
      await loop.stop();
      assert.equal(lease.listeners, 0, 'stop() stops listening to the lease');
    },
  );
});
