import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { randomInt } from 'node:crypto';
import { DriverError } from '../../../src/agent/driver.ts';
import type { PeerSpec, ServerSpec } from '../../../src/agent/driver.ts';
import { ExecRunner, RecordingRunner } from '../../../src/agent/commands.ts';
import type { ChildHandle } from '../../../src/agent/commands.ts';
import { canRunWireGuard } from '../../../src/agent/wireguard/capabilities.ts';
import { WireGuardDriver, type WireGuardDriverOptions } from '../../../src/agent/wireguard/driver.ts';
import { parseDump } from '../../../src/agent/wireguard/host-readers.ts';
import { UapiConfig } from '../../../src/agent/wireguard/interface-config.ts';
import { generateKeyPair, isValidKey, publicKeyOf } from '../../../src/domain/wireguard-keys.ts';
import { hostTableText, serverTableText } from '../../../src/agent/isolation.ts';
import { ISOLATED, ISOLATION_PLACE } from '../../support/isolation.ts';
import { CHILD_LOG_DIR } from '../../support/netns.ts';
import { driverOn, emptyHost, isChange } from '../../support/recorded-host.ts';

// ---------------------------------------------------------------------------------------------
// (a) Unit tests: the driver against a RecordingRunner. The runner answers from a script of what
// the host looks like; the tests assert the commands the driver issues.
// ---------------------------------------------------------------------------------------------

const SERVER_KEY = generateKeyPair();
const newKey = (): string => generateKeyPair().publicKey;
const [A, B, C, D, E] = [newKey(), newKey(), newKey(), newKey(), newKey()];
const SPEC: ServerSpec = {
  serverId: 1,
  privateKey: SERVER_KEY.privateKey,
  listenPort: 51820,
  address: '10.128.0.1/24',
  mtu: 1420,
};

function dumpOf(listenPort: number, peers: readonly (readonly [string, string])[]): string {
  const head = `${SERVER_KEY.privateKey}\t${SERVER_KEY.publicKey}\t${listenPort}\toff`;
  return `${[head, ...peers.map(([key, ip]) => `${key}\t(none)\t(none)\t${ip}\t0\t0\t0\toff`)].join('\n')}\n`;
}

/** A host where server 1 (prefix vp, host namespace hh) is fully up with `peers`. */
function upHost(peers: readonly (readonly [string, string])[] = [], listenPort = 51820): RecordingRunner {
  const link = (ifname: string, mtu: number, addrs: string[]) => ({
    ifname,
    mtu,
    flags: ['UP'],
    addr_info: addrs.map((a) => ({ family: 'inet', local: a.split('/')[0], prefixlen: Number(a.split('/')[1]) })),
  });
  return new RecordingRunner()
    .on('ip netns list', { stdout: 'vp-s1 (id: 1)\nhh (id: 0)\nother-s7\n' })
    .on('ip -n vp-s1 -j addr show', {
      stdout: JSON.stringify([
        link('lo', 65536, ['127.0.0.1/8']),
        link('vp1', 1420, ['10.128.0.1/24']),
        link('vp1s', 1500, ['169.254.1.6/30']),
      ]),
    })
    .on('ip -n hh -j addr show', {
      stdout: JSON.stringify([link('lo', 65536, []), link('vp1h', 1500, ['169.254.1.5/30'])]),
    })
    .on('ip -n vp-s1 -j route show default', {
      stdout: JSON.stringify([{ dst: 'default', gateway: '169.254.1.5', dev: 'vp1s', flags: [] }]),
    })
    .on('wg show vp1 dump', { stdout: dumpOf(listenPort, peers) })
    .on('[vp-s1] nft list tables', { stdout: 'table ip vpnpanel\ntable inet vpnpanel_iso\n' })
    .on('[hh] nft list tables', { stdout: 'table ip vpnpanel_vp1\ntable inet vpnpanel_iso_vp1\n' })
    .on('[vp-s1] nft list table inet vpnpanel_iso', { stdout: serverTableText(ISOLATION_PLACE, ISOLATED) })
    .on('[hh] nft list table inet vpnpanel_iso_vp1', { stdout: hostTableText(ISOLATION_PLACE) })
    .on(/sysctl -n net.ipv4.ip_forward$/, { stdout: '1\n' });
}

function shuffled<T>(items: readonly T[]): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = randomInt(i + 1);
    [copy[i], copy[j]] = [copy[j] as T, copy[i] as T];
  }
  return copy;
}

