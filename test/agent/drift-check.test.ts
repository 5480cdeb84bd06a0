/**
 * The drift check's two halves on the node: the digest both sides compute from a desired state, and
 * the agent's answer to GET /v1/digest (digest of what it holds, what its host differs in), with the
 * dry-run driver as the host.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Agent } from '../../src/agent/agent.ts';
import { DryRunDriver } from '../../src/agent/dry-run-driver.ts';
import Value from 'typebox/value';
import {
  type AgentPeer,
  type DesiredServer,
  DesiredServerSchema,
  desiredDigest,
  digestWithoutIpv6,
  PeerSpecSchema,
  ServerStateSchema,
} from '../../src/agent/protocol.ts';
import type { Obfuscation } from '../../src/domain/protocols.ts';
import { generateKeyPair } from '../../src/domain/wireguard-keys.ts';

const OBFUSCATION: Obfuscation = {
  jc: 4,
  jmin: 10,
  jmax: 50,
  s1: 20,
  s2: 30,
  s3: 0,
  s4: 0,
  h1: '100000',
  h2: '200000',
  h3: '300000',
  h4: '400000-400100',
};

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
    ['an IPv6 address', { ...base, server: { ...base.server, address6: 'fd00:9::1/64' } }],
    ['a routed IPv6 prefix', { ...base, server: { ...base.server, address6: 'fd00:9::1/64', routed6: true } }],
    ["a device's IPv6 address", withPeer(0, { allowedIp6: 'fd00:9::2/128' })],
  ];
  it('takes absent isolation switches (an older panel) as off', () => {
    const off = { ...base, server: { ...base.server, clientToClient: false, dnsOnServer: false } };
    assert.equal(desiredDigest(off), digest);
  });
  it('is for a state without IPv6 what it was before the IPv6 fields existed (an older panel or node agrees)', () => {
    const fixed: DesiredServer = {
      server: {
        serverId: 7,
        privateKey: 'cGFuZWwtdGVzdC1zZXJ2ZXIta2V5LTAwMDAwMDAwMDA=',
        listenPort: 51820,
        address: '10.9.0.1/24',
        mtu: 1420,
      },
      peers: [
        {
          ...peer(1, { speedLimitKbps: 2000 }),
          publicKey: 'cGFuZWwtdGVzdC1kZXZpY2Uta2V5LTAwMDAwMDAwMDA=',
          allowedIp: '10.9.0.2/32',
        },
      ],
    };
    // Computed with desiredDigest as it was before issue 15.
    assert.equal(desiredDigest(fixed), 'PMHyW3oBlTggS9nkuDRrHgviYc1C2PInhjCPWJRockE');
    assert.equal(desiredDigest({ ...fixed, server: { ...fixed.server, routed6: false } }), desiredDigest(fixed));
    // What an agent older than issue 15 computes of a state with IPv6: it hashes none of those fields.
    const six = {
      server: { ...fixed.server, address6: 'fd00:9::1/64', routed6: true },
      peers: fixed.peers.map((p) => ({ ...p, allowedIp6: 'fd00:9::2/128' })),
    };
    assert.equal(digestWithoutIpv6(six), 'PMHyW3oBlTggS9nkuDRrHgviYc1C2PInhjCPWJRockE');
    assert.notEqual(desiredDigest(six), digestWithoutIpv6(six));
  });
  for (const [name, changed] of changes) {
    it(`differs for ${name}`, () => assert.notEqual(desiredDigest(changed), digest));
  }
  it('tells apart each IPv6 change from the others', () => {
    const six = { ...base, server: { ...base.server, address6: 'fd00:9::1/64' } };
    const variants = [
      six,
      { ...six, server: { ...six.server, address6: 'fd00:8::1/64' } },
      { ...six, server: { ...six.server, routed6: true } },
      { ...six, peers: six.peers.map((p, i) => (i === 0 ? { ...p, allowedIp6: 'fd00:9::2/128' } : p)) },
      { ...six, peers: six.peers.map((p, i) => (i === 0 ? { ...p, allowedIp6: 'fd00:9::3/128' } : p)) },
    ];
    assert.equal(new Set(variants.map(desiredDigest)).size, variants.length);
  });
  it("counts an AmneziaWG server's protocol and each obfuscation parameter, in any key order", () => {
    const obfuscation: Obfuscation = { ...OBFUSCATION, i1: '<r 16>' };
    const awg = { ...base, server: { ...base.server, protocol: 'amneziawg' as const, obfuscation } };
    const awgDigest = desiredDigest(awg);
    assert.notEqual(awgDigest, digest);
    const reordered = Object.fromEntries(Object.entries(obfuscation).reverse());
    assert.equal(
      desiredDigest({ ...awg, server: { ...awg.server, obfuscation: { ...OBFUSCATION, ...reordered } } }),
      awgDigest,
    );
    assert.equal(
      desiredDigest({ ...awg, server: { ...awg.server, obfuscation: { ...obfuscation, i2: undefined } } }),
      awgDigest,
    );
    const variants = [
      { jc: 5 },
      { jmin: 11 },
      { jmax: 99 },
      { s1: 1 },
      { s2: 1 },
      { s3: 1 },
      { s4: 1 },
      { h1: '7' },
      { h4: '900-999' },
      { i1: '<r 17>' },
      { i5: '<t>' },
    ].map((change) => desiredDigest({ ...awg, server: { ...awg.server, obfuscation: { ...obfuscation, ...change } } }));
    assert.equal(new Set([awgDigest, ...variants]).size, variants.length + 1);
  });
  it('counts the quota action and throttle speed only of a device throttled at its limit', () => {
    assert.equal(desiredDigest(withLimits(0, { quotaAction: 'cut' })), digest, 'cut, named or not: as before');
    const throttled = desiredDigest(withLimits(0, { quotaAction: 'throttle', throttleKbps: 512 }));
    assert.notEqual(throttled, digest);
    assert.notEqual(desiredDigest(withLimits(0, { quotaAction: 'throttle', throttleKbps: 1024 })), throttled);
  });
  it("leaves a WireGuard server's digest as it was, whether its protocol is named or not", () => {
    assert.equal(desiredDigest({ ...base, server: { ...base.server, protocol: 'wireguard' } }), digest);
  });
});

describe('protocol: the IPv6 fields', () => {
  it('a desired state with them is valid, and without them too (an older panel)', () => {
    const withIpv6 = server([peer(1, { allowedIp6: 'fd00:9::2/128' })]);
    withIpv6.server = { ...withIpv6.server, address6: 'fd00:9::1/64', routed6: false };
    assert.ok(Value.Check(DesiredServerSchema, withIpv6));
    assert.ok(Value.Check(DesiredServerSchema, server([peer(1)])));
    assert.equal(
      Value.Check(DesiredServerSchema, { ...withIpv6, server: { ...withIpv6.server, routed6: 'yes' } }),
      false,
    );
    assert.equal(Value.Check(PeerSpecSchema, { ...peer(1), allowedIp6: 6 }), false);
  });
  it('a quota action is cut or throttle, a throttle speed at least 1 kbit/s; both absent from an older panel', () => {
    // Checked as received: unknown, so the wrong values the type would refuse can be sent.
    const limits = (change: object): unknown => {
      const p = peer(1);
      return server([{ ...p, limits: { ...p.limits, ...change } }]);
    };
    assert.ok(Value.Check(DesiredServerSchema, limits({ quotaAction: 'throttle', throttleKbps: 1 })));
    assert.ok(Value.Check(DesiredServerSchema, limits({ quotaAction: 'cut' })));
    for (const bad of [{ quotaAction: 'slow' }, { throttleKbps: 0 }, { throttleKbps: 1.5 }])
      assert.equal(Value.Check(DesiredServerSchema, limits(bad)), false, JSON.stringify(bad));
  });
  it("a node's answer names its IPv6 mode; an older node's answer without one is still read", () => {
    const state = { serverId: 7, listenPort: 51820, address: '10.9.0.1/24', mtu: 1420, publicKey: 'k', peerCount: 0 };
    for (const ipv6 of ['off', 'nat66', 'routed', 'tunnel_only'])
      assert.ok(Value.Check(ServerStateSchema, { ...state, ipv6 }));
    assert.ok(Value.Check(ServerStateSchema, state));
    assert.equal(Value.Check(ServerStateSchema, { ...state, ipv6: 'nat64' }), false);
  });
});

describe('Agent.digest (GET /v1/digest) with the dry-run driver', () => {
  it('reports the digest of what it was sent and nothing on a host that matches', async () => {
    const agent = new Agent(new DryRunDriver(), 'test');
    const desired = server([peer(1), peer(2, { speedLimitKbps: 500 })]);
    await agent.applyServer(desired);
    const expected = { servers: [{ serverId: 7, digest: desiredDigest(desired), discrepancies: [], ipv6: 'off' }] };
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

  it("hands each device's IPv6 address to the driver and sees it lost; reports the server's IPv6 mode", async () => {
    const driver = new DryRunDriver();
    const agent = new Agent(driver, 'test');
    const a = peer(1, { allowedIp6: 'fd00:9::2/128' });
    const desired = server([a]);
    desired.server = { ...desired.server, address6: 'fd00:9::1/64' };
    assert.equal((await agent.applyServer(desired)).ipv6, 'nat66', 'dry-run: what a node with an IPv6 uplink does');
    assert.deepEqual((await agent.digest()).servers[0]?.discrepancies, []);
    assert.equal((await agent.digest()).servers[0]?.ipv6, 'nat66', 'the digest names the mode: this agent hashes IPv6');
    await driver.changePeers(7, [{ publicKey: a.publicKey, allowedIp: a.allowedIp, speedLimitKbps: 0 }], []);
    assert.deepEqual((await agent.digest()).servers[0]?.discrepancies, [
      `peer ${a.publicKey} has allowed ip ${a.allowedIp}, not ${a.allowedIp},fd00:9::2/128`,
    ]);
    const routed = { ...desired, server: { ...desired.server, routed6: true } };
    assert.equal((await agent.applyServer(routed)).ipv6, 'routed');
    await driver.up(desired.server);
    assert.deepEqual((await agent.digest()).servers[0]?.discrepancies, [
      'server 7: routed6 differs from what was applied',
    ]);
    const without = server([peer(1)]);
    assert.equal((await agent.applyServer(without)).ipv6, 'off');
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
        { serverId: 7, digest: desiredDigest(planted), discrepancies: [], ipv6: 'off' },
        { serverId: 8, digest: null, discrepancies: ['on the host, but not applied since the agent started'] },
      ],
    });
    assert.notEqual(desiredDigest(planted), desiredDigest(desired));
  });

  it('follows every apply, change of peers and removal of a server', async () => {
    const agent = new Agent(new DryRunDriver(), 'test');
    const digestOf7 = async () => (await agent.digest()).servers.find((s) => s.serverId === 7)?.digest;
    const [a, b] = [peer(1), peer(2)];
    const desired = server([a]);
    await agent.applyServer(desired);
    assert.equal(await digestOf7(), desiredDigest(desired));
    await agent.changePeers(7, { upsert: [b], remove: [] });
    assert.equal(await digestOf7(), desiredDigest({ ...desired, peers: [a, b] }), 'a peer added');
    await agent.changePeers(7, { upsert: [{ ...b, speedLimitKbps: 700 }], remove: [a.publicKey] });
    assert.equal(await digestOf7(), desiredDigest({ ...desired, peers: [{ ...b, speedLimitKbps: 700 }] }), 'changed');
    const other = server([a, b]);
    await agent.applyServer(other);
    assert.equal(await digestOf7(), desiredDigest(other), 'the server applied anew');
    await agent.removeServer(7);
    assert.equal(await digestOf7(), undefined, 'the server removed');
    await agent.applyServer(desired);
    assert.equal(await digestOf7(), desiredDigest(desired), 'and applied again');
  });

  it('a peer cut off by its limits is in the digest but need not be on the host', async () => {
    const agent = new Agent(new DryRunDriver(), 'test');
    const limits = { remainingBytes: null, journalId: 'j', meter: 0, dataLimit: 0, periodEndsAtMs: null };
    const expired = peer(2, { limits: { ...limits, expiresAtMs: 1 } });
    const desired = server([peer(1), expired]);
    await agent.applyServer(desired);
    const expected = { servers: [{ serverId: 7, digest: desiredDigest(desired), discrepancies: [], ipv6: 'off' }] };
    assert.deepEqual(await agent.digest(), expected);
  });
});
