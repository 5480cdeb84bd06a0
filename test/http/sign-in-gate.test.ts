/**
 * The console sign-in's budgets (src/http/sign-in-gate.ts) on in-process limiters and a manual clock, with
 * no password hashed: the ceilings that take a route test hundreds of hashes to reach (issue 30).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../src/domain/clock.ts';
import { AppError } from '../../src/domain/errors.ts';
import {
  type RatePolicy,
  SIGN_IN_ADDRESS_RATE,
  SIGN_IN_NAME_RATE,
  SIGN_IN_NETWORK_RATE,
  SIGN_IN_USER_RATE,
} from '../../src/domain/rate-limit.ts';
import { InProcessRateLimiter } from '../../src/http/rate-limiter.ts';
import { SignInGate } from '../../src/http/sign-in-gate.ts';
import { SignInRefusals } from '../../src/http/sign-in-refusals.ts';
import { createLogger } from '../../src/main/logging.ts';
import { type SignInBudget, UNOBSERVED_PANEL } from '../../src/services/metrics.ts';

/** A gate as the panel wires it; `alice` has signed in from the browser whose token is `alice's browser`. */
function gateUnderTest() {
  const clock = new ManualClock(Date.parse('2026-05-01T08:00:00Z'));
  const lines: Record<string, unknown>[] = [];
  const counted: SignInBudget[] = [];
  const log = createLogger('warn', { write: (line: string) => void lines.push(JSON.parse(line)) });
  const observer = { ...UNOBSERVED_PANEL, signInRefused: (budget: SignInBudget) => void counted.push(budget) };
  const limiter = (policy: RatePolicy) => new InProcessRateLimiter(policy, clock);
  const limiters = {
    perAddress: limiter(SIGN_IN_ADDRESS_RATE),
    perNetwork: limiter(SIGN_IN_NETWORK_RATE),
    perUserFrom: limiter(SIGN_IN_USER_RATE),
    perUser: limiter(SIGN_IN_NAME_RATE),
    refusals: new SignInRefusals(log, clock, observer),
  };
  const knownDevice = async (name: string, token: string) =>
    name.toLowerCase() === 'alice' && token === "alice's browser" ? 'device-1' : undefined;
  return { gate: new SignInGate(limiters, knownDevice), clock, lines, counted };
}

/** The refusal of an attempt the gate should refuse. */
async function refusal(attempt: Promise<unknown>): Promise<AppError> {
  const error = await attempt.then(
    () => assert.fail('admitted'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof AppError, String(error));
  assert.equal(error.code, 'rate_limited');
  return error;
}

describe('console sign-in budgets', () => {
  it(
    'lets 100 attempts at a name from anywhere, then one a minute; ' + "the user's own browser is not held back",
    async () => {
      const { gate, clock, counted } = gateUnderTest();
      for (let address = 1; address <= 10; address++) {
        for (let i = 0; i < 10; i++) await gate.admit('alice', `198.51.100.${address}`, undefined);
      }
      const spent = await refusal(gate.admit('Alice', '198.51.100.11', undefined));
      assert.match(spent.message, /for this user name from browsers that have not signed in as this user before/);
      assert.equal(spent.retryAfterSeconds, 60);
      assert.deepEqual(counted, ['name']);
      const known = await gate.admit('alice', '198.51.100.11', "alice's browser");
      assert.equal(known.deviceId, 'device-1');
      await gate.admit('bob', '198.51.100.11', undefined);
      await refusal(gate.admit('alice', '198.51.100.12', "bob's browser"));
      clock.advance(60_000);
      await gate.admit('alice', '198.51.100.12', undefined);
      await refusal(gate.admit('alice', '198.51.100.13', undefined));
    },
  );

  it('a known browser spends a budget of its own for the name, which a success there gives back', async () => {
    const { gate } = gateUnderTest();
    const admitted = [];
    for (let i = 0; i < 10; i++) admitted.push(await gate.admit('alice', '198.51.100.1', "alice's browser"));
    const spent = await refusal(gate.admit('alice', '198.51.100.2', "alice's browser"));
    assert.match(spent.message, /for this user name from this browser/);
    const stranger = await gate.admit('alice', '198.51.100.1', undefined);
    assert.equal(stranger.deviceId, undefined, 'the same address without the token: a budget of its own');
    const last = admitted.at(-1);
    assert.ok(last);
    await gate.succeeded(last);
    for (let i = 0; i < 10; i++) await gate.admit('alice', '198.51.100.2', "alice's browser");
  });

  it('counts an IPv6 /48 beside its /64s: 60 attempts, then 20 a minute, whatever /64 they come from', async () => {
    const { gate, lines, counted } = gateUnderTest();
    for (let i = 0; i < 60; i++) await gate.admit(`name-${i}`, `2001:db8:1:${i.toString(16)}::1`, undefined);
    const spent = await refusal(gate.admit('alice', '2001:db8:1:ffff::1', undefined));
    assert.match(spent.message, /from this network/);
    assert.equal(spent.retryAfterSeconds, 3);
    await gate.admit('alice', '2001:db8:2:0::1', undefined);
    await refusal(gate.admit('bob', '2001:db8:1:fffe::1', undefined));
    assert.deepEqual(counted, ['network', 'network']);
    assert.deepEqual(
      lines.map(({ level, msg, budget, address, refusedSinceLastLine }) => ({
        level,
        msg,
        budget,
        address,
        refusedSinceLastLine,
      })),
      [
        {
          level: 40,
          msg: 'console sign-in refused: a budget ran out',
          budget: 'network',
          address: '2001:db8:1::/48',
          refusedSinceLastLine: 0,
        },
      ],
      'one warn line for the /48 within the minute',
    );
  });

  it('counts an IPv4 address alone, however many names it tries: 30, then ten a minute', async () => {
    const { gate, lines } = gateUnderTest();
    for (let i = 0; i < 30; i++) await gate.admit(`name-${i}`, '203.0.113.7', undefined);
    const spent = await refusal(gate.admit('alice', '203.0.113.7', undefined));
    assert.match(spent.message, /from this address/);
    await gate.admit('alice', '203.0.113.8', undefined);
    assert.deepEqual(
      lines.map(({ budget, address, user }) => ({ budget, address, user })),
      [{ budget: 'address', address: '203.0.113.7', user: undefined }],
    );
  });
});