describe('wireguard driver: peers (recorded commands)', () => {
  const current = [
    [A, '10.128.0.2/32'],
    [B, '10.128.0.3/32'],
    [C, '10.128.0.4/32'],
  ] as const;
  const desired: PeerSpec[] = [
    { publicKey: B, allowedIp: '10.128.0.3/32', speedLimitKbps: 0 },
    { publicKey: C, allowedIp: '10.128.0.9/32', speedLimitKbps: 0 },
    { publicKey: D, allowedIp: '10.128.0.5/32', speedLimitKbps: 0 },
    { publicKey: E, allowedIp: '10.128.0.6/32', speedLimitKbps: 0 },
  ];

  test(
    'any order of the desired list gives the same commands: ' + 'removals, then adds and changes in one call',
    async () => {
      const seen = new Set<string>();
      for (let round = 0; round < 20; round++) {
        const runner = upHost(shuffled(current));
        await driverOn(runner).setPeers(1, shuffled(desired));
        seen.add(JSON.stringify(runner.lines(isChange)));
      }
      assert.equal(seen.size, 1);
      const [first] = seen;
      const sortedAdds = [
        [C, '10.128.0.9/32'],
        [D, '10.128.0.5/32'],
        [E, '10.128.0.6/32'],
      ].sort(([x = ''], [y = '']) => (x < y ? -1 : 1));
      assert.deepEqual(JSON.parse(first ?? '[]'), [
        `wg set vp1 peer ${A} remove`,
        `wg set vp1 ${sortedAdds.map(([k, ip]) => `peer ${k} allowed-ips ${ip}`).join(' ')}`,
      ]);
    },
  );

  test('the state the host already has issues no peer change', async () => {
    const runner = upHost(shuffled(desired.map((p) => [p.publicKey, p.allowedIp] as const)));
    await driverOn(runner).setPeers(1, shuffled(desired));
    assert.deepEqual(runner.lines(isChange), []);
  });

  test(
    'a failed bulk call is retried peer by peer; ' + 'the failing peer is reported and the others still applied',
    async () => {
      const runner = upHost([[A, '10.128.0.2/32']])
        .on(/^wg set vp1 peer \S+ remove/, { exitCode: 1, stderr: 'Unable to modify interface: Protocol error' })
        .on(/^wg set vp1 peer .* peer /, { exitCode: 1, stderr: 'Unable to modify interface: Invalid argument' })
        .on(`wg set vp1 peer ${D}`, { exitCode: 1, stderr: 'Unable to modify interface: Invalid argument' });
      const error = await driverOn(runner)
        .setPeers(1, desired)
        .then(
          () => null,
          (e: unknown) => e,
        );
      assert.ok(error instanceof DriverError);
      assert.equal(error.failures.length, 2);
      assert.match(error.failures[0] ?? '', new RegExp(`peer ${escapeRegExp(A)}: .*Protocol error`));
      assert.match(error.failures[1] ?? '', new RegExp(`peer ${escapeRegExp(D)}: .*Invalid argument`));
      const singles = runner.lines((l) => /^wg set vp1 peer \S+ allowed-ips \S+$/.test(l));
      assert.equal(singles.length, 4, 'every peer of the failed batch is tried on its own');
    },
  );

  test('invalid entries are reported and left alone; the valid rest is applied', async () => {
    const runner = upHost([[A, '10.128.0.2/32']]);
    const error = await driverOn(runner)
      .setPeers(1, [
        { publicKey: 'not-a-key', allowedIp: '10.128.0.7/32', speedLimitKbps: 0 },
        { publicKey: A, allowedIp: '10.128.0.300/32', speedLimitKbps: 0 },
        { publicKey: B, allowedIp: '10.128.0.3/32', speedLimitKbps: 0 },
      ])
      .then(
        () => null,
        (e: unknown) => e,
      );
    assert.ok(error instanceof DriverError);
    assert.equal(error.failures.length, 2);
    assert.deepEqual(
      runner.lines(isChange),
      [`wg set vp1 peer ${B} allowed-ips 10.128.0.3/32`],
      'A (invalid address) is not removed',
    );
  });

  test('2,500 new peers go out in 3 wg set calls', async () => {
    const many = Array.from({ length: 2500 }, (_, i) => ({
      publicKey: generateKeyPair().publicKey,
      allowedIp: `10.${i >> 8}.${i & 255}.1/32`,
      speedLimitKbps: 0,
    }));
    const runner = upHost();
    await driverOn(runner).setPeers(1, many);
    assert.equal(runner.lines(isChange).length, 3);
  });

  test('a server that is not up is one failure', async () => {
    const error = await driverOn(emptyHost())
      .setPeers(1, desired)
      .then(
        () => null,
        (e: unknown) => e,
      );
    assert.ok(error instanceof DriverError);
    assert.match(error.message, /set peers of server 1: .*wg show vp1 dump/);
  });

  test('readCounters parses the dump', async () => {
    const runner = upHost()
      .on('wg show vp1 dump', {
        stdout:
          `${SERVER_KEY.privateKey}\t${SERVER_KEY.publicKey}\t51820\toff\n` +
          `${A}\t(none)\t192.0.2.2:40000\t10.128.0.2/32\t1700000000\t1234\t5678\toff\n` +
          `${B}\t(none)\t(none)\t(none)\t0\t0\t0\t25\n`,
      })
      .on('ip -n vp-s1 -o link show dev vp1', {
        stdout: '17: vp1: <POINTOPOINT,NOARP,UP,LOWER_UP> mtu 1420 qdisc noqueue state UNKNOWN\n',
      });
    assert.deepEqual(await driverOn(runner).readCounters(1), {
      instance: '17',
      peers: [
        { publicKey: A, rxBytes: 1234, txBytes: 5678, lastHandshakeMs: 1_700_000_000_000 },
        { publicKey: B, rxBytes: 0, txBytes: 0, lastHandshakeMs: 0 },
      ],
    });
    assert.deepEqual(parseDump(dumpOf(1, [[B, '(none)']])).peers[0]?.allowedIps, '');
  });
});

