/**
 * Throttle at the limit on the node (issue 26 item 5), with a fake clock and a scripted data plane: a device whose
 * limits say `throttle` stays on its interface past its allowance at its throttle speed, in the tick that cuts a
 * `cut` device off, still metered; a top-up, a reset, a higher limit or a new month gives its own speed back at
 * once; expiry and a change back to `cut` take it off.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Agent } from '../../src/agent/agent.ts';
import { DryRunDriver } from '../../src/agent/dry-run-driver.ts';
import { type CutoffReason, UNOBSERVED_NODE } from '../../src/agent/metrics.ts';
import type { AgentPeer, PeerLimits } from '../../src/agent/protocol.ts';
import { quotaAllowance } from '../../src/agent/quota/allowance.ts';
import { MemoryJournal, UsageLedger } from '../../src/agent/usage-ledger.ts';
import { ManualClock } from '../../src/domain/clock.ts';
import { TEST_SERVER, testPeer } from '../support/agent-peers.ts';
import { ScriptedDriver } from '../support/scripted-driver.ts';

const THROTTLE: Partial<PeerLimits> = { quotaAction: 'throttle', throttleKbps: 512 };

async function setup(peers: AgentPeer[]) {
  const clock = new ManualClock(Date.parse('2026-11-30T22:00:00Z'));
  const driver = new ScriptedDriver();
  const observed: CutoffReason[] = [];
  const observer = { ...UNOBSERVED_NODE, cutOff: (reason: CutoffReason) => observed.push(reason) };
  const agent = new Agent(driver, 'test', { ledger: new UsageLedger(new MemoryJournal()), clock, observer });
  await agent.applyServer({ server: TEST_SERVER, peers });
  /** The peer's speed limit on the interface; undefined when it is off it. */
  const speedOf = (p: AgentPeer) => driver.servers.get(1)?.peers.get(p.publicKey)?.speedLimitKbps;
  const allowanceOf = (p: AgentPeer) => driver.allowances.get(1)?.get(p.publicKey)?.limitBytes;
  /** The device downloads `bytes` (the server sends them). */
  const download = (p: AgentPeer, bytes: number) => {
    const counters = driver.servers.get(1)?.peers.get(p.publicKey);
    assert.ok(counters, 'the peer is on the interface');
    counters.tx += bytes;
  };
  /** What the ledger has booked of the device so far (its meter), as the panel would collect it. */
  const meterOf = (p: AgentPeer) => {
    const report = agent.collectUsage(null);
    const entries = report.batches.flatMap((b) => b.entries).filter((e) => e.deviceId === p.deviceId);
    return { journalId: report.journalId, meter: entries.reduce((n, e) => Math.max(n, e.meter), 0) };
  };
  return { clock, agent, observed, speedOf, allowanceOf, download, meterOf };
}

