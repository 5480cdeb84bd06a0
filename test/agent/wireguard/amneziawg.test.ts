/**
 * AmneziaWG servers in the wireguard driver: the obfuscation rules against amneziawg-go's UAPI (amneziawg.ts),
 * detection and the node's start line (capabilities.ts), and, as root, a real amneziawg-go server and client:
 * drift of a parameter set by hand, changes in place and by a new interface (docs/dataplane.md, "AmneziaWG").
 */
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { existsSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { ExecRunner, RecordingRunner } from '../../../src/agent/commands.ts';
import { DriverError, type PeerSpec, type ServerSpec } from '../../../src/agent/driver.ts';
import { obfuscationChange, obfuscationKeys, obfuscationProblems } from '../../../src/agent/wireguard/amneziawg.ts';
import { canRunWireGuard, describeDataplane } from '../../../src/agent/wireguard/capabilities.ts';
import { WireGuardDriver } from '../../../src/agent/wireguard/driver.ts';
import { parseGet, socketIdentity } from '../../../src/agent/wireguard/uapi.ts';
import type { Obfuscation } from '../../../src/domain/protocols.ts';
import { generateKeyPair } from '../../../src/domain/wireguard-keys.ts';
import { AWG_RUN_DIR, CHILD_LOG_DIR, NetLab, requireRoot, run, uapiSet, type WgClient } from '../../support/netns.ts';

const OBFUSCATION: Obfuscation = {
  jc: 4,
  jmin: 40,
  jmax: 70,
  s1: 15,
  s2: 42,
  s3: 0,
  s4: 0,
  h1: '1234567',
  h2: '2345678-2345700',
  h3: '3456789',
  h4: '4567890-4567999',
  i1: '<r 32>',
};

describe('AmneziaWG obfuscation as amneziawg-go holds it', () => {
  test('the keys get=1 answers: numbers other than 0, the four headers as it prints them, i1-i5 when set', () => {
    assert.deepEqual(
      [...obfuscationKeys({ ...OBFUSCATION, h1: '0007-7' })],
      [
        ['jc', '4'],
        ['jmin', '40'],
        ['jmax', '70'],
        ['s1', '15'],
        ['s2', '42'],
        ['h1', '7'],
        ['h2', '2345678-2345700'],
        ['h3', '3456789'],
        ['h4', '4567890-4567999'],
        ['i1', '<r 32>'],
      ],
    );
  });

  test('a change is made in place unless it unsets a junk number or an i packet, which set=1 cannot', () => {
    const have = Object.fromEntries(obfuscationKeys(OBFUSCATION));
    assert.deepEqual(obfuscationChange(have, OBFUSCATION), { set: new Map(), recreate: false });
    const inPlace = obfuscationChange(have, { ...OBFUSCATION, jc: 9, s1: 0, h3: '99', i2: '<t>' });
    assert.deepEqual(inPlace, {
      set: new Map([
        ['jc', '9'],
        ['s1', '0'],
        ['h3', '99'],
        ['i2', '<t>'],
      ]),
      recreate: false,
    });
    const { i1: _i1, ...withoutI1 } = OBFUSCATION;
    assert.equal(obfuscationChange(have, withoutI1).recreate, true);
    assert.equal(obfuscationChange(have, { ...OBFUSCATION, jc: 0 }).recreate, true);
    // A wireguard-go device line that is not obfuscation is no difference.
    assert.equal(obfuscationChange({ ...have, fwmark: '5' }, OBFUSCATION).set.size, 0);
  });

  test('each difference is one readable line (the drift check)', () => {
    const { i1: _i1, ...withoutI1 } = OBFUSCATION;
    const have = { ...Object.fromEntries(obfuscationKeys(withoutI1)), jc: '9' };
    assert.deepEqual(obfuscationProblems('vp1', have, OBFUSCATION), [
      'interface vp1 has jc=9, not jc=4',
      'interface vp1 has no i1, not i1=<r 32>',
    ]);
    assert.deepEqual(obfuscationProblems('vp1', undefined, OBFUSCATION).length, 10);
  });

  test("the UAPI reader keeps amneziawg-go's device keys and no peer's line among them", () => {
    const answer =
      `private_key=${'1'.repeat(64)}\nlisten_port=51820\njc=4\njmin=40\nh1=1234567\nh2=2345678-2345700\ni1=<r 32>\n` +
      `public_key=${'2'.repeat(64)}\nprotocol_version=1\nfuture_key=x\nallowed_ip=10.0.0.2/32\nerrno=0\n\n`;
    const dump = parseGet(Buffer.from(answer), true);
    assert.deepEqual(dump.deviceKeys, { jc: '4', jmin: '40', h1: '1234567', h2: '2345678-2345700', i1: '<r 32>' });
    assert.equal(dump.peers[0]?.allowedIps, '10.0.0.2/32');
    const plain = parseGet(Buffer.from(`private_key=${'1'.repeat(64)}\nlisten_port=1\nerrno=0\n\n`), true);
    assert.equal('deviceKeys' in plain, false, 'a wireguard-go device has none: its dump is as before');
  });
});

/** A root host with wireguard-go, where `amneziawg` answers `amneziawg-go --version` or not. */
function rootHost(wireguardGoPath: string, amneziawg: boolean): RecordingRunner {
  const runner = new RecordingRunner()
    .on('cat /proc/self/status', { stdout: 'CapEff:\t000001ffffffffff\n' })
    .on('test -d /sys/module/wireguard', { exitCode: 1 })
    .on('modprobe -q wireguard', { exitCode: 1 })
    .on('wireguard-go --version', { stdout: 'wireguard-go v0.0.20250522\n\nUserspace WireGuard daemon\n' })
    .on('sh -c command -v "$1" sh wireguard-go', { stdout: `${wireguardGoPath}\n` })
    .on('sh -c command -v "$1" sh amneziawg-go', { stdout: '/usr/local/bin/amneziawg-go\n' });
  if (amneziawg) runner.on('amneziawg-go --version', { stdout: 'amneziawg-go 0.0.20250522\n\nUserspace AmneziaWG\n' });
  else runner.on('amneziawg-go --version', { exitCode: 127, stderr: 'amneziawg-go: not found' });
  return runner;
}

describe('AmneziaWG detection and the node start line', () => {
  test('amneziawg-go that runs makes the node run AmneziaWG servers; the line names both implementations', async () => {
    const check = await canRunWireGuard(rootHost('/usr/local/bin/wireguard-go', true));
    assert.ok(check.ok);
    assert.deepEqual(check.amneziawgGo, { path: '/usr/local/bin/amneziawg-go', version: '0.0.20250522' });
    assert.equal(
      describeDataplane(check),
      'WireGuard: wireguard-go v0.0.20250522 (/usr/local/bin/wireguard-go); ' +
        'AmneziaWG: amneziawg-go 0.0.20250522 (/usr/local/bin/amneziawg-go)',
    );
    assert.equal(
      describeDataplane({ ...check, implementation: 'kernel' }),
      'WireGuard: kernel module; wireguard-go v0.0.20250522 (/usr/local/bin/wireguard-go); ' +
        'AmneziaWG: amneziawg-go 0.0.20250522 (/usr/local/bin/amneziawg-go)',
    );
    const driver = new WireGuardDriver({ runner: new RecordingRunner(), amneziawg: check.amneziawgGo !== null });
    assert.deepEqual(driver.protocols, ['wireguard', 'amneziawg']);
  });

  test("without amneziawg-go the node says what AmneziaWG needs; Debian's wireguard-go is named older", async () => {
    const check = await canRunWireGuard(rootHost('/usr/bin/wireguard-go', false));
    assert.ok(check.ok);
    assert.equal(check.amneziawgGo, null);
    const line = describeDataplane(check);
    assert.match(line, /wireguard-go v0\.0\.20250522 \(\/usr\/bin\/wireguard-go\): Debian's older one/);
    assert.match(line, /AmneziaWG: not available \(amneziawg-go not found: bash scripts\/go-tools\.sh builds it\)$/);
    assert.deepEqual(new WireGuardDriver({ runner: new RecordingRunner() }).protocols, ['wireguard']);
  });

  test('a node without amneziawg-go refuses an AmneziaWG server before touching the host', async () => {
    const runner = new RecordingRunner();
    const driver = new WireGuardDriver({ runner, namePrefix: 'vp', hostNetns: 'hh', implementation: 'wireguard-go' });
    const spec: ServerSpec = { ...specOf(1, 51820), protocol: 'amneziawg', obfuscation: OBFUSCATION };
    await assert.rejects(driver.up(spec), (error: unknown) => {
      assert.ok(error instanceof DriverError);
      assert.match(error.message, /cannot run amneziawg servers: amneziawg-go was not found/);
      return true;
    });
    const { obfuscation: _o, ...noObfuscation } = spec;
    await assert.rejects(driver.up(noObfuscation), /obfuscation is given exactly for an amneziawg server/);
    assert.deepEqual(runner.lines(), []);
  });

  test('an AmneziaWG server runs `amneziawg-go -f IFACE` in the host namespace, beside kernel WireGuard', async () => {
    const runner = new RecordingRunner().on('ip netns list', { stdout: 'hh\n' });
    const driver = new WireGuardDriver({
      runner,
      namePrefix: 'vq',
      hostNetns: 'hh',
      implementation: 'kernel',
      amneziawg: true,
      readyTimeoutMs: 50,
    });
    const spec: ServerSpec = { ...specOf(1, 51820), protocol: 'amneziawg', obfuscation: OBFUSCATION };
    // The recorded child never makes a socket: up() reports it, and nothing needing the interface runs.
    await assert.rejects(driver.up(spec), /amneziawg-go vq1 did not answer within 50 ms/);
    assert.deepEqual(
      runner.starts.map((s) => s.line),
      ['[hh] amneziawg-go -f vq1'],
    );
    assert.ok(!runner.lines().some((l) => l.includes('type wireguard')), 'no kernel interface');
  });
});

function specOf(serverId: number, listenPort: number): ServerSpec {
  return { serverId, privateKey: generateKeyPair().privateKey, listenPort, address: '10.79.0.1/24', mtu: 1420 };
}

/** An `aw…` prefix (this file's namespaces and interfaces), random so parallel runs never share one. */
function awPrefix(): string {
  return `aw${randomInt(36).toString(36)}${String.fromCharCode(97 + randomInt(26))}`;
}

describe('an AmneziaWG server on a real amneziawg-go', {
  skip: requireRoot([['amneziawg-go', 'scripts/go-tools.sh']]),
}, () => {
  let lab: NetLab;
  let driver: WireGuardDriver;
  const clients: WgClient[] = [];
  const serverId = 1;
  const listenPort = 40_000 + randomInt(20_000);
  const clientKey = generateKeyPair();
  const peer: PeerSpec = { publicKey: clientKey.publicKey, allowedIp: '10.79.0.2/32', speedLimitKbps: 0 };
  let spec: ServerSpec;

  before(async () => {
    lab = await NetLab.create(awPrefix());
    const runner = new ExecRunner(CHILD_LOG_DIR);
    driver = new WireGuardDriver({ runner, namePrefix: lab.prefix, hostNetns: lab.hostNs, amneziawg: true });
    spec = { ...specOf(serverId, listenPort), protocol: 'amneziawg', obfuscation: OBFUSCATION };
  });

  after(async () => {
    for (const client of clients) await client.close();
    await driver?.down(serverId).catch(() => undefined);
    await driver?.close();
    const problems = await lab?.cleanup();
    assert.deepEqual(problems, []);
  });

  const connect = async (obfuscation: Obfuscation | undefined): Promise<WgClient> => {
    const serverPublicKey = (await driver.up(spec)).publicKey;
    const client = await lab.connectClient({
      serverPublicKey,
      endpoint: lab.hostIp,
      port: listenPort,
      privateKey: clientKey.privateKey,
      address: '10.79.0.2/24',
      allowedIps: ['10.79.0.0/24'],
      ...(obfuscation === undefined ? {} : { obfuscation }),
    });
    clients.push(client);
    return client;
  };

  test('runs on amneziawg-go with its obfuscation: a client with it gets through, a plain one not', async () => {
    await driver.up(spec);
    const iface = driver.names(serverId).iface;
    const socket = `${AWG_RUN_DIR}/${iface}.sock`;
    assert.ok(existsSync(socket), 'the UAPI socket is under /var/run/amneziawg');
    assert.ok([...lab.wireguardGoProcesses().values()].includes(iface));
    assert.match(await run('ps', ['-eo', 'args']), new RegExp(`^amneziawg-go -f ${iface}$`, 'm'));
    await driver.setPeers(serverId, [peer]);
    assert.deepEqual(await driver.inspect(spec, [peer]), []);

    const plain = await connect(undefined);
    assert.equal(await lab.waitForPing('10.79.0.1', 3000), false, 'a plain WireGuard client gets no handshake');
    await plain.close();
    await connect(OBFUSCATION);
    assert.ok(await lab.waitForPing('10.79.0.1'), 'the AmneziaWG client pings the server');
    const [counters] = (await driver.readCounters(serverId)).peers;
    assert.ok((counters?.rxBytes ?? 0) > 0 && (counters?.lastHandshakeMs ?? 0) > 0, JSON.stringify(counters));
  });

  test('a jc set by hand on the host is a discrepancy; up() puts it back in place', async () => {
    const iface = driver.names(serverId).iface;
    const before = await socketIdentity(iface, AWG_RUN_DIR);
    await uapiSet(`${AWG_RUN_DIR}/${iface}.sock`, ['jc=9']);
    assert.deepEqual(await driver.inspect(spec, [peer]), [`interface ${iface} has jc=9, not jc=4`]);
    await driver.up(spec);
    assert.deepEqual(await driver.inspect(spec, [peer]), []);
    assert.equal(await socketIdentity(iface, AWG_RUN_DIR), before, 'the same amneziawg-go: repaired in place');
  });

  test('new headers and paddings apply in place; only the new ones get through', async () => {
    const iface = driver.names(serverId).iface;
    const before = await socketIdentity(iface, AWG_RUN_DIR);
    const changed: Obfuscation = { ...OBFUSCATION, s1: 0, s2: 77, h1: '5550001', h3: '5550003-5550010' };
    spec = { ...spec, obfuscation: changed };
    assert.equal((await driver.up(spec)).peerCount, 1);
    assert.equal(await socketIdentity(iface, AWG_RUN_DIR), before, 'in place');
    assert.deepEqual(await driver.inspect(spec, [peer]), []);
    for (const client of clients.splice(0)) await client.close();
    await connect(OBFUSCATION);
    assert.equal(await lab.waitForPing('10.79.0.1', 3000), false, 'the old parameters no longer get through');
    for (const client of clients.splice(0)) await client.close();
    await connect(changed);
    assert.ok(await lab.waitForPing('10.79.0.1'), 'the new ones do');
  });

  test('removing i1 makes the interface anew with its peers; down leaves nothing', async () => {
    const iface = driver.names(serverId).iface;
    const before = await socketIdentity(iface, AWG_RUN_DIR);
    const { i1: _i1, ...withoutI1 } = spec.obfuscation ?? OBFUSCATION;
    spec = { ...spec, obfuscation: withoutI1 };
    assert.equal((await driver.up(spec)).peerCount, 1, 'the peers are put back');
    assert.notEqual(await socketIdentity(iface, AWG_RUN_DIR), before, 'a new amneziawg-go');
    assert.deepEqual(await driver.inspect(spec, [peer]), []);
    for (const client of clients.splice(0)) await client.close();
    await connect(withoutI1);
    assert.ok(await lab.waitForPing('10.79.0.1'), 'a client of the new parameters gets through');
    // A driver started afresh (an agent restart) finds the server and reads it over amneziawg-go's socket.
    const restarted = new WireGuardDriver({
      runner: new ExecRunner(CHILD_LOG_DIR),
      namePrefix: lab.prefix,
      hostNetns: lab.hostNs,
      amneziawg: true,
    });
    assert.deepEqual(await restarted.list(), [serverId]);
    assert.equal((await restarted.readCounters(serverId)).peers.length, 1);
    await driver.down(serverId);
    assert.deepEqual(await lab.leftoversOf(serverId), []);
  });
});