describe('wireguard driver: known peer changes (recorded commands)', () => {
  test('changePeers applies only the given difference in one wg set, without reading the interface', async () => {
    const runner = upHost([[A, '10.128.0.2/32']]);
    await driverOn(runner).changePeers(1, [{ publicKey: D, allowedIp: '10.128.0.5/32', speedLimitKbps: 0 }], [A]);
    assert.deepEqual(runner.lines(isChange), [
      `wg set vp1 peer ${A} remove`,
      `wg set vp1 peer ${D} allowed-ips 10.128.0.5/32`,
    ]);
    assert.ok(!runner.lines().some((l) => l.includes('dump')), 'no dump: the cost does not grow with the peer count');
  });

  test('changePeers reports an invalid peer and still applies the valid ones', async () => {
    const runner = upHost([]);
    await assert.rejects(
      driverOn(runner).changePeers(
        1,
        [
          { publicKey: 'bad', allowedIp: '10.128.0.5/32', speedLimitKbps: 0 },
          { publicKey: E, allowedIp: '10.128.0.6/32', speedLimitKbps: 0 },
        ],
        [],
      ),
      /not a WireGuard public key/,
    );
    assert.deepEqual(runner.lines(isChange), [`wg set vp1 peer ${E} allowed-ips 10.128.0.6/32`]);
  });
});

