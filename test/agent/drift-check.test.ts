/**
 * The drift check's two halves on the node: the digest both sides compute from a desired state, and
 * the agent's answer to GET /v1/digest (digest of what it holds, what its host differs in), with the
 * dry-run driver as the host.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Agent } from '../../src/agent/agent.ts';
import { DryRunDriver } from '../../src/agent/dry-run-driver.ts';
import { type AgentPeer, type DesiredServer, desiredDigest } from '../../src/agent/protocol.ts';
import { generateKeyPair } from '../../src/domain/wireguard-keys.ts';

function peer(deviceId: number, fields: Partial<AgentPeer> = {}): AgentPeer {
  return {
    deviceId,
    publicKey: generateKeyPair().publicKey,
    allowedIp: `10.9.0.${deviceId + 1}/32`,
    speedLimitKbps: 0,
    limits: {
      remainingBytes: 5000,
      journalId: 'j1',
      meter: 100,
      dataLimit: 10_000,
      periodEndsAtMs: 1_800_000_000_000,
      expiresAtMs: null,
    },
    ...fields,
  };
}

function server(peers: AgentPeer[], serverId = 7): DesiredServer {
  const privateKey = generateKeyPair().privateKey;
  return { server: { serverId, privateKey, listenPort: 51820, address: '10.9.0.1/24', mtu: 1420 }, peers };
}

describe('desiredDigest', () => {
  const base = server([peer(1), peer(2), peer(3, { speedLimitKbps: 2000 })]);
  const digest = desiredDigest(base);
  const withPeer = (index: number, change: Partial<AgentPeer>): DesiredServer => ({
    ...base,
    peers: base.peers.map((p, i) => (i === index ? { ...p, ...change } : p)),
  });
  const withLimits = (index: number, change: Partial<AgentPeer['limits']>): DesiredServer => {
    const p = base.peers[index];
    assert.ok(p);
    return withPeer(index, { limits: { ...p.limits, ...change } });
  };

  it('is the same for the same state in any peer order', () => {
    assert.equal(desiredDigest({ ...base, peers: [...base.peers].reverse() }), digest);
    assert.equal(desiredDigest(structuredClone(base)), digest);
  });

  it('leaves out what differs between panel and node as usage goes on: remaining bytes, meter, journal', () => {
    assert.equal(desiredDigest(withLimits(0, { remainingBytes: 1, meter: 99_999, journalId: 'another' })), digest);
  });

  const changes: [string, DesiredServer][] = [
    ['a changed allowed ip', withPeer(0, { allowedIp: '0.0.0.0/0' })],
    ['a changed speed limit', withPeer(2, { speedLimitKbps: 0 })],
    ['a speed limit added', withPeer(1, { speedLimitKbps: 100 })],
    ['an extra peer', { ...base, peers: [...base.peers, peer(4)] }],
    ['a peer missing', { ...base, peers: base.peers.slice(1) }],
    ['another key for a device', withPeer(0, { publicKey: generateKeyPair().publicKey })],
    ['another device id', withPeer(0, { deviceId: 99 })],
    ['no data limit instead of one', withLimits(0, { remainingBytes: null })],
    ['another data limit', withLimits(0, { dataLimit: 1 })],
    ['another period end', withLimits(0, { periodEndsAtMs: null })],
    ['an expiry', withLimits(0, { expiresAtMs: 1 })],
    ['another private key', { ...base, server: { ...base.server, privateKey: generateKeyPair().privateKey } }],
    ['another listen port', { ...base, server: { ...base.server, listenPort: 51821 } }],
    ['another address', { ...base, server: { ...base.server, address: '10.9.1.1/24' } }],
    ['another MTU', { ...base, server: { ...base.server, mtu: 1280 } }],
    ['client to client allowed', { ...base, server: { ...base.server, clientToClient: true } }],
    ['DNS on the server', { ...base, server: { ...base.server, dnsOnServer: true } }],
  ];
  it('takes absent isolation switches (an older panel) as off', () => {
    const off = { ...base, server: { ...base.server, clientToClient: false, dnsOnServer: false } };
    assert.equal(desiredDigest(off), digest);
  });
  for (const [name, changed] of changes) {
    it(`differs for ${name}`, () => assert.notEqual(desiredDigest(changed), digest));
  }
});

describe('Agent.digest (GET /v1/digest) with the dry-run driver', () => {
  it('reports the digest of what it was sent and nothing on a host that matches', async () => {
    const agent = new Agent(new DryRunDriver(), 'test');
    const desired = server([peer(1), peer(2, { speedLimitKbps: 500 })]);
    await agent.applyServer(desired);
    const expected = { servers: [{ serverId: 7, digest: desiredDigest(desired), discrepancies: [] }] };
    assert.deepEqual(await agent.digest(), expected);
  });

  it('lists what the host differs in: a planted peer, a removed one, a changed allowed ip or speed limit', async () => {
    const driver = new DryRunDriver();
    const agent = new Agent(driver, 'test');
    const [a, b, c] = [peer(1), peer(2), peer(3, { speedLimitKbps: 500 })];
    const desired = server([a, b, c]);
    await agent.applyServer(desired);
    const planted = generateKeyPair().publicKey;
    const upsert = [
      { publicKey: planted, allowedIp: '0.0.0.0/0', speedLimitKbps: 0 },
      { publicKey: b.publicKey, allowedIp: '10.9.9.9/32', speedLimitKbps: 0 },
    ];
    await driver.changePeers(7, upsert, [a.publicKey]);
    await driver.changePeers(7, [{ publicKey: c.publicKey, allowedIp: c.allowedIp, speedLimitKbps: 0 }], []);
    const [report] = (await agent.digest()).servers;
    assert.ok(report);
    assert.equal(report.digest, desiredDigest(desired), 'what the agent holds is unchanged');
    assert.deepEqual(
      [...report.discrepancies].sort(),
      [
        `peer ${a.publicKey} is missing`,
        `peer ${b.publicKey} has allowed ip 10.9.9.9/32, not ${b.allowedIp}`,
        `peer ${c.publicKey} has speed limit 0 kbit/s, not 500`,
        `peer ${planted} is on the server but was not applied`,
      ].sort(),
    );
    await agent.applyServer(desired);
    const after = (await agent.digest()).servers[0]?.discrepancies;
    assert.deepEqual(after, [], 'applying the desired state again repairs all of it');
  });

  it('a peer added with the node token changes the digest; a server it never applied has none', async () => {
    const driver = new DryRunDriver();
    const agent = new Agent(driver, 'test');
    const desired = server([peer(1)]);
    await agent.applyServer(desired);
    const planted = { ...desired, peers: [...desired.peers, peer(9, { allowedIp: '0.0.0.0/0' })] };
    await agent.applyServer(planted);
    await driver.up({ ...desired.server, serverId: 8 });
    assert.deepEqual(await agent.digest(), {
      servers: [
        { serverId: 7, digest: desiredDigest(planted), discrepancies: [] },
        { serverId: 8, digest: null, discrepancies: ['on the host, but not applied since the agent started'] },
      ],
    });
    assert.notEqual(desiredDigest(planted), desiredDigest(desired));
  });

  it('a peer cut off by its limits is in the digest but need not be on the host', async () => {
    const agent = new Agent(new DryRunDriver(), 'test');
    const limits = { remainingBytes: null, journalId: 'j', meter: 0, dataLimit: 0, periodEndsAtMs: null };
    const expired = peer(2, { limits: { ...limits, expiresAtMs: 1 } });
    const desired = server([peer(1), expired]);
    await agent.applyServer(desired);
    const expected = { servers: [{ serverId: 7, digest: desiredDigest(desired), discrepancies: [] }] };
    assert.deepEqual(await agent.digest(), expected);
  });
});
