/**
 * The agent's own enforcement with a fake clock and a scripted data plane: allowance used, expiry on
 * the node's clock, re-admission by new limits and by the monthly rollover, with no panel involved.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Agent } from '../../src/agent/agent.ts';
import type { AgentPeer, PeerLimits } from '../../src/agent/protocol.ts';
import { MemoryJournal, UsageLedger } from '../../src/agent/usage-ledger.ts';
import { ManualClock } from '../../src/domain/clock.ts';
import { generateKeyPair } from '../../src/domain/wireguard-keys.ts';
import { ScriptedDriver } from '../support/scripted-driver.ts';

const SERVER = {
  serverId: 1,
  privateKey: generateKeyPair().privateKey,
  listenPort: 51820,
  address: '10.9.0.1/24',
  mtu: 1420,
};
const NO_LIMITS: PeerLimits = {
  remainingBytes: null,
  journalId: '',
  meter: 0,
  dataLimit: 0,
  periodEndsAtMs: null,
  expiresAtMs: null,
};

function peer(deviceId: number, limits: Partial<PeerLimits>): AgentPeer {
  return {
    deviceId,
    publicKey: generateKeyPair().publicKey,
    allowedIp: `10.9.0.${deviceId + 1}/32`,
    speedLimitKbps: 0,
    limits: { ...NO_LIMITS, ...limits },
  };
}

async function setup(peers: AgentPeer[]) {
  const clock = new ManualClock(Date.parse('2026-11-30T22:00:00Z'));
  const driver = new ScriptedDriver();
  const agent = new Agent(driver, 'test', { ledger: new UsageLedger(new MemoryJournal()), clock });
  await agent.applyServer({ server: SERVER, peers });
  const onInterface = (p: AgentPeer) => driver.servers.get(1)?.peers.has(p.publicKey) ?? false;
  /** The device downloads `bytes` (the server sends them). */
  const download = (p: AgentPeer, bytes: number) => {
    const counters = driver.servers.get(1)?.peers.get(p.publicKey);
    assert.ok(counters, 'the peer is on the interface');
    counters.tx += bytes;
  };
  return { clock, agent, onInterface, download };
}

describe('enforcement on the node', () => {
  it('cuts a device off once its allowance is used, and a new allowance brings it back at once', async () => {
    const limited = peer(1, { remainingBytes: 1000, dataLimit: 5000 });
    const free = peer(2, {});
    const { agent, onInterface, download } = await setup([limited, free]);
    download(limited, 999);
    download(free, 1_000_000);
    await agent.meterAll();
    assert.equal(onInterface(limited), true, '999 of 1000 bytes');
    download(limited, 1);
    await agent.meterAll();
    assert.equal(onInterface(limited), false, 'cut at 1000 of 1000');
    assert.equal(onInterface(free), true, 'a device without a limit stays');
    // A usage reset: the panel sends the whole limit again, counted from the meter it has stored.
    const report = agent.collectUsage(null);
    const meter = report.batches
      .flatMap((b) => b.entries)
      .filter((e) => e.deviceId === 1)
      .reduce((n, e) => Math.max(n, e.meter), 0);
    assert.equal(meter, 1000);
    await agent.changePeers(1, {
      upsert: [{ ...limited, limits: { ...limited.limits, remainingBytes: 5000, journalId: report.journalId, meter } }],
      remove: [],
    });
    assert.equal(onInterface(limited), true, 'back when the reset answers');
  });

  it('counts usage the panel has not stored yet against a new allowance', async () => {
    const limited = peer(1, { remainingBytes: 10_000, dataLimit: 10_000 });
    const { agent, onInterface, download } = await setup([limited]);
    download(limited, 4000);
    await agent.meterAll();
    const first = agent.collectUsage(null);
    download(limited, 5000);
    await agent.meterAll();
    // The panel stored only the first 4000 bytes when it raised the limit to 12,000: 8000 were left then.
    await agent.changePeers(1, {
      upsert: [
        {
          ...limited,
          limits: {
            ...limited.limits,
            remainingBytes: 8000,
            dataLimit: 12_000,
            journalId: first.journalId,
            meter: 4000,
          },
        },
      ],
      remove: [],
    });
    assert.equal(onInterface(limited), true, '5000 of 8000 used since');
    download(limited, 3000);
    await agent.meterAll();
    assert.equal(onInterface(limited), false, '8000 of 8000 used since');
  });

  it('cuts a device off when its expiry passes on the node clock; a later expiry re-admits it', async () => {
    const { clock, agent, onInterface } = await setup([]);
    const expiring = peer(3, { expiresAtMs: clock.nowMs() + 1500 });
    await agent.changePeers(1, { upsert: [expiring], remove: [] });
    await agent.meterAll();
    assert.equal(onInterface(expiring), true);
    clock.advance(1500);
    await agent.meterAll();
    assert.equal(onInterface(expiring), false, 'expired');
    await agent.changePeers(1, {
      upsert: [{ ...expiring, limits: { ...expiring.limits, expiresAtMs: clock.nowMs() + 3_600_000 } }],
      remove: [],
    });
    assert.equal(onInterface(expiring), true, 'renewed');
  });

  it('re-admits a monthly device on its own at the start of the next month, with the whole limit', async () => {
    const { clock, agent, onInterface, download } = await setup([]);
    const periodEndsAtMs = Date.parse('2026-11-30T23:00:00Z'); // 1 December 00:00 in Berlin
    const monthly = peer(4, { remainingBytes: 100, dataLimit: 1000, periodEndsAtMs });
    await agent.changePeers(1, { upsert: [monthly], remove: [] });
    download(monthly, 100);
    await agent.meterAll();
    assert.equal(onInterface(monthly), false, 'limit of November reached');
    clock.advance(periodEndsAtMs - clock.nowMs());
    await agent.meterAll();
    assert.equal(onInterface(monthly), true, 'December: allowed again without the panel');
    download(monthly, 999);
    await agent.meterAll();
    assert.equal(onInterface(monthly), true, '999 of the new 1000');
    download(monthly, 1);
    await agent.meterAll();
    assert.equal(onInterface(monthly), false, "the new month's limit holds too");
  });
});
