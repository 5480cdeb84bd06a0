import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../../src/domain/clock.ts';
import {
  addressBucket,
  networkBucket,
  type RateDecision,
  type RatePolicy,
  REQUEST_RATE,
  gcra,
  rateLimitField,
  rateLimitPolicyField,
} from '../../src/domain/rate-limit.ts';

/** One key's limiter state, driven by explicit times: no timers anywhere. */
class Caller {
  tatMs: number | undefined = undefined;
  readonly policy: RatePolicy;
  constructor(policy: RatePolicy = REQUEST_RATE) {
    this.policy = policy;
  }
  take(nowMs: number): RateDecision {
    const { decision, tatMs } = gcra(this.tatMs, nowMs, this.policy);
    this.tatMs = tatMs;
    return decision;
  }
  /** Sends `count` requests at the same instant and returns every decision. */
  burst(nowMs: number, count: number): RateDecision[] {
    return Array.from({ length: count }, () => this.take(nowMs));
  }
}

const passed = (decisions: RateDecision[]): number => decisions.filter((d) => d.allowed).length;
/** 59, 58, … 0: what `remaining` reads over n allowed requests starting from n − 1. */
const countdown = (n: number): number[] => Array.from({ length: n }, (_, i) => n - 1 - i);

describe('request rate of docs/api.md "Rate limits": 10 a second per key, bursts up to 60', () => {
  test('the policy is 60 at once, 10 a second', () => {
    assert.deepEqual(REQUEST_RATE, { burst: 60, perSecond: 10 });
  });

  test('60 requests at the same instant pass with remaining 59…0; the 61st is refused, Retry-After 1', () => {
    const caller = new Caller();
    const first60 = caller.burst(0, 60);
    assert.deepEqual(
      first60.map((d) => d.allowed),
      Array<boolean>(60).fill(true),
    );
    assert.deepEqual(
      first60.map((d) => d.remaining),
      countdown(60),
    );
    assert.deepEqual(
      first60.map((d) => d.retryAfterSeconds),
      Array<number>(60).fill(0),
    );
    assert.deepEqual(caller.take(0), { allowed: false, remaining: 0, resetSeconds: 6, retryAfterSeconds: 1 });
  });

  test('refusals do not use up the budget: 1,000 refused requests change nothing', () => {
    const caller = new Caller();
    caller.burst(0, 60);
    assert.equal(passed(caller.burst(0, 1000)), 0);
    assert.equal(passed(caller.burst(100, 2)), 1, 'still exactly one request earned after 100 ms');
  });

  test('100 ms after a full burst exactly one more passes, with remaining 0', () => {
    const caller = new Caller();
    caller.burst(0, 61);
    const at100 = caller.burst(100, 5);
    assert.deepEqual(
      at100.map((d) => d.allowed),
      [true, false, false, false, false],
    );
    assert.equal(at100[0]?.remaining, 0);
  });

  test('99 ms after a full burst nothing passes yet', () => {
    const caller = new Caller();
    caller.burst(0, 60);
    assert.equal(passed(caller.burst(99, 5)), 0);
  });

  test('after 1 s of quiet exactly 10 pass, with remaining 9…0', () => {
    const caller = new Caller();
    caller.burst(0, 61);
    const at1s = caller.burst(1000, 20);
    assert.equal(passed(at1s), 10);
    assert.deepEqual(
      at1s.slice(0, 10).map((d) => d.remaining),
      countdown(10),
    );
    assert.ok(at1s.slice(10).every((d) => !d.allowed && d.remaining === 0 && d.retryAfterSeconds === 1));
  });

  test('after 6 s of quiet the full 60 pass again, with remaining 59…0', () => {
    const caller = new Caller();
    caller.burst(0, 61);
    const at6s = caller.burst(6000, 61);
    assert.equal(passed(at6s), 60);
    assert.deepEqual(
      at6s.slice(0, 60).map((d) => d.remaining),
      countdown(60),
    );
    assert.equal(at6s[60]?.allowed, false);
  });

  test('a long quiet period does not bank more than the burst', () => {
    const caller = new Caller();
    caller.burst(0, 10);
    assert.equal(passed(caller.burst(3_600_000, 100)), 60);
  });

  test('a steady 10 a second passes forever', () => {
    const caller = new Caller();
    const clock = new ManualClock(0);
    const decisions: RateDecision[] = [];
    for (let i = 0; i < 600; i++) {
      decisions.push(caller.take(clock.nowMs()));
      clock.advance(100);
    }
    assert.equal(passed(decisions), 600);
  });

  test('a steady 20 a second is held to 10 a second once the burst is spent', () => {
    const caller = new Caller();
    const decisions = Array.from({ length: 1200 }, (_, i) => ({ nowMs: i * 50, decision: caller.take(i * 50) }));
    const lastTenSeconds = decisions.filter((d) => d.nowMs >= 50_000).map((d) => d.decision);
    assert.equal(lastTenSeconds.length, 200);
    assert.equal(passed(lastTenSeconds), 100);
  });

  test('no fixed-window edge: 60 at t=999 ms then 60 at t=1001 ms do not all pass', () => {
    const caller = new Caller();
    const before = caller.burst(999, 60);
    const after = caller.burst(1001, 60);
    assert.equal(passed(before), 60);
    assert.equal(passed(after), 0, 'only 2 ms have passed: not even one request earned');
  });

  test('hammering across a whole second passes the burst plus what that second earns, no more', () => {
    const caller = new Caller();
    // Hammer 1,000 requests a second in 1 ms steps across the 1 s boundary.
    let inSpan = 0;
    for (let t = 500; t < 1500; t++) if (caller.take(t).allowed) inSpan++;
    assert.equal(inSpan, 60 + 9, 'the burst, then one every 100 ms over 999 ms (at 600, 700 … 1400)');
  });

  test('keys are independent: another key at full burst while one is exhausted', () => {
    const a = new Caller();
    const b = new Caller();
    a.burst(0, 61);
    assert.equal(passed(b.burst(0, 61)), 60);
  });
});