describe('throttle at the limit', () => {
  it('keeps it on at its throttle speed in the tick that cuts a cut device, still metered', async () => {
    const throttled = { ...testPeer(1, { remainingBytes: 1000, dataLimit: 1000, ...THROTTLE }), speedLimitKbps: 0 };
    const cut = testPeer(2, { remainingBytes: 1000, dataLimit: 1000 });
    const { agent, observed, speedOf, allowanceOf, download, meterOf } = await setup([throttled, cut]);
    assert.equal(allowanceOf(throttled), quotaAllowance(1000, TEST_SERVER.mtu), 'held to its limit until it is used');
    download(throttled, 999);
    download(cut, 999);
    await agent.meterAll();
    assert.equal(speedOf(throttled), 0, 'its own speed (none) while 1 byte is left');
    download(throttled, 1);
    download(cut, 1);
    await agent.meterAll();
    assert.equal(speedOf(cut), undefined, 'the cut device is off');
    assert.equal(speedOf(throttled), 512, 'the throttled one stays, at 512 kbit/s');
    assert.deepEqual(observed.sort(), ['limit_reached', 'throttled']);
    await agent.meterAll();
    assert.equal(allowanceOf(throttled), undefined, 'past its limit it has no kernel allowance to drop its packets');
    download(throttled, 5000);
    await agent.meterAll();
    assert.equal(meterOf(throttled).meter, 6000, 'its bytes past the limit are counted');
    assert.equal(speedOf(throttled), 512);
    assert.deepEqual(observed.sort(), ['limit_reached', 'throttled'], 'throttled once');
  });

  it('gives its own speed back at once on a top-up, a reset, a higher limit, and alone at a new month', async () => {
    const periodEndsAtMs = Date.parse('2026-11-30T23:00:00Z');
    const peer = { ...testPeer(1, { remainingBytes: 100, dataLimit: 100, periodEndsAtMs, ...THROTTLE }) };
    const own = { ...peer, speedLimitKbps: 20_000 };
    const { clock, agent, speedOf, allowanceOf, download, meterOf } = await setup([own]);
    const exhaust = async () => {
      download(own, 100);
      await agent.meterAll();
      await agent.meterAll();
      assert.equal(speedOf(own), 512, 'throttled');
    };
    const grant = async (limits: Partial<PeerLimits>) => {
      const upsert = [{ ...own, limits: { ...own.limits, ...meterOf(own), ...limits } }];
      await agent.changePeers(1, { upsert, remove: [] });
      assert.equal(speedOf(own), 20_000, 'its own speed at once');
      assert.equal(allowanceOf(own), quotaAllowance(100, TEST_SERVER.mtu), 'held to what it has left again');
    };
    await exhaust();
    await grant({ remainingBytes: 100 }); // a top-up
    await exhaust();
    await grant({ remainingBytes: 100, dataLimit: 100 }); // a reset
    await exhaust();
    await grant({ remainingBytes: 100, dataLimit: 600 }); // a higher limit
    await exhaust();
    clock.advance(periodEndsAtMs - clock.nowMs());
    await agent.meterAll();
    assert.equal(speedOf(own), 20_000, 'a new month: its own speed without the panel');
  });

  it('stays throttled without a kernel allowance through a resync of its server, not counted again', async () => {
    const throttled = testPeer(1, { remainingBytes: 10, dataLimit: 10, ...THROTTLE });
    const { agent, observed, speedOf, allowanceOf, download, meterOf } = await setup([throttled]);
    download(throttled, 10);
    await agent.meterAll();
    await agent.meterAll();
    assert.equal(allowanceOf(throttled), undefined);
    const limits = { ...throttled.limits, ...meterOf(throttled), remainingBytes: 0 };
    await agent.applyServer({ server: TEST_SERVER, peers: [{ ...throttled, limits }] });
    assert.equal(speedOf(throttled), 512);
    assert.equal(allowanceOf(throttled), undefined, 'no quota to drop its packets');
    assert.deepEqual(observed, ['throttled']);
  });

  it('takes it off when it expires, or at once when its limits say cut again', async () => {
    const throttled = testPeer(1, { remainingBytes: 10, dataLimit: 10, ...THROTTLE });
    const other = testPeer(2, { remainingBytes: 10, dataLimit: 10, ...THROTTLE });
    const { clock, agent, observed, speedOf, download } = await setup([throttled, other]);
    download(throttled, 10);
    download(other, 10);
    await agent.meterAll();
    assert.equal(speedOf(throttled), 512);
    const expiring = {
      ...throttled,
      limits: { ...throttled.limits, remainingBytes: 0, expiresAtMs: clock.nowMs() + 1000 },
    };
    await agent.changePeers(1, { upsert: [expiring], remove: [] });
    assert.equal(speedOf(expiring), 512);
    clock.advance(1000);
    await agent.meterAll();
    assert.equal(speedOf(expiring), undefined, 'expiry still cuts');
    // What the panel sends of a device past its limit: nothing left.
    const cutNow = { ...other.limits, remainingBytes: 0, quotaAction: 'cut' as const, throttleKbps: undefined };
    await agent.changePeers(1, { upsert: [{ ...other, limits: cutNow }], remove: [] });
    assert.equal(speedOf(other), undefined, 'back to cut: off');
    assert.deepEqual(observed, ['throttled', 'throttled', 'expired', 'limit_reached']);
  });

  it('applies it at its throttle speed, and the drift check finds the host as applied', async () => {
    const driver = new DryRunDriver();
    const agent = new Agent(driver, 'test', { ledger: new UsageLedger(new MemoryJournal()) });
    const peer = { ...testPeer(1, { remainingBytes: 0, dataLimit: 1000, ...THROTTLE }), speedLimitKbps: 9000 };
    await agent.applyServer({ server: TEST_SERVER, peers: [peer] });
    const atOwnSpeed = { publicKey: peer.publicKey, allowedIp: peer.allowedIp, speedLimitKbps: 9000 };
    assert.deepEqual(await driver.inspect(TEST_SERVER, [atOwnSpeed]), [
      `peer ${peer.publicKey} has speed limit 512 kbit/s, not 9000`,
    ]);
    const { servers } = await agent.digest();
    assert.deepEqual(servers[0]?.discrepancies, []);
  });
});
