/**
 * Speed limits in the wireguard driver (src/agent/shaping/): (a) the commands it issues against a
 * scripted host, (b) as root, the real tc and nft state it leaves in namespaces this file makes.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { DriverError, type PeerSpec, type ServerSpec } from '../../src/agent/driver.ts';
import {
  type ChildHandle,
  type CommandRunner,
  ExecRunner,
  RecordingRunner,
  type RunOptions,
  type RunResult,
  type StartOptions,
} from '../../src/agent/commands.ts';
import { WireGuardDriver } from '../../src/agent/wireguard/driver.ts';
import { burstBytes, classMinor, parsePrintedRate, printedRate, queueBytes } from '../../src/agent/shaping/tc-nft.ts';
import { generateKeyPair, publicKeyOf } from '../../src/domain/wireguard-keys.ts';
import { CHILD_LOG_DIR, NetLab, requireRoot, run, unusedPrefix, waitFor } from '../support/netns.ts';
import { driverOn, listedShapingTable } from '../support/recorded-host.ts';

// ---------------------------------------------------------------------------------------------
// (a) Against a RecordingRunner: server 1 of prefix `vp` (interface vp1 and veth end vp1s in
// namespace vp-s1). The host is scripted from a list of peers and the limits it already holds.
// ---------------------------------------------------------------------------------------------

const SERVER_KEY = generateKeyPair();
const [A, B, C, D, E] = Array.from({ length: 5 }, () => generateKeyPair().publicKey) as [
  string,
  string,
  string,
  string,
  string,
];
const BATCH = 'tc -n vp-s1 -force -batch -';
const NFT = '[vp-s1] nft -f -';
const isWrite = (line: string): boolean => line === BATCH || line === NFT || /^wg set /.test(line);

/** A peer on the host: key, address, and the rate its classes hold as tc prints it ('' for none). */
type HostPeer = readonly [key: string, ip: string, printed: string];

function shapedHost(peers: readonly HostPeer[]): RecordingRunner {
  const head = `${SERVER_KEY.privateKey}\t${SERVER_KEY.publicKey}\t51820\toff`;
  const dump = `${[head, ...peers.map(([key, ip]) => `${key}\t(none)\t(none)\t${ip}/32\t0\t0\t0\toff`)].join('\n')}\n`;
  const limited = peers.filter(([, , printed]) => printed !== '');
  const runner = new RecordingRunner().on('wg show vp1 dump', { stdout: dump });
  if (limited.length === 0)
    return runner.on('[vp-s1] nft list table ip vpnpanel_shape', {
      exitCode: 1,
      stderr: 'Error: No such file or directory',
    });
  const classes = limited
    .map(
      ([, ip, printed], i) =>
        `class htb 1:${classMinor(ip).toString(16)} root leaf 80${10 + i}: prio 0 ` +
        `rate ${printed} ceil ${printed} burst 3028b cburst 3028b \n`,
    )
    .join('');
  const elements = limited.map(([, ip]) => `${ip} : 1:${classMinor(ip).toString(16)}`).join(',\n\t\t\t     ');
  const table = listedShapingTable('ip', elements);
  for (const dev of ['vp1', 'vp1s']) {
    runner.on(`tc -n vp-s1 qdisc show dev ${dev} root`, {
      stdout: 'qdisc htb 1: root refcnt 3 r2q 10 default 0 direct_packets_stat 0 direct_qlen 1000\n',
    });
    runner.on(`tc -n vp-s1 class show dev ${dev}`, { stdout: classes });
  }
  return runner.on('[vp-s1] nft list table ip vpnpanel_shape', { stdout: table });
}

const peer = (publicKey: string, ip: string, speedLimitKbps: number): PeerSpec => ({
  publicKey,
  allowedIp: `${ip}/32`,
  speedLimitKbps,
});

/** The input of every call of `line`, split into its lines. */
function inputsOf(runner: RecordingRunner, line: string): string[][] {
  return runner.calls.filter((c) => c.line === line).map((c) => (c.input ?? '').split('\n').filter((l) => l !== ''));
}

function classLines(dev: string, minorHex: string, kbps: number, burst: number, queue: number): string[] {
  return [
    `class replace dev ${dev} parent 1: classid 1:${minorHex} htb rate ${kbps}kbit ceil ${kbps}kbit ` +
      `burst ${burst} cburst ${burst} quantum 1514`,
    `qdisc replace dev ${dev} parent 1:${minorHex} handle ${minorHex}: bfifo limit ${queue}`,
  ];
}