describe('Retry-After and reset seconds', () => {
  test('waiting Retry-After seconds after a refusal lets the request through', () => {
    const caller = new Caller();
    caller.burst(0, 60);
    const refused = caller.take(0);
    assert.equal(refused.allowed, false);
    assert.equal(caller.take(refused.retryAfterSeconds * 1000).allowed, true);
  });

  test('Retry-After is whole seconds rounded up, never 0 on a refusal', () => {
    // 0.4 a second: one request earned every 2.5 s.
    const caller = new Caller({ burst: 2, perSecond: 0.4 });
    assert.equal(passed(caller.burst(0, 2)), 2);
    const cases: Array<[nowMs: number, retryAfterSeconds: number]> = [
      [0, 3],
      [1, 3],
      [500, 2],
      [1500, 1],
      [2499, 1],
    ];
    for (const [nowMs, retryAfterSeconds] of cases) {
      const decision = caller.take(nowMs);
      assert.equal(decision.allowed, false, `refused at ${nowMs} ms`);
      assert.equal(decision.retryAfterSeconds, retryAfterSeconds, `Retry-After at ${nowMs} ms`);
    }
    assert.equal(caller.take(2500).allowed, true, 'passes at 2.5 s');
  });

  test('resetSeconds: whole seconds, rounded up, until the full burst is back', () => {
    const caller = new Caller();
    const cases: Array<[intent: string, nowMs: number, count: number, resetSeconds: number]> = [
      ['one request at t=0 owes 0.1 s', 0, 1, 1],
      ['ten requests at t=0 owe 1 s', 0, 9, 1],
      ['eleven requests owe 1.1 s', 0, 1, 2],
      ['sixty requests owe 6 s', 0, 49, 6],
      ['a refusal still reports 6 s', 0, 1, 6],
      ['at t=3 s the debt is 3 s, one more makes 3.1 s', 3000, 1, 4],
      ['at t=6.1 s the debt is gone; one request owes 0.1 s', 6100, 1, 1],
    ];
    for (const [intent, nowMs, count, resetSeconds] of cases) {
      const last = caller.burst(nowMs, count).at(-1);
      assert.equal(last?.resetSeconds, resetSeconds, intent);
    }
  });
});

describe('IETF RateLimit header fields', () => {
  test('RateLimit-Policy is "default";q=60;w=6', () => {
    assert.equal(rateLimitPolicyField(REQUEST_RATE), '"default";q=60;w=6');
  });

  test('RateLimit carries remaining and reset seconds', () => {
    const caller = new Caller();
    assert.equal(rateLimitField(caller.take(0)), '"default";r=59;t=1');
    caller.burst(0, 58);
    assert.equal(rateLimitField(caller.take(0)), '"default";r=0;t=6');
    assert.equal(rateLimitField(caller.take(0)), '"default";r=0;t=6');
  });
});

describe('the address buckets that per-address limits count', () => {
  test('an IPv4 address (also IPv6-mapped) is its own bucket and has no network bucket', () => {
    for (const address of ['203.0.113.7', '::ffff:203.0.113.7', '::FFFF:203.0.113.7']) {
      assert.equal(addressBucket(address), '203.0.113.7', address);
      assert.equal(networkBucket(address), undefined, address);
    }
  });

  test('an IPv6 address counts by its /64 and, beside it, by its /48', () => {
    const cases: Array<[address: string, slash64: string, slash48: string]> = [
      ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64', '2001:db8:1::/48'],
      ['2001:0db8:0001:00ff::1', '2001:db8:1:ff::/64', '2001:db8:1::/48'],
      ['2001:db8::1', '2001:db8:0:0::/64', '2001:db8:0::/48'],
      ['::1', '0:0:0:0::/64', '0:0:0::/48'],
    ];
    for (const [address, slash64, slash48] of cases) {
      assert.equal(addressBucket(address), slash64, address);
      assert.equal(networkBucket(address), slash48, address);
    }
  });
});
