/**
 * Metering against the drift check and its repair, on a scripted data plane: an interface deleted on the host takes
 * its counters with it, so what the ledger keeps of it is its last reading. The drift check holds the server's queue
 * while it inspects; the metering must neither fall behind it nor stop for the other servers meanwhile.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Agent } from '../../src/agent/agent.ts';
import type { ServerSpec } from '../../src/agent/driver.ts';
import type { AgentPeer } from '../../src/agent/protocol.ts';
import { MemoryJournal, UsageLedger } from '../../src/agent/usage-ledger.ts';
import { TEST_SERVER, testPeer } from '../support/agent-peers.ts';
import { ScriptedDriver } from '../support/scripted-driver.ts';

/** A scripted host whose drift check runs `during` while it inspects a server, as a slow inspection on a real one. */
class InspectedDriver extends ScriptedDriver {
  during: (serverId: number) => Promise<string[]> = () => Promise.resolve([]);
  reads = 0;
  /** The agent always names the server; the base class's signature (no arguments) makes it optional here. */
  override inspect(spec?: ServerSpec): Promise<string[]> {
    assert.ok(spec, 'the server to inspect');
    return this.during(spec.serverId);
  }
  override readCounters(serverId: number) {
    this.reads++;
    return super.readCounters(serverId);
  }
}

const SECOND_SERVER = { ...TEST_SERVER, serverId: 2, listenPort: 51821, address: '10.9.1.1/24' };

async function setup(servers: [typeof TEST_SERVER, AgentPeer][]) {
  const driver = new InspectedDriver();
  const ledger = new UsageLedger(new MemoryJournal());
  const agent = new Agent(driver, 'test', { ledger });
  for (const [server, peer] of servers) await agent.applyServer({ server, peers: [peer] });
  /** The device downloads `bytes` through server `serverId`. */
  const download = (serverId: number, peer: AgentPeer, bytes: number) => {
    const counters = driver.servers.get(serverId)?.peers.get(peer.publicKey);
    assert.ok(counters, 'the peer is on the interface');
    counters.tx += bytes;
  };
  return { driver, ledger, agent, download };
}

/** An inspection of server 1 that lasts until the test ends it; `started` settles once it is under way. */
function slowInspection(): {
  during: (serverId: number) => Promise<string[]>;
  started: Promise<void>;
  end: () => void;
} {
  let [begin, end] = [() => {}, () => {}];
  const started = new Promise<void>((resolve) => {
    begin = resolve;
  });
  const ended = new Promise<string[]>((resolve) => {
    end = () => resolve([]);
  });
  const during = (serverId: number) => {
    if (serverId !== 1) return Promise.resolve([]);
    begin();
    return ended;
  };
  return { during, started, end };
}

describe('metering beside the drift check', () => {
  it('books the counters before the drift check inspects a server whose interface is then made anew', async () => {
    const peer = testPeer(1);
    const { driver, ledger, agent, download } = await setup([[TEST_SERVER, peer]]);
    download(1, peer, 5000);
    await agent.meterAll();
    download(1, peer, 3000);
    // The host deletes the interface while the drift check inspects it; the repair (an apply) makes it anew.
    driver.during = (serverId) => {
      driver.recreate(serverId);
      return Promise.resolve([`interface of server ${serverId} does not answer`]);
    };
    const digest = await agent.digest();
    assert.deepEqual(digest.servers[0]?.discrepancies, ['interface of server 1 does not answer']);
    await agent.applyServer({ server: TEST_SERVER, peers: [peer] });
    download(1, peer, 700);
    await agent.meterAll();
    assert.equal(ledger.meter(peer.deviceId), 8700, 'all the old interface carried, then all of the new one');
  });

  it("goes on metering the other servers while one server's queue waits on an inspection", async () => {
    const [first, second] = [testPeer(1), testPeer(2)];
    const { driver, ledger, agent, download } = await setup([
      [TEST_SERVER, first],
      [SECOND_SERVER, second],
    ]);
    const inspection = slowInspection();
    driver.during = inspection.during;
    const digest = agent.digest();
    await inspection.started;
    download(2, second, 4000);
    const rounds = [agent.meterAll()];
    // The second server's turn of that tick ends with its reading; the first's waits behind the inspection.
    await new Promise(setImmediate);
    assert.equal(ledger.meter(second.deviceId), 4000);
    const readsBefore = driver.reads;
    download(2, second, 2000);
    download(1, first, 1000);
    rounds.push(agent.meterAll(), agent.meterAll());
    await new Promise(setImmediate);
    assert.equal(ledger.meter(second.deviceId), 6000, 'the next ticks read the second server while the first waited');
    inspection.end();
    await Promise.all([digest, ...rounds]);
    assert.equal(ledger.meter(first.deviceId), 1000, 'the waiting turn read the first server once its queue was free');
    assert.equal(driver.reads - readsBefore, 2, 'the second server read once for both ticks, the first once');
  });
});
