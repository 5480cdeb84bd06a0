/**
 * The agent's kernel allowances with a scripted data plane (docs/dataplane.md, "Where each byte is counted"): each
 * limited peer on the interface gets what its quota counted plus what the ledger leaves it, converted; the
 * allowance moves every metering tick and at once on a reset, a top-up, a limit removed; a peer cut off has none.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Agent } from '../../src/agent/agent.ts';
import { quotaAllowance } from '../../src/agent/quota/allowance.ts';
import { MemoryJournal, UsageLedger } from '../../src/agent/usage-ledger.ts';
import { ManualClock } from '../../src/domain/clock.ts';
import { TEST_SERVER, testPeer } from '../support/agent-peers.ts';
import { waitFor } from '../support/netns.ts';
import { ScriptedDriver } from '../support/scripted-driver.ts';

const MTU = TEST_SERVER.mtu;

async function setup() {
  const limited = testPeer(1, { remainingBytes: 9_000_000, dataLimit: 9_000_000 });
  const free = testPeer(2, {});
  const driver = new ScriptedDriver();
  const clock = new ManualClock(Date.parse('2026-11-10T10:00:00Z'));
  const agent = new Agent(driver, 'test', { ledger: new UsageLedger(new MemoryJournal()), clock });
  await agent.applyServer({ server: TEST_SERVER, peers: [limited, free] });
  const allowance = () => driver.allowances.get(1)?.get(limited.publicKey)?.limitBytes;
  /** The device downloads: WireGuard counts `outer`, its quota `counted`. */
  const download = (outer: number, counted: number) => {
    const counters = driver.servers.get(1)?.peers.get(limited.publicKey);
    assert.ok(counters);
    counters.tx += outer;
    driver.counted.set(limited.publicKey, (driver.counted.get(limited.publicKey) ?? 0) + counted);
  };
  return { agent, driver, limited, free, allowance, download };
}

describe('kernel allowances set by the agent', () => {
  it('sets what is left, converted, for limited peers only, and moves it as the ledger counts', async () => {
    const { agent, driver, free, allowance, download } = await setup();
    assert.equal(allowance(), quotaAllowance(9_000_000, MTU));
    assert.equal(driver.allowances.get(1)?.has(free.publicKey), false, 'a peer without a limit has none');
    download(1_000_000, 950_000);
    await agent.meterAll();
    assert.equal(allowance(), 950_000 + quotaAllowance(8_000_000, MTU), 'from the count, what the ledger leaves');
  });

  it('a reset, a top-up and a limit removed move it at once; a peer cut off has none', async () => {
    const { agent, driver, limited, allowance, download } = await setup();
    download(9_000_000, 8_800_000);
    await agent.meterAll();
    assert.equal(allowance(), undefined, 'cut off: no allowance');
    assert.equal(driver.servers.get(1)?.peers.has(limited.publicKey), false);
    const { journalId } = agent.collectUsage(null);
    const topUp = { ...limited.limits, remainingBytes: 1_000_000, dataLimit: 10_000_000, journalId, meter: 9_000_000 };
    await agent.changePeers(1, { upsert: [{ ...limited, limits: topUp }], remove: [] });
    assert.equal(allowance(), quotaAllowance(1_000_000, MTU), 'a top-up: at once, on a quota made anew');
    download(400_000, 390_000);
    // The panel stored 9,000,000: the 400,000 booked since count against the whole limit it sends again.
    const reset = { ...topUp, remainingBytes: 10_000_000, meter: 9_000_000 };
    await agent.changePeers(1, { upsert: [{ ...limited, limits: reset }], remove: [] });
    assert.equal(allowance(), 390_000 + quotaAllowance(9_600_000, MTU), 'a reset: at once, from the count');
    await agent.changePeers(1, { upsert: [{ ...limited, limits: { ...reset, remainingBytes: null } }], remove: [] });
    assert.equal(driver.allowances.get(1)?.size, 0, 'a limit removed: none');
  });

  it('meters again soon when a peer will use up its allowance before the next tick, so the cut follows', async () => {
    // Long, so the early re-check (a tenth of it) comes well after the rounds below, even on a loaded machine.
    const intervalMs = 20_000;
    const limited = testPeer(1, { remainingBytes: 9_000_000, dataLimit: 9_000_000 });
    const driver = new ScriptedDriver();
    const clock = new ManualClock(Date.parse('2026-11-10T10:00:00Z'));
    const ledger = new UsageLedger(new MemoryJournal());
    const agent = new Agent(driver, 'test', { ledger, clock, meterIntervalMs: intervalMs });
    await agent.applyServer({ server: TEST_SERVER, peers: [limited] });
    const download = (outer: number, counted: number) => {
      const counters = driver.servers.get(1)?.peers.get(limited.publicKey);
      assert.ok(counters);
      counters.tx += outer;
      driver.counted.set(limited.publicKey, (driver.counted.get(limited.publicKey) ?? 0) + counted);
    };
    agent.start(() => undefined);
    try {
      download(4_000_000, 3_900_000);
      await agent.meterAll();
      // 1,000,000 left, and the last tick moved 3,900,000: at that rate it is gone before the next tick.
      download(4_000_000, 3_900_000);
      await agent.meterAll();
      download(1_100_000, 1_000_000);
      const crossedMs = Date.now();
      await waitFor(
        'the peer to leave the interface',
        async () => (driver.servers.get(1)?.peers.has(limited.publicKey) ? undefined : true),
        intervalMs,
        10,
      );
      const cutMs = Date.now() - crossedMs;
      assert.ok(cutMs < intervalMs / 2, `cut ${cutMs} ms after crossing, not at the next tick (${intervalMs} ms)`);
    } finally {
      await agent.stop();
    }
  });
});
