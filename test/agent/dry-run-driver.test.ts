import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { DriverError } from '../../src/agent/driver.ts';
import { DryRunDriver } from '../../src/agent/dry-run-driver.ts';
import { generateKeyPair } from '../../src/domain/wireguard-keys.ts';

const server = generateKeyPair();
const spec = { serverId: 3, privateKey: server.privateKey, listenPort: 51820, address: '10.128.0.1/24', mtu: 1420 };
const peer = (n: number) => ({
  publicKey: generateKeyPair().publicKey,
  allowedIp: `10.128.0.${n}/32`,
  speedLimitKbps: 0,
});

describe('dry-run driver', () => {
  test('keeps servers and peers in memory; counters stay 0', async () => {
    const driver = new DryRunDriver();
    assert.equal(driver.kind, 'dry-run');
    const state = await driver.up(spec);
    assert.deepEqual(state, {
      serverId: 3,
      listenPort: 51820,
      address: '10.128.0.1/24',
      mtu: 1420,
      publicKey: server.publicKey,
      peerCount: 0,
      ipv6: 'off',
    });
    const peers = [peer(2), peer(3)];
    await driver.setPeers(3, peers);
    // A reading's entries are its counters (they may carry other fields).
    const counters = (await driver.readCounters(3)).peers.map(({ publicKey, rxBytes, txBytes, lastHandshakeMs }) => ({
      publicKey,
      rxBytes,
      txBytes,
      lastHandshakeMs,
    }));
    assert.deepEqual(
      counters,
      peers.map((p) => ({ publicKey: p.publicKey, rxBytes: 0, txBytes: 0, lastHandshakeMs: 0 })),
    );
    assert.equal((await driver.up({ ...spec, mtu: 1380 })).peerCount, 2, 'up keeps the peers');
    await driver.setPeers(3, [peers[0] ?? peer(9)]);
    assert.equal((await driver.readCounters(3)).peers.length, 1);
    assert.deepEqual(await driver.list(), [3]);
  });

  test('a reading kept while the peers stay is made anew once they change', async () => {
    const driver = new DryRunDriver();
    await driver.up(spec);
    const [a, b] = [peer(2), peer(3)];
    const keys = async () => (await driver.readCounters(3)).peers.map((p) => p.publicKey);
    await driver.setPeers(3, [a]);
    assert.deepEqual(await keys(), [a.publicKey]);
    assert.equal(await driver.readCounters(3), await driver.readCounters(3), 'nothing changed: the same reading');
    await driver.changePeers(3, [b], []);
    assert.deepEqual(await keys(), [a.publicKey, b.publicKey]);
    await driver.changePeers(3, [], [a.publicKey]);
    assert.deepEqual(await keys(), [b.publicKey]);
    await driver.setPeers(3, []);
    assert.deepEqual(await keys(), []);
    await driver.down(3);
    await driver.up(spec);
    assert.notEqual((await driver.readCounters(3)).instance, '1', 'a server made anew is another instance');
  });

  test('down is idempotent; a server that is not up is a DriverError', async () => {
    const driver = new DryRunDriver();
    await driver.up(spec);
    await driver.down(3);
    await driver.down(3);
    assert.deepEqual(await driver.list(), []);
    await assert.rejects(driver.setPeers(3, []), DriverError);
    await assert.rejects(driver.readCounters(3), DriverError);
  });

  test('invalid keys are refused like the real driver refuses them', async () => {
    const driver = new DryRunDriver();
    await assert.rejects(driver.up({ ...spec, privateKey: 'nope' }), DriverError);
    await driver.up(spec);
    await assert.rejects(
      driver.setPeers(3, [{ publicKey: 'nope', allowedIp: '10.128.0.2/32', speedLimitKbps: 0 }, peer(3)]),
      DriverError,
    );
    assert.equal((await driver.readCounters(3)).peers.length, 1, 'the valid peer is still set');
  });
});