describe('speed limits: commands (recorded)', () => {
  test(
    'limits on a host without shaping: an HTB root, and a class with its queue ' +
      'per limited peer, on both devices; then the table in one transaction',
    async () => {
      const runner = shapedHost([]);
      await driverOn(runner).setPeers(1, [
        peer(A, '10.128.0.2', 2000),
        peer(B, '10.128.0.3', 0),
        peer(C, '10.128.1.4', 10_000),
      ]);
      assert.deepEqual(runner.lines(isWrite), [
        `wg set vp1 ${[A, B, C]
          .sort()
          .map((k) => `peer ${k} allowed-ips ${k === A ? '10.128.0.2' : k === B ? '10.128.0.3' : '10.128.1.4'}/32`)
          .join(' ')}`,
        BATCH,
        NFT,
      ]);
      const [batch = []] = inputsOf(runner, BATCH);
      for (const dev of ['vp1', 'vp1s']) {
        const lines = batch.filter((l) => l.includes(`dev ${dev} `));
        assert.equal(lines[0], `qdisc replace dev ${dev} root handle 1: htb`, 'the root first');
        // 2 Mbit/s: a burst of two frames and 100 ms (25,000 bytes) of queue; 10 Mbit/s: 10 ms and 100 ms of its rate.
        assert.deepEqual(
          lines.slice(1).sort(),
          [...classLines(dev, '2', 2000, 3028, 25_000), ...classLines(dev, '104', 10_000, 12_500, 125_000)].sort(),
        );
      }
      const [script = []] = inputsOf(runner, NFT);
      assert.match(
        script.join('\n'),
        /elements = \{ (10\.128\.0\.2 : 1:2, 10\.128\.1\.4 : 1:104|10\.128\.1\.4 : 1:104, 10\.128\.0\.2 : 1:2) \}/,
      );
      assert.ok(
        script.includes('    oifname "vp1" meta priority set ip daddr map @limited'),
        'download: by destination on the WireGuard interface',
      );
      assert.ok(
        script.includes('    oifname "vp1s" meta priority set ip saddr map @limited'),
        'upload: by source toward the uplink',
      );
      assert.ok(!script.join('\n').includes('10.128.0.3'), 'an unlimited peer has no entry');
    },
  );

  test('the limits the host already holds: nothing is written', async () => {
    const host: HostPeer[] = [
      [A, '10.128.0.2', '2Mbit'],
      [B, '10.128.0.3', ''],
      [C, '10.128.1.4', '10Mbit'],
    ];
    const runner = shapedHost(host);
    await driverOn(runner).setPeers(1, [
      peer(A, '10.128.0.2', 2000),
      peer(B, '10.128.0.3', 0),
      peer(C, '10.128.1.4', 10_000),
    ]);
    assert.deepEqual(runner.lines(isWrite), []);
  });

  test(
    'one limit changed, one dropped, one new: ' +
      'only their classes and entries are written; the unchanged peer is not named',
    async () => {
      const runner = shapedHost([
        [A, '10.128.0.2', '2Mbit'],
        [C, '10.128.1.4', '10Mbit'],
        [D, '10.128.0.5', '3Mbit'],
        [E, '10.128.0.6', ''],
      ]);
      await driverOn(runner).setPeers(1, [
        peer(A, '10.128.0.2', 2000),
        peer(C, '10.128.1.4', 5000),
        peer(D, '10.128.0.5', 0),
        peer(E, '10.128.0.6', 4000),
      ]);
      assert.deepEqual(runner.lines(isWrite), [BATCH, NFT]);
      const [batch = []] = inputsOf(runner, BATCH);
      assert.deepEqual(
        batch.sort(),
        [
          'class del dev vp1 classid 1:5',
          'class del dev vp1s classid 1:5',
          ...classLines('vp1', '104', 5000, 6250, 62_500),
          ...classLines('vp1', '6', 4000, 5000, 50_000),
          ...classLines('vp1s', '104', 5000, 6250, 62_500),
          ...classLines('vp1s', '6', 4000, 5000, 50_000),
        ].sort(),
      );
      assert.deepEqual(inputsOf(runner, NFT), [
        [
          'delete element ip vpnpanel_shape limited { 10.128.0.5 }',
          'add element ip vpnpanel_shape limited { 10.128.0.6 : 1:6 }',
        ],
      ]);
      assert.ok(
        !runner.calls.some((c) => (c.input ?? '').includes('1:2 ') || (c.input ?? '').includes('10.128.0.2 ')),
        'A is not touched',
      );
    },
  );

  test('no limit left: the two roots and the table go, one command each, not class by class', async () => {
    const runner = shapedHost([
      [A, '10.128.0.2', '2Mbit'],
      [C, '10.128.1.4', '10Mbit'],
    ]);
    await driverOn(runner).setPeers(1, [peer(A, '10.128.0.2', 0), peer(C, '10.128.1.4', 0)]);
    assert.deepEqual(inputsOf(runner, BATCH), [['qdisc del dev vp1 root', 'qdisc del dev vp1s root']]);
    assert.deepEqual(inputsOf(runner, NFT), [['delete table ip vpnpanel_shape']]);
  });

  test(
    'changePeers after setPeers: ' + 'a new rate is one tc batch naming that peer only, and nothing is read',
    async () => {
      const runner = shapedHost([
        [A, '10.128.0.2', '2Mbit'],
        [C, '10.128.1.4', '10Mbit'],
      ]);
      const driver = driverOn(runner);
      await driver.setPeers(1, [peer(A, '10.128.0.2', 2000), peer(C, '10.128.1.4', 10_000)]);
      runner.clear();
      await driver.changePeers(1, [peer(C, '10.128.1.4', 3000)], []);
      assert.deepEqual(runner.lines(), [`wg set vp1 peer ${C} allowed-ips 10.128.1.4/32`, BATCH]);
      assert.deepEqual(inputsOf(runner, BATCH), [
        [
          'qdisc add dev vp1 root handle 1: htb',
          ...classLines('vp1', '104', 3000, 3750, 37_500),
          'qdisc add dev vp1s root handle 1: htb',
          ...classLines('vp1s', '104', 3000, 3750, 37_500),
        ],
      ]);

      runner.clear();
      await driver.changePeers(1, [peer(C, '10.128.1.4', 3000)], []);
      assert.deepEqual(
        runner.lines(),
        [`wg set vp1 peer ${C} allowed-ips 10.128.1.4/32`],
        'the same limit again: no tc, no nft',
      );

      runner.clear();
      await driver.changePeers(1, [peer(D, '10.128.0.5', 1000)], [A]);
      assert.deepEqual(inputsOf(runner, BATCH), [
        [
          'qdisc add dev vp1 root handle 1: htb',
          'class del dev vp1 classid 1:2',
          ...classLines('vp1', '5', 1000, 3028, 12_500),
          'qdisc add dev vp1s root handle 1: htb',
          'class del dev vp1s classid 1:2',
          ...classLines('vp1s', '5', 1000, 3028, 12_500),
        ],
      ]);
      // Adding before deleting makes the delete succeed whether the entry is there or not.
      assert.deepEqual(inputsOf(runner, NFT), [
        [
          'add element ip vpnpanel_shape limited { 10.128.0.2 : 1:2 }',
          'delete element ip vpnpanel_shape limited { 10.128.0.2 }',
          'add element ip vpnpanel_shape limited { 10.128.0.5 : 1:5 }',
        ],
      ]);

      runner.clear();
      await driver.changePeers(1, [peer(C, '10.128.1.4', 0)], []);
      assert.deepEqual(inputsOf(runner, BATCH), [
        ['class del dev vp1 classid 1:104', 'class del dev vp1s classid 1:104'],
      ]);
      assert.deepEqual(inputsOf(runner, NFT), [
        [
          'add element ip vpnpanel_shape limited { 10.128.1.4 : 1:104 }',
          'delete element ip vpnpanel_shape limited { 10.128.1.4 }',
        ],
      ]);
    },
  );

  test(
    'changePeers on a server this process has not set: ' + 'reads whether anything is limited, and only then the peers',
    async () => {
      const unshaped = shapedHost([]);
      await driverOn(unshaped).changePeers(1, [peer(A, '10.128.0.2', 0)], [B]);
      assert.ok(
        !unshaped.lines().some((l) => l.includes('dump') || l.includes('class show')),
        'no HTB root: no peer list read',
      );
      const shaped = shapedHost([
        [A, '10.128.0.2', '2Mbit'],
        [B, '10.128.0.3', '1Mbit'],
      ]);
      await driverOn(shaped).changePeers(1, [peer(A, '10.128.0.2', 0)], [B]);
      assert.deepEqual(
        inputsOf(shaped, BATCH).map((lines) => [...lines].sort()),
        [
          [
            'class del dev vp1 classid 1:2',
            'class del dev vp1 classid 1:3',
            'class del dev vp1s classid 1:2',
            'class del dev vp1s classid 1:3',
          ],
        ],
        'both limits found on the host and removed',
      );
    },
  );

  test(
    'a tolerated tc error is not a failure; ' +
      'any other is reported for its peer, and that peer is tried again next time',
    async () => {
      const runner = shapedHost([[A, '10.128.0.2', '2Mbit']]).on(BATCH, {
        exitCode: 1,
        stderr:
          'Error: Exclusivity flag on, cannot modify.\nCommand failed -:1\n' +
          'RTNETLINK answers: Invalid argument\nCommand failed -:2\n',
      });
      const driver = driverOn(runner);
      await driver.setPeers(1, [peer(A, '10.128.0.2', 2000)]);
      const error = await driver.changePeers(1, [peer(A, '10.128.0.2', 4000)], []).then(
        () => null,
        (e: unknown) => e,
      );
      assert.ok(error instanceof DriverError);
      assert.deepEqual(error.failures, [
        'speed limit of 10.128.0.2: `tc class replace dev vp1 parent 1: classid 1:2 htb rate 4000kbit ' +
          'ceil 4000kbit burst 5000 cburst 5000 quantum 1514` failed: RTNETLINK answers: Invalid argument',
      ]);
      runner.on(BATCH, {});
      runner.clear();
      await driver.changePeers(1, [peer(A, '10.128.0.2', 4000)], []);
      assert.equal(inputsOf(runner, BATCH).length, 1, 'the same limit is applied again after the failure');
    },
  );

  test('bad limits are reported; such a peer and its limit stay as they are', async () => {
    const runner = shapedHost([
      [A, '10.128.0.2', '2Mbit'],
      [C, '10.128.1.4', '10Mbit'],
    ]);
    const error = await driverOn(runner)
      .setPeers(1, [
        peer(A, '10.128.0.2', 1.5),
        peer(C, '10.128.1.4', 10_000),
        { publicKey: D, allowedIp: '10.128.2.0/24', speedLimitKbps: 100 },
        peer(E, '10.129.1.4', 100),
      ])
      .then(
        () => null,
        (e: unknown) => e,
      );
    assert.ok(error instanceof DriverError);
    // Which of two clashing peers is refused follows the order of their keys.
    assert.deepEqual(
      error.failures
        .map((f) =>
          f.replace(/^peer \S+: /, '').replace(/^10\.12[89]\.1\.4 has the class id of 10\.12[89]\.1\.4/, 'clash'),
        )
        .sort(),
      [
        'a speed limit needs a single IPv4 address, not 10.128.2.0/24',
        'clash (a subnet larger than /16)',
        'speed limit 1.5 is not 0-10000000 kbit/s',
      ],
    );
    assert.ok(
      !runner.calls.some((c) => (c.input ?? '').includes('1:2 ') || (c.input ?? '').includes('10.128.0.2')),
      'A keeps its class and entry',
    );
    assert.ok(!runner.lines().some((l) => l.startsWith('wg set') && l.includes(A)), 'and stays as a peer');
  });

  test("a peer whose class minor is 1 gets a queue handle of the kernel's choosing (1: is the root)", async () => {
    const runner = shapedHost([]);
    await driverOn(runner).setPeers(1, [peer(A, '10.128.0.1', 2000)]);
    const [batch = []] = inputsOf(runner, BATCH);
    assert.ok(batch.includes('qdisc replace dev vp1 parent 1:1 bfifo limit 25000'), batch.join('\n'));
  });

  test('rates are compared the way tc prints them; sizes follow the rate within bounds', () => {
    for (const [kbps, printed] of [
      [1, '1Kbit'],
      [999, '999Kbit'],
      [1001, '1001Kbit'],
      [2000, '2Mbit'],
      [12_345, '12345Kbit'],
      [1_234_567, '1234Mbit'],
      [9_999_999, '9999Mbit'],
      [10_000_000, '10Gbit'],
    ] as const) {
      assert.equal(printedRate(kbps), printed, `${kbps} kbit/s`);
      assert.ok(Math.abs(parsePrintedRate(printed) - kbps) / kbps < 0.001, printed);
    }
    assert.ok(Number.isNaN(parsePrintedRate('fast')));
    assert.deepEqual([burstBytes(1), burstBytes(2000), burstBytes(100_000)], [3028, 3028, 125_000]);
    assert.deepEqual([queueBytes(1), queueBytes(2000), queueBytes(10_000_000)], [6056, 25_000, 8 * 1024 * 1024]);
    assert.deepEqual(['10.128.0.2', '10.128.1.4', '10.129.255.254'].map(classMinor), [0x2, 0x104, 0xfffe]);
  });
});