describe('wireguard driver: servers (recorded commands)', () => {
  test('up on an empty host builds namespace, isolation, interface, veth, forwarding and NAT, in order', async () => {
    const runner = emptyHost();
    const state = await driverOn(runner).up(SPEC);
    assert.deepEqual(state, {
      serverId: 1,
      listenPort: 51820,
      address: '10.128.0.1/24',
      mtu: 1420,
      publicKey: SERVER_KEY.publicKey,
      peerCount: 0,
      ipv6: 'off',
    });
    assert.deepEqual(
      runner.starts.map((s) => [s.line, s.env?.LOG_LEVEL]),
      [['[hh] wireguard-go -f vp1', 'error']],
    );
    assert.deepEqual(runner.lines(isChange), [
      'ip netns add vp-s1',
      '[vp-s1] nft -f -',
      '[hh] nft -f -',
      'ip -n hh link set vp1 mtu 1420',
      'ip -n hh link set vp1 netns vp-s1',
      'wg set vp1 private-key /dev/stdin listen-port 51820',
      'ip -n vp-s1 addr add 10.128.0.1/24 dev vp1',
      'ip -n vp-s1 link set vp1 up',
      'ip -n vp-s1 link set lo up',
      'ip -n hh link add vp1h type veth peer name vp1s netns vp-s1',
      'ip -n hh addr add 169.254.1.5/30 dev vp1h',
      'ip -n hh link set vp1h up',
      'ip -n vp-s1 addr add 169.254.1.6/30 dev vp1s',
      'ip -n vp-s1 link set vp1s up',
      'ip -n vp-s1 route replace default via 169.254.1.5 dev vp1s',
      '[vp-s1] sysctl -w net.ipv4.ip_forward=1',
      '[hh] sysctl -w net.ipv4.ip_forward=1',
      '[vp-s1] nft -f -',
      '[hh] nft -f -',
    ]);
    const keyCall = runner.calls.find((c) => c.line.startsWith('wg set vp1 private-key'));
    assert.equal(keyCall?.input, `${SPEC.privateKey}\n`, 'the key goes through stdin, never argv');
    const [serverIsolation, hostIsolation, , hostNat] = runner.calls.filter((c) => c.line.endsWith('nft -f -'));
    const replaced = /^table inet vpnpanel_iso \{\}\ndelete table inet vpnpanel_iso\n.*oifname "vp1" drop/s;
    assert.match(serverIsolation?.input ?? '', replaced);
    assert.match(hostIsolation?.input ?? '', /iifname "vp1h" drop/);
    assert.match(hostNat?.input ?? '', /ip saddr 169\.254\.1\.6 oifname != "vp1h" masquerade/);
    assert.equal(
      runner.calls.filter((c) => c.netns === undefined && /^(sysctl|nft)/.test(c.line)).length,
      0,
      'nothing in the root namespace',
    );
  });

  test('up on a host that already matches only reads', async () => {
    const runner = upHost([[A, '10.128.0.2/32']]);
    const state = await driverOn(runner).up(SPEC);
    assert.equal(state.peerCount, 1);
    assert.deepEqual(runner.lines(isChange), []);
    assert.equal(runner.starts.length, 0);
  });

  test('a read of the links or dump that fails once is read again, not taken for a missing interface', async () => {
    for (const read of ['ip -n vp-s1 -j addr show', 'ip -n hh -j addr show', 'wg show vp1 dump']) {
      const runner = upHost([[A, '10.128.0.2/32']]);
      let failed = false;
      // Matches the first such read only; the ones after it get the host's answer.
      const once = (call: { line: string }): boolean => {
        if (failed || call.line !== read) return false;
        failed = true;
        return true;
      };
      runner.on(once, { exitCode: 1, stderr: 'a read that failed under load' });
      const state = await driverOn(runner).up(SPEC);
      assert.ok(failed, `${read} failed once`);
      assert.equal(state.peerCount, 1, read);
      assert.deepEqual(runner.lines(isChange), [], `after a failed ${read}, nothing is made anew`);
      assert.equal(runner.starts.length, 0, read);
    }
  });

  test('links that cannot be read fail up() and change nothing', async () => {
    const runner = upHost([[A, '10.128.0.2/32']]).on('ip -n hh -j addr show', { exitCode: 1, stderr: 'busy' });
    await assert.rejects(driverOn(runner).up(SPEC), (error: unknown) => {
      assert.ok(error instanceof DriverError);
      assert.match(error.message, /cannot read the host: .*busy/);
      return true;
    });
    assert.deepEqual(runner.lines(isChange), []);
  });

  test('a new listen port recreates the interface and puts the peers back', async () => {
    // The running wireguard-go (an earlier agent's) answers until its interface is deleted.
    let deleted = false;
    const runner = upHost([
      [A, '10.128.0.2/32'],
      [B, '10.128.0.3/32'],
    ])
      .on('ip -n vp-s1 link del vp1', () => {
        deleted = true;
        return {};
      })
      .on('wg show vp1 listen-port', () => (deleted && runner.starts.length === 0 ? { exitCode: 1 } : {}));
    const state = await driverOn(runner).up({ ...SPEC, listenPort: 51821 });
    assert.equal(state.peerCount, 2);
    assert.equal(runner.starts.length, 1);
    assert.deepEqual(runner.lines(isChange), [
      'ip -n vp-s1 link del vp1',
      'ip -n hh link set vp1 mtu 1420',
      'ip -n hh link set vp1 netns vp-s1',
      'wg set vp1 private-key /dev/stdin listen-port 51821',
      'ip -n vp-s1 addr add 10.128.0.1/24 dev vp1',
      'ip -n vp-s1 link set vp1 up',
      `wg set vp1 peer ${A} allowed-ips 10.128.0.2/32 peer ${B} allowed-ips 10.128.0.3/32`,
    ]);
  });

  test('a new key or address is changed in place', async () => {
    const runner = upHost();
    const other = generateKeyPair();
    const state = await driverOn(runner).up({ ...SPEC, privateKey: other.privateKey, address: '10.128.5.1/24' });
    assert.equal(state.publicKey, other.publicKey);
    assert.deepEqual(runner.lines(isChange), [
      '[vp-s1] nft -f -',
      'wg set vp1 private-key /dev/stdin',
      'ip -n vp-s1 addr del 10.128.0.1/24 dev vp1',
      'ip -n vp-s1 addr add 10.128.5.1/24 dev vp1',
    ]);
  });

  test("client_to_client reloads only the server namespace's rules; a lost host table comes back", async () => {
    const runner = upHost([[A, '10.128.0.2/32']]);
    const driver = driverOn(runner);
    assert.deepEqual(await driver.isolationProblems(SPEC), []);
    assert.deepEqual(await driver.isolationProblems({ ...SPEC, clientToClient: true }), [
      'table inet vpnpanel_iso in vp-s1 differs from the expected rules',
    ]);
    runner.clear();
    await driver.up({ ...SPEC, clientToClient: true });
    assert.deepEqual(runner.lines(isChange), ['[vp-s1] nft -f -']);
    const loaded = runner.calls.find((c) => c.line === '[vp-s1] nft -f -');
    assert.match(loaded?.input ?? '', /iifname "vp1" oifname "vp1" accept/);

    runner.on('[hh] nft list table inet vpnpanel_iso_vp1', { exitCode: 1, stderr: 'Error: No such file or directory' });
    assert.deepEqual(await driver.isolationProblems(SPEC), ['table inet vpnpanel_iso_vp1 in hh is missing']);
    runner.clear();
    await driver.up(SPEC);
    assert.deepEqual(runner.lines(isChange), ['[hh] nft -f -']);
  });

  test('a failed step is reported and the steps after it still run', async () => {
    const runner = emptyHost()
      .on('ip -n hh addr add 169.254.1.5/30 dev vp1h', { exitCode: 2, stderr: 'RTNETLINK answers: Permission denied' })
      .on('[vp-s1] sysctl -w net.ipv4.ip_forward=1', { exitCode: 255, stderr: 'sysctl: permission denied' });
    const error = await driverOn(runner)
      .up(SPEC)
      .then(
        () => null,
        (e: unknown) => e,
      );
    assert.ok(error instanceof DriverError);
    assert.equal(error.failures.length, 2);
    assert.match(error.failures[0] ?? '', /addr add 169\.254\.1\.5\/30 .*exit 2.*Permission denied/);
    assert.match(error.failures[1] ?? '', /sysctl -w .*exit 255/);
    const lines = runner.lines(isChange);
    assert.ok(lines.includes('ip -n vp-s1 route replace default via 169.254.1.5 dev vp1s'));
    assert.equal(lines.at(-1), '[hh] nft -f -', 'the last step still ran');
  });

  test('a wireguard-go that exits at start is reported with its stderr', async () => {
    const runner = emptyHost().on('wg show vp1 listen-port', { exitCode: 1, stderr: 'Unable to access interface' });
    const driver = new WireGuardDriver({
      runner,
      namePrefix: 'vp',
      hostNetns: 'hh',
      implementation: 'wireguard-go',
      wireguardGoConfig: 'wg',
      readyTimeoutMs: 5000,
    });
    const pending = driver.up(SPEC).then(
      () => null,
      (e: unknown) => e,
    );
    setTimeout(() => runner.starts[0]?.exit({ code: 1, signal: null }), 50);
    const error = await pending;
    assert.ok(error instanceof DriverError);
    assert.match(error.failures[0] ?? '', /wireguard-go vp1 exited at start/);
    assert.ok(!runner.lines().some((l) => l.includes('link set vp1 netns')), 'no step that needs the interface');
  });

  test('down removes what exists; a missing server is not an error and changes nothing', async () => {
    const runner = upHost();
    await driverOn(runner).down(1);
    assert.deepEqual(runner.lines(isChange), [
      'ip -n vp-s1 link del vp1',
      'ip -n hh link del vp1h',
      '[hh] nft delete table ip vpnpanel_vp1',
      '[hh] nft delete table inet vpnpanel_iso_vp1',
      'ip netns del vp-s1',
    ]);
    const empty = emptyHost();
    await driverOn(empty).down(1);
    assert.deepEqual(empty.lines(isChange), []);
  });

  test("list finds this prefix's servers by namespace and leftover host links only", async () => {
    const runner = new RecordingRunner()
      .on('ip netns list', { stdout: 'vp-s12 (id: 3)\nvpx-s4\nvp-h\nother\n' })
      .on('ip -n hh -j addr show', {
        stdout: JSON.stringify([{ ifname: 'vp7h', flags: [] }, { ifname: 'vpx9' }, { ifname: 'eth0' }]),
      });
    assert.deepEqual(await driverOn(runner).list(), [7, 12]);
  });

  test('names stay within 15 characters and the prefix is checked', () => {
    const driver = new WireGuardDriver({ runner: new RecordingRunner(), namePrefix: 'abcd' });
    const names = driver.names(9_999_999_999);
    for (const name of [names.iface, names.vethHost, names.vethServer]) assert.ok(name.length <= 15, name);
    assert.throws(() => driver.names(10_000_000_000), DriverError);
    for (const bad of ['', 'vp1', '1vp', 'abcde', 'V-P'])
      assert.throws(() => new WireGuardDriver({ runner: new RecordingRunner(), namePrefix: bad }));
    assert.notEqual(driver.names(1).hostIp, driver.names(2).hostIp);
    assert.doesNotMatch(
      JSON.stringify(Array.from({ length: 20000 }, (_, i) => driver.names(i).hostIp)),
      /169\.254\.(0|169|170|255)\./,
    );
  });

  test('canRunWireGuard names what is missing', async () => {
    const noCaps = new RecordingRunner().on('cat /proc/self/status', { stdout: 'CapEff:\t0000000000000000\n' });
    assert.deepEqual(await canRunWireGuard(noCaps), {
      ok: false,
      reason: 'needs root or CAP_NET_ADMIN and CAP_SYS_ADMIN (commands the agent runs lack them)',
    });
    const rootNoWg = new RecordingRunner()
      .on('cat /proc/self/status', { stdout: 'CapEff:\t000001ffffffffff\n' })
      .on('test -d /sys/module/wireguard', { exitCode: 1 })
      .on('modprobe -q wireguard', { exitCode: 1 })
      .on('wireguard-go --version', { exitCode: 127 });
    assert.deepEqual(await canRunWireGuard(rootNoWg), {
      ok: false,
      reason: 'no kernel WireGuard module and no `wireguard-go` (install wireguard-go)',
    });
    rootNoWg
      .on('wireguard-go --version', { stdout: 'wireguard-go v0.0.20220316\n' })
      .on('sh -c command -v "$1" sh wireguard-go', { stdout: '/usr/bin/wireguard-go\n' })
      .on('amneziawg-go --version', { exitCode: 127 });
    assert.deepEqual(await canRunWireGuard(rootNoWg), {
      ok: true,
      implementation: 'wireguard-go',
      wireguardGo: { path: '/usr/bin/wireguard-go', version: 'v0.0.20220316' },
      amneziawgGo: null,
    });
    // A minimal Debian has no procps: the uplink's forwarding needs sysctl, so every deploy would fail.
    rootNoWg.on('sysctl --version', { exitCode: 127 });
    assert.deepEqual(await canRunWireGuard(rootNoWg), { ok: false, reason: '`sysctl` not found (install procps)' });
  });
});

