/**
 * What the agent tells its metrics (issue 13), with a fake clock and a scripted data plane: peers per server,
 * bytes metered from the device's side, cutoffs by reason, peer changes, apply times, unacknowledged batches.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Agent } from '../../src/agent/agent.ts';
import type { ApplyKind, CutoffReason, NodeObserver } from '../../src/agent/metrics.ts';
import type { AgentPeer } from '../../src/agent/protocol.ts';
import { MemoryJournal, UsageLedger } from '../../src/agent/usage-ledger.ts';
import { ManualClock } from '../../src/domain/clock.ts';
import { TEST_SERVER, testPeer } from '../support/agent-peers.ts';
import { ScriptedDriver } from '../support/scripted-driver.ts';

/** Keeps what it is told, as the Prometheus metrics would. */
class Recorder implements NodeObserver {
  readonly peers = new Map<number, number | undefined>();
  changes = 0;
  readonly cutoffs: CutoffReason[] = [];
  rxBytes = 0;
  txBytes = 0;
  readonly applies: ApplyKind[] = [];
  unacknowledged: number | undefined;
  serverPeers(serverId: number, peers: number | undefined): void {
    this.peers.set(serverId, peers);
  }
  peersChanged(count: number): void {
    this.changes += count;
  }
  cutOff(reason: CutoffReason): void {
    this.cutoffs.push(reason);
  }
  metered(rxBytes: number, txBytes: number): void {
    this.rxBytes += rxBytes;
    this.txBytes += txBytes;
  }
  applied(kind: ApplyKind, seconds: number): void {
    assert.ok(seconds >= 0 && seconds < 10, `a plausible duration (${seconds} s)`);
    this.applies.push(kind);
  }
  unacknowledgedBatches(count: number): void {
    this.unacknowledged = count;
  }
}

async function setup(peers: AgentPeer[], journal = new MemoryJournal()) {
  const clock = new ManualClock(Date.parse('2026-11-30T22:00:00Z'));
  const driver = new ScriptedDriver();
  const observer = new Recorder();
  const agent = new Agent(driver, 'test', { ledger: new UsageLedger(journal), clock, observer });
  await agent.applyServer({ server: TEST_SERVER, peers });
  const counters = (p: AgentPeer) => {
    const found = driver.servers.get(1)?.peers.get(p.publicKey);
    assert.ok(found, 'the peer is on the interface');
    return found;
  };
  return { clock, agent, observer, counters };
}

describe('the metrics of the node agent', () => {
  it(
    'counts bytes from the device side and each cutoff with its ' + 'reason, and follows the peers of the server',
    async () => {
      const limited = testPeer(1, { remainingBytes: 1000, dataLimit: 1000 });
      const free = testPeer(2);
      const { clock, agent, observer, counters } = await setup([limited, free]);
      const expiring = testPeer(3, { expiresAtMs: clock.nowMs() + 1500 });
      await agent.changePeers(1, { upsert: [expiring], remove: [] });
      assert.equal(observer.peers.get(1), 3);

      // The server sends (tx) what a device downloads: the device received it, so it is rx as the API counts.
      counters(limited).tx += 600;
      counters(free).rx += 300;
      await agent.meterAll();
      assert.deepEqual([observer.rxBytes, observer.txBytes], [600, 300]);
      assert.deepEqual(observer.cutoffs, []);

      counters(limited).tx += 400;
      await agent.meterAll();
      assert.deepEqual(observer.cutoffs, ['limit_reached']);
      assert.equal(observer.peers.get(1), 2);
      clock.advance(1500);
      await agent.meterAll();
      assert.deepEqual(observer.cutoffs, ['limit_reached', 'expired']);
      assert.equal(observer.peers.get(1), 1);
      await agent.meterAll();
      assert.equal(observer.cutoffs.length, 2, 'a peer already off is not cut again');
    },
  );

  it(
    'counts each peer a change names, times every apply, and ' + 'follows the batches the panel has not acknowledged',
    async () => {
      const [a, b, c] = [testPeer(1), testPeer(2), testPeer(3)];
      const journal = new MemoryJournal();
      const { agent, observer, counters } = await setup([a], journal);
      assert.deepEqual(observer.applies, ['server']);
      await agent.changePeers(1, { upsert: [b, c], remove: [a.publicKey] });
      assert.equal(observer.changes, 3);
      assert.deepEqual(observer.applies, ['server', 'peers']);
      assert.equal(observer.peers.get(1), 2);

      assert.equal(observer.unacknowledged, 0);
      counters(b).tx += 10;
      await agent.meterAll();
      const first = agent.collectUsage(null);
      assert.equal(observer.unacknowledged, 1);
      counters(b).tx += 10;
      await agent.meterAll();
      agent.collectUsage(null);
      assert.equal(observer.unacknowledged, 2, 'nothing acknowledged yet');
      // A restarted agent reports what its journal still holds before any collection.
      const restarted = new Recorder();
      new Agent(new ScriptedDriver(), 'test', { ledger: new UsageLedger(journal), observer: restarted });
      assert.equal(restarted.unacknowledged, 2);
      agent.collectUsage({ journalId: first.journalId, seq: first.batches[0]?.seq ?? 0 });
      assert.equal(observer.unacknowledged, 1);

      await agent.removeServer(1);
      assert.equal(observer.peers.get(1), undefined);
      assert.ok(observer.peers.has(1), 'the server is reported gone');
    },
  );
});