describe('speed limits: IPv6 (recorded)', () => {
  const A6 = 'fd3a::2';
  const dual = (publicKey: string, ip: string, ip6: string, kbps: number): PeerSpec => ({
    ...peer(publicKey, ip, kbps),
    allowedIp6: `${ip6}/128`,
  });
  /** nft's listing of a family's table holding `entries` (address → class id). */
  const listing = (family: 'ip' | 'ip6', entries: readonly [string, string][]): string =>
    listedShapingTable(family, entries.map(([a, id]) => `${a} : ${id}`).join(', '));
  /** A's 2 Mbit/s limit in place for both its addresses (or the IPv6 entries given). */
  function shapedDual(entries6: readonly [string, string][] = [[A6, '1:2']]): RecordingRunner {
    return shapedHost([[A, '10.128.0.2', '2Mbit']])
      .on('wg show vp1 dump', {
        stdout:
          `${SERVER_KEY.privateKey}\t${SERVER_KEY.publicKey}\t51820\toff\n` +
          `${A}\t(none)\t(none)\t10.128.0.2/32,${A6}/128\t0\t0\t0\toff\n`,
      })
      .on('[vp-s1] nft list table ip6 vpnpanel_shape', { stdout: listing('ip6', entries6) });
  }

  test(
    'a limited peer with an IPv6 address: an ip6 table whose entry ' + 'names the same class, in the same transaction',
    async () => {
      const runner = shapedHost([]);
      await driverOn(runner).setPeers(1, [dual(A, '10.128.0.2', A6, 2000), peer(B, '10.128.0.3', 1000)]);
      assert.deepEqual(runner.lines(isWrite).slice(1), [BATCH, NFT], 'one class per peer, one nft transaction');
      const [script = []] = inputsOf(runner, NFT);
      const text = script.join('\n');
      assert.match(
        text,
        new RegExp(
          /table ip vpnpanel_shape \{\n\s+map limited \{\n\s+type ipv4_addr : classid\n/.source +
            /\s+elements = \{ [^}]*10\.128\.0\.2 : 1:2/.source,
        ),
      );
      assert.match(
        text,
        new RegExp(
          /table ip6 vpnpanel_shape \{\n\s+map limited \{\n\s+type ipv6_addr : classid\n/.source +
            /\s+elements = \{ fd3a::2 : 1:2 \}/.source,
        ),
      );
      for (const rule of [
        'oifname "vp1" meta priority set ip6 daddr map @limited',
        'oifname "vp1s" meta priority set ip6 saddr map @limited',
      ])
        assert.ok(script.includes(`    ${rule}`), rule);
      assert.equal(new Set(inputsOf(runner, BATCH)[0]?.filter((l) => l.startsWith('class replace'))).size, 4);
    },
  );

  test('the host holding both entries: nothing written; the drift check sees an IPv6 entry or table go', async () => {
    const want = [dual(A, '10.128.0.2', A6, 2000)];
    const runner = shapedDual();
    const driver = driverOn(runner);
    await driver.setPeers(1, want);
    assert.deepEqual(runner.lines(isWrite), []);
    assert.deepEqual(await driver.inspect(SPEC_OF_SERVER_1, want).then(shapingOnly), []);

    assert.deepEqual(await driverOn(shapedDual([])).inspect(SPEC_OF_SERVER_1, want).then(shapingOnly), [
      `speed limit of ${A6}: no map entry`,
    ]);
    assert.deepEqual(
      await driverOn(shapedDual([['fd3a::9', '1:2']]))
        .inspect(SPEC_OF_SERVER_1, want)
        .then(shapingOnly),
      [`speed limit of ${A6}: no map entry`, 'map entry fd3a::9 is of no limited peer'],
    );
    const gone = shapedDual().on('[vp-s1] nft list table ip6 vpnpanel_shape', { exitCode: 1 });
    assert.deepEqual(await driverOn(gone).inspect(SPEC_OF_SERVER_1, want).then(shapingOnly), [
      'nft table ip6 vpnpanel_shape is missing',
    ]);
    gone.clear();
    await driverOn(gone).setPeers(1, want);
    assert.deepEqual(gone.lines(isWrite), [NFT], 'setPeers makes the table again; the classes are in place');
    assert.match(inputsOf(gone, NFT)[0]?.join('\n') ?? '', /^table ip6 vpnpanel_shape \{\}\ndelete table ip6/);
  });

  test('changePeers: a removed peer leaves both maps; a new IPv6 address swaps only its entry', async () => {
    const runner = shapedDual();
    const driver = driverOn(runner);
    await driver.setPeers(1, [dual(A, '10.128.0.2', A6, 2000)]);
    runner.clear();
    await driver.changePeers(1, [dual(A, '10.128.0.2', 'fd3a::7', 2000)], []);
    assert.deepEqual(runner.lines(isWrite), [`wg set vp1 peer ${A} allowed-ips 10.128.0.2/32,fd3a::7/128`, NFT]);
    assert.deepEqual(inputsOf(runner, NFT), [
      [
        'add element ip6 vpnpanel_shape limited { fd3a::2 : 1:2 }',
        'delete element ip6 vpnpanel_shape limited { fd3a::2 }',
        'add element ip6 vpnpanel_shape limited { fd3a::7 : 1:2 }',
      ],
    ]);
    runner.clear();
    await driver.changePeers(1, [], [A]);
    assert.deepEqual(inputsOf(runner, NFT), [
      [
        'add element ip vpnpanel_shape limited { 10.128.0.2 : 1:2 }',
        'add element ip6 vpnpanel_shape limited { fd3a::7 : 1:2 }',
        'delete element ip vpnpanel_shape limited { 10.128.0.2 }',
        'delete element ip6 vpnpanel_shape limited { fd3a::7 }',
      ],
    ]);
  });

  test('no limit left: both tables go in one transaction', async () => {
    const runner = shapedDual();
    await driverOn(runner).setPeers(1, [dual(A, '10.128.0.2', A6, 0)]);
    assert.deepEqual(inputsOf(runner, NFT), [['delete table ip vpnpanel_shape', 'delete table ip6 vpnpanel_shape']]);
  });

  test('a limited peer whose IPv6 allowed ip is a prefix is refused', async () => {
    const runner = shapedHost([]);
    const limited = { ...peer(A, '10.128.0.2', 2000), allowedIp6: 'fd3a::/64' };
    await assert.rejects(
      driverOn(runner).setPeers(1, [limited]),
      /a speed limit needs a single IPv6 address, not fd3a::\/64/,
    );
  });
});

/** Server 1's spec for inspect(); the shaping tests read only what the shaper says of it. */
const SPEC_OF_SERVER_1: ServerSpec = {
  serverId: 1,
  privateKey: SERVER_KEY.privateKey,
  listenPort: 51820,
  address: '10.128.0.1/24',
  mtu: 1420,
};

/** The drift check's lines about speed limits (the scripted host has no interface, veth or isolation tables). */
function shapingOnly(lines: string[]): string[] {
  return lines.filter((l) => /speed limit|map entry|vpnpanel_shape|class 1:/.test(l));
}

// ---------------------------------------------------------------------------------------------
// (b) As root: the driver on a real host namespace (wireguard-go), 120 peers in a /16, real tc and
// nft. A runner that records every command (and its input) on top of ExecRunner shows which peers a
// change names. Everything lives in namespaces of this file's prefix `r…` and is removed after.
// ---------------------------------------------------------------------------------------------

/** Runs commands for real and records them. */
class TappedRunner implements CommandRunner {
  readonly calls: { line: string; input: string }[] = [];
  readonly #inner = new ExecRunner(CHILD_LOG_DIR);

  run(cmd: string, args: readonly string[], opts?: RunOptions): Promise<RunResult> {
    this.calls.push({ line: [cmd, ...args].join(' '), input: opts?.input ?? '' });
    return this.#inner.run(cmd, args, opts);
  }

  start(cmd: string, args: readonly string[], opts?: StartOptions): ChildHandle {
    return this.#inner.start(cmd, args, opts);
  }

  /** Calls that change the host (every read is a `show`, `list` or `dump`), with their inputs. */
  writes(): string[] {
    return this.calls.filter((c) => !/ (show|list|dump)\b/.test(c.line)).map((c) => `${c.line}\n${c.input}`);
  }
}

describe('speed limits: real tc and nft (root)', { skip: requireRoot([['tc', 'iproute2']]) }, () => {
  let lab: NetLab | undefined;
  const runner = new TappedRunner();
  let driver: WireGuardDriver | undefined;
  const serverId = 1;
  const spec: ServerSpec = {
    serverId,
    privateKey: generateKeyPair().privateKey,
    listenPort: 40_000 + Math.floor(Math.random() * 20_000),
    address: '10.91.0.1/16',
    mtu: 1420,
  };
  const client = generateKeyPair();
  /**
   * 120 peers over several /24s of the /16; every other one limited, to 1,000-60,000 kbit/s. The first
   * is the real client.
   */
  const peers: PeerSpec[] = Array.from({ length: 120 }, (_, i) => ({
    publicKey: i === 0 ? client.publicKey : generateKeyPair().publicKey,
    allowedIp: `10.91.${Math.floor(i / 50)}.${(i % 50) + 2}/32`,
    speedLimitKbps: i % 2 === 0 ? 1000 * (i + 1) : 0,
  }));

  const need = <T>(value: T | undefined, what: string): T => {
    assert.ok(value !== undefined, `needs ${what}`);
    return value;
  };
  const names = () => need(driver, 'the driver').names(serverId);
  const bare = (p: PeerSpec): string => p.allowedIp.replace(/\/32$/, '');
  const idOf = (p: PeerSpec): string => `1:${classMinor(bare(p)).toString(16)}`;

  /** Class id → rate as tc prints it, on a device of the server namespace (read here, not by the code under test). */
  async function classes(dev: string): Promise<Map<string, string>> {
    const out = await run('tc', ['-n', names().netns, 'class', 'show', 'dev', dev]);
    return new Map(
      [...out.matchAll(/^class htb (\S+) .*?\brate (\S+) ceil \2/gm)].map((m) => [m[1] ?? '', m[2] ?? '']),
    );
  }

  /** Address → class id of the nft map, from nft's JSON. */
  async function mapEntries(): Promise<Map<string, string>> {
    const out = await run('ip', [
      'netns',
      'exec',
      names().netns,
      'nft',
      '-j',
      'list',
      'map',
      'ip',
      'vpnpanel_shape',
      'limited',
    ]);
    const parsed: unknown = JSON.parse(out);
    const entries = new Map<string, string>();
    const items =
      typeof parsed === 'object' && parsed !== null && 'nftables' in parsed && Array.isArray(parsed.nftables)
        ? parsed.nftables
        : [];
    for (const item of items) {
      const elem: unknown = item?.map?.elem;
      for (const pair of Array.isArray(elem) ? elem : [])
        if (Array.isArray(pair)) entries.set(String(pair[0]), String(pair[1]));
    }
    return entries;
  }

  /**
   * The host holds exactly the limits of `list`: a class per limited peer on both devices, at its rate,
   * and its map entry.
   */
  async function assertShaping(list: readonly PeerSpec[], message: string): Promise<void> {
    const limited = list.filter((p) => p.speedLimitKbps > 0);
    const expected = new Map(limited.map((p) => [idOf(p), printedRate(p.speedLimitKbps)]));
    assert.deepEqual(await classes(names().iface), expected, `${message}: download classes`);
    assert.deepEqual(await classes(names().vethServer), expected, `${message}: upload classes`);
    assert.deepEqual(await mapEntries(), new Map(limited.map((p) => [bare(p), idOf(p)])), `${message}: map`);
  }

  async function bytesSent(dev: string, id: string): Promise<number> {
    const out = await run('tc', ['-n', names().netns, '-s', 'class', 'show', 'dev', dev, 'classid', id]);
    return Number(/Sent (\d+) bytes/.exec(out)?.[1] ?? 0);
  }

  before(async () => {
    lab = await NetLab.create(await unusedPrefix('r'));
    driver = new WireGuardDriver({
      runner,
      namePrefix: lab.prefix,
      hostNetns: lab.hostNs,
      implementation: 'wireguard-go',
    });
    await driver.up(spec);
  });

  after(async () => {
    await driver?.down(serverId).catch(() => undefined);
    await driver?.close();
    const problems = (await lab?.cleanup()) ?? [];
    assert.deepEqual(problems, [], 'cleanup left nothing behind');
  });

  test(
    'setPeers applies the limits; ' +
      'traffic of a limited peer goes through its classes; the same call again writes nothing',
    async (t) => {
      const d = need(driver, 'the driver');
      const l = need(lab, 'the lab');
      let startMs = performance.now();
      await d.setPeers(serverId, peers);
      t.diagnostic(`setPeers: 120 peers, 60 limited: ${(performance.now() - startMs).toFixed(0)} ms`);
      await assertShaping(peers, 'after setPeers');

      const n = names();
      // A host beyond the uplink: client isolation keeps clients off the host namespace's own addresses.
      const outside = '198.51.100.9';
      await l.addInternetAddress(outside);
      const wg = await l.connectClient({
        serverPublicKey: publicKeyOf(spec.privateKey),
        endpoint: l.hostIp,
        port: spec.listenPort,
        privateKey: client.privateKey,
        address: '10.91.0.2/16',
        allowedIps: ['10.91.0.0/16', `${outside}/32`],
      });
      await run('ip', ['-n', l.clientNs, 'route', 'add', `${outside}/32`, 'dev', wg.iface]);
      const first = need(peers[0], 'the client peer');
      assert.ok(await l.waitForPing(outside), 'the client reaches a host beyond the uplink through the tunnel');
      assert.ok((await bytesSent(n.iface, idOf(first))) > 0, 'replies to the client went through its download class');
      assert.ok(
        (await bytesSent(n.vethServer, idOf(first))) > 0,
        'its pings toward the uplink went through its upload class',
      );
      await wg.close();

      runner.calls.length = 0;
      startMs = performance.now();
      await d.setPeers(serverId, peers);
      t.diagnostic(`setPeers again, nothing to change: ${(performance.now() - startMs).toFixed(0)} ms`);
      assert.deepEqual(runner.writes(), [], 'nothing written');
      await assertShaping(peers, 'after the same setPeers');
    },
  );

  test('changing, adding and removing limits names only those peers; the others keep their classes', async () => {
    const d = need(driver, 'the driver');
    const next = peers
      .map((p, i) =>
        i === 2
          ? { ...p, speedLimitKbps: 777 }
          : i === 4
            ? { ...p, speedLimitKbps: 0 }
            : i === 5
              ? { ...p, speedLimitKbps: 5000 }
              : p,
      )
      .filter((_, i) => i !== 6);
    runner.calls.length = 0;
    await d.setPeers(serverId, next);
    const touched = [peers[2], peers[4], peers[5], peers[6]].map((p) => need(p, 'a peer'));
    const named = runner.writes().join('\n');
    for (const p of peers.filter((x) => !touched.includes(x))) {
      assert.ok(
        !new RegExp(`classid ${idOf(p)}\\b|\\b${bare(p).replaceAll('.', '\\.')}\\b`).test(named),
        `${bare(p)} is not named`,
      );
    }
    await assertShaping(next, 'after the changes');

    // The incremental path the panel uses for one device: one tc batch, nothing read; the peer itself goes
    // over wireguard-go's UAPI socket, no command.
    runner.calls.length = 0;
    const changed = { ...need(next[0], 'the client peer'), speedLimitKbps: 1500 };
    await d.changePeers(serverId, [changed], []);
    assert.deepEqual(
      runner.calls.map((c) => c.line.split(' -batch')[0]),
      [`tc -n ${names().netns} -force`],
    );
    const removedKey = need(next[2], 'a limited peer').publicKey;
    await d.changePeers(serverId, [], [removedKey]);
    const final = [changed, ...next.slice(1)].filter((p) => p.publicKey !== removedKey);
    await assertShaping(final, 'after changePeers');
    peers.splice(0, peers.length, ...final);
  });

  test(
    'lost state comes back: wireguard-go restarted (interface and its classes gone), ' + 'the table and a root deleted',
    async (t) => {
      const d = need(driver, 'the driver');
      const l = need(lab, 'the lab');
      const n = names();
      const pids = [...l.wireguardGoProcesses()].filter(([, name]) => name === n.iface).map(([pid]) => pid);
      assert.equal(pids.length, 1, 'the server has its wireguard-go');
      process.kill(need(pids[0], 'its pid'), 'SIGKILL');
      // The interface and its download classes go with the process.
      await waitFor(
        'the interface to go',
        async () => ((await run('ip', ['-n', n.netns, 'link', 'show'])).includes(`${n.iface}:`) ? undefined : true),
        5000,
        50,
      );

      // The resync after a restart: up() makes the interface again, setPeers puts peers and limits back.
      const startMs = performance.now();
      await d.up(spec);
      await d.setPeers(serverId, peers);
      t.diagnostic(`up() + setPeers after wireguard-go died: ${(performance.now() - startMs).toFixed(0)} ms`);
      await assertShaping(peers, 'after the resync');

      await run('ip', ['netns', 'exec', n.netns, 'nft', 'delete', 'table', 'ip', 'vpnpanel_shape']);
      await run('tc', ['-n', n.netns, 'qdisc', 'del', 'dev', n.vethServer, 'root']);
      await d.setPeers(serverId, peers);
      await assertShaping(peers, 'after the table and the upload root were deleted');
    },
  );

  test("up() that makes the interface again (new MTU) puts its peers' limits back by itself", async () => {
    const d = need(driver, 'the driver');
    const state = await d.up({ ...spec, mtu: 1380 });
    assert.equal(state.peerCount, peers.length);
    await assertShaping(peers, 'after up() with a new MTU, before any setPeers');
    // A new driver (a restarted agent) knows nothing and reads the limits back from the host.
    const restarted = new WireGuardDriver({
      runner,
      namePrefix: need(lab, 'the lab').prefix,
      hostNetns: need(lab, 'the lab').hostNs,
      implementation: 'wireguard-go',
    });
    try {
      await restarted.up({ ...spec, mtu: 1400 });
      await assertShaping(peers, "after a restarted driver's up() with a new MTU");
    } finally {
      await restarted.close();
    }
  });

  test('no limits left: no class, root or table remains', async () => {
    const d = need(driver, 'the driver');
    // The restarted driver's wireguard-go stopped with it: this driver makes the interface again.
    await d.up(spec);
    await d.setPeers(
      serverId,
      peers.map((p) => ({ ...p, speedLimitKbps: 0 })),
    );
    const n = names();
    for (const dev of [n.iface, n.vethServer])
      assert.doesNotMatch(await run('tc', ['-n', n.netns, 'qdisc', 'show', 'dev', dev]), /htb|bfifo/, dev);
    assert.doesNotMatch(await run('ip', ['netns', 'exec', n.netns, 'nft', 'list', 'tables']), /vpnpanel_shape/);
  });
});