describe('wireguard keys', () => {
  test('keys are canonical base64 of 32 bytes and the public key is derived', () => {
    const pair = generateKeyPair();
    assert.ok(isValidKey(pair.privateKey) && isValidKey(pair.publicKey));
    assert.equal(publicKeyOf(pair.privateKey), pair.publicKey);
    for (const bad of [
      '',
      'abc',
      `${pair.publicKey.slice(0, 42)}B=`,
      `${pair.publicKey.slice(0, 43)}`,
      `${pair.publicKey}=`,
    ])
      assert.equal(isValidKey(bad), false, bad);
    // RFC 7748 §6.1 test vector (Alice).
    assert.equal(
      publicKeyOf(
        Buffer.from('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a', 'hex').toString('base64'),
      ),
      Buffer.from('8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a', 'hex').toString('base64'),
    );
  });
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}

// ---------------------------------------------------------------------------------------------
// (b) End to end, as root: real namespaces, wireguard-go, a client, pings through the tunnel and
// out through both NATs. Everything lives in namespaces this test makes and removes.
//
//   client ns (PREFIX-c)  192.0.2.2 ── veth ── 192.0.2.1  host ns (PREFIX-h) 192.0.2.129 ── veth ── 192.0.2.130
//   wireguard-go PREFIXc0 ─── UDP to 192.0.2.1:PORT ───▶  wireguard-go PREFIX1            "internet" ns (PREFIX-i)
//                                                         (moved into PREFIX-s1)
// ---------------------------------------------------------------------------------------------

const isRoot = process.getuid?.() === 0;
const hasTools = ['wg', 'wireguard-go', 'nft', 'ping'].every((tool) => {
  try {
    execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
});
const skipE2e = !isRoot
  ? 'needs root (namespaces, wireguard-go); CI runs it as root'
  : !hasTools
    ? 'needs wg, wireguard-go, nft and ping (apt-get install wireguard-go wireguard-tools nftables iputils-ping)'
    : false;

// Both ways of reaching wireguard-go: its UAPI socket (the default) and the `wg` tool.
for (const wireguardGoConfig of ['uapi', 'wg'] as const)
  describe(`wireguard driver: end to end (${wireguardGoConfig})`, { skip: skipE2e }, () => {
    // A letter last, so the prefix is valid; random so parallel runs never share a name.
    const prefix = `t${randomInt(36 ** 2)
      .toString(36)
      .padStart(2, '0')}${String.fromCharCode(97 + randomInt(26))}`;
    const hostNs = `${prefix}-h`;
    const clientNs = `${prefix}-c`;
    const internetNs = `${prefix}-i`;
    const clientIf = `${prefix}c0`;
    const serverId = 1;
    const serverNs = `${prefix}-s${serverId}`;
    const serverIf = `${prefix}${serverId}`;
    const listenPort = 40000 + randomInt(20000);
    const runner = new ExecRunner(CHILD_LOG_DIR);
    const options: WireGuardDriverOptions = {
      runner,
      namePrefix: prefix,
      hostNetns: hostNs,
      implementation: 'wireguard-go',
      wireguardGoConfig,
    };
    const driver = new WireGuardDriver(options);
    const drivers = [driver];
    const serverKey = generateKeyPair();
    const clientKey = generateKeyPair();
    const spec: ServerSpec = {
      serverId,
      privateKey: serverKey.privateKey,
      listenPort,
      address: '10.77.0.1/24',
      mtu: 1420,
    };
    const clientPeer: PeerSpec = { publicKey: clientKey.publicKey, allowedIp: '10.77.0.2/32', speedLimitKbps: 0 };
    let client: ChildHandle | undefined;

    const sh = (args: string[]): string =>
      execFileSync(args[0] ?? '', args.slice(1), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    const pings = (ip: string, count = 3): boolean => {
      try {
        sh(['ip', 'netns', 'exec', clientNs, 'ping', '-n', '-q', '-i', '0.2', '-c', String(count), '-W', '1', ip]);
        return true;
      } catch {
        return false;
      }
    };
    const timed = async <T>(label: string, work: () => Promise<T>, log: (text: string) => void): Promise<T> => {
      const startMs = performance.now();
      const result = await work();
      log(`${label}: ${(performance.now() - startMs).toFixed(1)} ms`);
      return result;
    };

    /** Namespaces to delete afterwards: only those this run made (and the driver's, by its name). */
    const made = [serverNs];

    before(() => {
      for (const ns of [hostNs, clientNs, internetNs]) {
        sh(['ip', 'netns', 'add', ns]);
        made.push(ns);
      }
      sh([
        'ip',
        '-n',
        hostNs,
        'link',
        'add',
        `${prefix}hc`,
        'type',
        'veth',
        'peer',
        'name',
        `${prefix}ch`,
        'netns',
        clientNs,
      ]);
      sh([
        'ip',
        '-n',
        hostNs,
        'link',
        'add',
        `${prefix}hi`,
        'type',
        'veth',
        'peer',
        'name',
        `${prefix}ih`,
        'netns',
        internetNs,
      ]);
      for (const [ns, dev, cidr] of [
        [hostNs, `${prefix}hc`, '192.0.2.1/25'],
        [clientNs, `${prefix}ch`, '192.0.2.2/25'],
        [hostNs, `${prefix}hi`, '192.0.2.129/25'],
        [internetNs, `${prefix}ih`, '192.0.2.130/25'],
      ] as const) {
        sh(['ip', '-n', ns, 'addr', 'add', cidr, 'dev', dev]);
        sh(['ip', '-n', ns, 'link', 'set', dev, 'up']);
        sh(['ip', '-n', ns, 'link', 'set', 'lo', 'up']);
      }
    });

    after(async () => {
      // By name and pid, whether the test passed or not.
      await driver.down(serverId).catch(() => {});
      for (const d of drivers) await d.close();
      await client?.stop();
      for (const ns of made) {
        try {
          sh(['ip', 'netns', 'del', ns]);
        } catch {
          // already gone
        }
      }
    });

    test(
      'a client reaches the server and the outside through the tunnel; ' +
        'counters count; removal cuts it; down cleans up',
      async (t) => {
        const log = (text: string) => t.diagnostic(text);
        const state = await timed('up() new server', () => driver.up(spec), log);
        assert.equal(state.publicKey, serverKey.publicKey);
        await timed('up() again, nothing to change', () => driver.up(spec), log);
        assert.deepEqual(await driver.list(), [serverId]);
        await driver.setPeers(serverId, [clientPeer]);

        client = runner.start('wireguard-go', ['-f', clientIf], {
          netns: clientNs,
          env: { LOG_LEVEL: 'error', WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD: '1' },
        });
        for (let i = 0; i < 150 && !existsSync(`/var/run/wireguard/${clientIf}.sock`); i++)
          await new Promise((r) => setTimeout(r, 20));
        const clientConfig = [
          'set',
          clientIf,
          'private-key',
          '/dev/stdin',
          'peer',
          serverKey.publicKey,
          'endpoint',
          `192.0.2.1:${listenPort}`,
          'allowed-ips',
          '10.77.0.0/24,192.0.2.128/25',
        ];
        await runner.run('wg', clientConfig, { input: clientKey.privateKey });
        sh(['ip', '-n', clientNs, 'addr', 'add', '10.77.0.2/24', 'dev', clientIf]);
        sh(['ip', '-n', clientNs, 'link', 'set', clientIf, 'up']);
        sh(['ip', '-n', clientNs, 'route', 'add', '192.0.2.128/25', 'dev', clientIf]);

        assert.ok(pings('10.77.0.1'), 'client pings the server through the tunnel');
        // The third namespace has no route back to the tunnel or the veth: replies arrive only through both NATs.
        assert.ok(pings('192.0.2.130'), 'client reaches a third namespace through both NATs');
        const [counters] = (await driver.readCounters(serverId)).peers;
        assert.equal(counters?.publicKey, clientKey.publicKey);
        assert.ok((counters?.rxBytes ?? 0) > 0 && (counters?.txBytes ?? 0) > 0, JSON.stringify(counters));
        assert.ok((counters?.lastHandshakeMs ?? 0) > Date.now() - 60_000, 'a recent handshake');
        // UAPI reads what `wg show dump` prints, byte counters and handshake of a peer with traffic included.
        const at = { iface: serverIf, netns: undefined };
        assert.deepEqual(await new UapiConfig().read(at), parseDump(sh(['wg', 'show', serverIf, 'dump'])));

        const dummies = Array.from({ length: 999 }, (_, i) => ({
          publicKey: generateKeyPair().publicKey,
          allowedIp: `10.78.${i >> 8}.${i & 255}/32`,
          speedLimitKbps: 0,
        }));
        await timed('setPeers() 1,000 peers (999 new)', () => driver.setPeers(serverId, [clientPeer, ...dummies]), log);
        const changed = [
          clientPeer,
          ...dummies.slice(1),
          { publicKey: generateKeyPair().publicKey, allowedIp: '10.78.9.9/32', speedLimitKbps: 0 },
        ];
        await timed('setPeers() one peer swapped at 1,000', () => driver.setPeers(serverId, changed), log);
        await timed('setPeers() same 1,000 again', () => driver.setPeers(serverId, changed), log);
        await timed('readCounters() at 1,000', () => driver.readCounters(serverId), log);
        assert.equal((await driver.readCounters(serverId)).peers.length, 1000);
        assert.ok(pings('10.77.0.1'), 'the client still works at 1,000 peers');

        await driver.setPeers(serverId, changed.slice(1));
        assert.equal(pings('10.77.0.1'), false, 'a removed peer is cut off');
        await driver.setPeers(serverId, []);
        assert.equal((await driver.readCounters(serverId)).peers.length, 0);

        // Recreating (mtu or port change) puts the peers back; a restarted agent adopts the running server.
        await driver.setPeers(serverId, changed);
        // The instance is the interface's index, whichever driver reads it and however often.
        const index = (): string =>
          /^(\d+):/.exec(sh(['ip', '-n', serverNs, '-o', 'link', 'show', serverIf]))?.[1] ?? '';
        const first = (await driver.readCounters(serverId)).instance;
        assert.equal(first, index());
        assert.equal((await driver.readCounters(serverId)).instance, first);
        const smaller = await timed(
          'up() with a new mtu at 1,000 peers (recreate)',
          () => driver.up({ ...spec, mtu: 1380 }),
          log,
        );
        assert.equal(smaller.peerCount, 1000);
        assert.match(sh(['ip', '-n', serverNs, 'link', 'show', serverIf]), /mtu 1380/);
        const restarted = new WireGuardDriver(options);
        drivers.push(restarted);
        assert.equal((await restarted.up({ ...spec, mtu: 1380 })).peerCount, 1000);
        const moved = await restarted.up({ ...spec, mtu: 1380, listenPort: listenPort + 1 });
        assert.equal(moved.peerCount, 1000);
        assert.equal(sh(['wg', 'show', serverIf, 'listen-port']).trim(), String(listenPort + 1));
        assert.equal((await restarted.readCounters(serverId)).peers.length, 1000);
        // A new interface is a new instance, also for the first driver, which did not make it.
        const remade = (await restarted.readCounters(serverId)).instance;
        assert.equal(remade, index());
        assert.notEqual(remade, first);
        assert.equal((await driver.readCounters(serverId)).instance, remade);

        await timed('down()', () => restarted.down(serverId), log);
        await driver.down(serverId); // a missing server is not an error
        assert.deepEqual(await driver.list(), []);
        assert.ok(
          !sh(['ip', 'netns', 'list'])
            .split('\n')
            .some((l) => l.split(' ')[0] === serverNs),
          'namespace gone',
        );
        assert.doesNotMatch(
          sh(['ip', '-n', hostNs, '-o', 'link', 'show']),
          new RegExp(`\\b${serverIf}[hs]?[@:]`),
          'no interface or veth left',
        );
        assert.ok(!existsSync(`/var/run/wireguard/${serverIf}.sock`), 'no UAPI socket left');
        assert.doesNotMatch(sh(['wg', 'show', 'interfaces']), new RegExp(`\\b${serverIf}\\b`));
        assert.doesNotMatch(
          sh(['ps', '-eo', 'args']),
          new RegExp(`wireguard-go -f ${serverIf}$`, 'm'),
          'no wireguard-go process left',
        );
        assert.equal(sh(['ip', 'netns', 'exec', hostNs, 'nft', 'list', 'tables']).trim(), '', 'no host NAT table left');
      },
    );
  });
