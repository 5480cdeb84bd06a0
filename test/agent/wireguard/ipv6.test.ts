/**
 * The wireguard driver's IPv6 (docs/dataplane.md, "IPv6") against a RecordingRunner: the commands it issues for a
 * server's address6, the veth's IPv6, the routes, NAT66, the IPv6 isolation rules and speed limits, what the drift
 * check sees of each, and what the next up() issues to put each back. Server 1 of prefix `vp`, host namespace `hh`,
 * as in driver.test.ts. The real thing runs in test/e2e/ipv6-wireguard.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Agent } from '../../../src/agent/agent.ts';
import { RecordingRunner } from '../../../src/agent/commands.ts';
import type { PeerSpec, ServerSpec } from '../../../src/agent/driver.ts';
import { hostTableText, type IsolationPlace, serverTableText } from '../../../src/agent/isolation.ts';
import { serverNames } from '../../../src/agent/wireguard/names.ts';
import { generateKeyPair } from '../../../src/domain/wireguard-keys.ts';
import { NO_LIMITS } from '../../support/agent-peers.ts';
import { ISOLATED, ISOLATION_PLACE } from '../../support/isolation.ts';
import { driverOn, emptyHost, isChange } from '../../support/recorded-host.ts';

const SERVER_KEY = generateKeyPair();
const [A, B] = [generateKeyPair().publicKey, generateKeyPair().publicKey];
const N = serverNames('vp', 1);
const SPEC: ServerSpec = {
  serverId: 1,
  privateKey: SERVER_KEY.privateKey,
  listenPort: 51820,
  address: '10.128.0.1/24',
  mtu: 1420,
  address6: 'FD3A:1B2C:4D5E:1:0::1/64',
};
/** SPEC's address6 as `ip` prints it. */
const ADDRESS6 = 'fd3a:1b2c:4d5e:1::1/64';
const PLACE6: IsolationPlace = { ...ISOLATION_PLACE, serverIp6: 'fd3a:1b2c:4d5e:1::1' };
const VETH_HOST6 = `${N.hostIp6}/126`;
const VETH_SERVER6 = `${N.serverIp6}/126`;
/** What every server with IPv6 gets first: the veth's addresses and forwarding in its namespace. */
const VETH_STEPS = [
  `ip -n hh addr add ${VETH_HOST6} dev vp1h nodad`,
  `ip -n vp-s1 addr add ${VETH_SERVER6} dev vp1s nodad`,
  '[vp-s1] sysctl -w net.ipv6.conf.all.forwarding=1',
];
const UPLINK_ROUTE = { dst: 'default', gateway: '2001:db8:f::2', dev: 'eth0', protocol: 'boot', flags: [] };

type Addr = string;
const link = (ifname: string, mtu: number, addrs: readonly Addr[]) => ({
  ifname,
  mtu,
  flags: ['UP'],
  addr_info: [
    ...addrs.map((a) => {
      const [local = '', prefix = ''] = a.split('/');
      return { family: local.includes(':') ? 'inet6' : 'inet', local, prefixlen: Number(prefix), scope: 'global' };
    }),
    // The kernel's own link-local address: never the driver's to add or remove.
    { family: 'inet6', local: 'fe80::1234', prefixlen: 64, scope: 'link' },
  ],
});

interface HostState {
  /** The host namespace's IPv6 default routes. */
  uplink: readonly object[];
  wg6: readonly Addr[];
  vethServer6: readonly Addr[];
  vethHost6: readonly Addr[];
  serverRoute: readonly object[];
  hostRoutes: readonly object[];
  serverForwarding: boolean;
  hostForwarding: boolean;
  serverTables: readonly string[];
  hostTables: readonly string[];
  place: IsolationPlace;
  peers: readonly (readonly [string, string])[];
}

/** Server 1 up with IPv6 through NAT66, as the driver leaves it. */
const NAT66: HostState = {
  uplink: [UPLINK_ROUTE],
  wg6: [ADDRESS6],
  vethServer6: [VETH_SERVER6],
  vethHost6: [VETH_HOST6],
  serverRoute: [{ dst: 'default', gateway: N.hostIp6, dev: 'vp1s', flags: [] }],
  hostRoutes: [],
  serverForwarding: true,
  hostForwarding: true,
  serverTables: ['ip vpnpanel', 'inet vpnpanel_iso', 'ip6 vpnpanel'],
  hostTables: ['ip vpnpanel_vp1', 'inet vpnpanel_iso_vp1', 'ip6 vpnpanel_vp1'],
  place: PLACE6,
  peers: [],
};
const ROUTED_ROUTE = { dst: 'fd3a:1b2c:4d5e:1::/64', gateway: N.serverIp6, protocol: 'boot', flags: [] };
/** The same server routed (routed6): no NAT66, a host route to its prefix. */
const ROUTED: HostState = {
  ...NAT66,
  serverTables: ['ip vpnpanel', 'inet vpnpanel_iso'],
  hostTables: ['ip vpnpanel_vp1', 'inet vpnpanel_iso_vp1'],
  hostRoutes: [ROUTED_ROUTE, { dst: `${N.hostIp6.replace(/1$/, '0')}/126`, protocol: 'kernel', flags: [] }],
};

function hostOf(state: HostState): RecordingRunner {
  const head = `${SERVER_KEY.privateKey}\t${SERVER_KEY.publicKey}\t51820\toff`;
  const dump = [head, ...state.peers.map(([key, ips]) => `${key}\t(none)\t(none)\t${ips}\t0\t0\t0\toff`)];
  const json = (value: unknown) => ({ stdout: JSON.stringify(value) });
  const flag = (on: boolean) => ({ stdout: on ? '1\n' : '0\n' });
  return new RecordingRunner()
    .on('ip netns list', { stdout: 'vp-s1 (id: 1)\nhh (id: 0)\n' })
    .on(
      'ip -n vp-s1 -j addr show',
      json([
        link('lo', 65536, ['127.0.0.1/8']),
        link('vp1', 1420, ['10.128.0.1/24', ...state.wg6]),
        link('vp1s', 1500, ['169.254.1.6/30', ...state.vethServer6]),
      ]),
    )
    .on(
      'ip -n hh -j addr show',
      json([link('lo', 65536, []), link('vp1h', 1500, ['169.254.1.5/30', ...state.vethHost6])]),
    )
    .on('ip -n vp-s1 -j route show default', json([{ dst: 'default', gateway: '169.254.1.5', dev: 'vp1s', flags: [] }]))
    .on('ip -n vp-s1 -j -6 route show default', json(state.serverRoute))
    .on('ip -n hh -j -6 route show default', json(state.uplink))
    .on('ip -n hh -j -6 route show dev vp1h', json(state.hostRoutes))
    .on('wg show vp1 dump', { stdout: `${dump.join('\n')}\n` })
    .on('[vp-s1] nft list tables', { stdout: state.serverTables.map((t) => `table ${t}\n`).join('') })
    .on('[hh] nft list tables', { stdout: state.hostTables.map((t) => `table ${t}\n`).join('') })
    .on('[vp-s1] nft list table inet vpnpanel_iso', { stdout: serverTableText(state.place, ISOLATED) })
    .on('[hh] nft list table inet vpnpanel_iso_vp1', { stdout: hostTableText(state.place) })
    .on(/sysctl -n net.ipv4.ip_forward$/, { stdout: '1\n' })
    .on('[vp-s1] sysctl -n net.ipv6.conf.all.forwarding', flag(state.serverForwarding))
    .on('[hh] sysctl -n net.ipv6.conf.all.forwarding', flag(state.hostForwarding));
}

/** A host with nothing of server 1 on it whose host namespace has `uplink` as its IPv6 default routes. */
function emptyHostWith(uplink: readonly object[]): RecordingRunner {
  return emptyHost().on('ip -n hh -j -6 route show default', { stdout: JSON.stringify(uplink) });
}

/** The commands of `runner` that change the host, from the first that touches IPv6 beyond the interface. */
function ipv6Steps(runner: RecordingRunner): string[] {
  const lines = runner.lines(isChange);
  const first = lines.findIndex((l) => /nodad|ipv6|-6 route|accept_ra/.test(l));
  return first === -1 ? [] : lines.slice(first);
}

const inputOf = (runner: RecordingRunner, index: number): string =>
  runner.calls.filter((c) => c.line.endsWith('nft -f -'))[index]?.input ?? '';

describe('wireguard driver: a server with IPv6 (recorded commands)', () => {
  test(
    'with an IPv6 default route on the host: address6, the veth ' + '/126, forwarding, a default route, NAT66',
    async () => {
      const runner = emptyHostWith([UPLINK_ROUTE]);
      const state = await driverOn(runner).up(SPEC);
      assert.equal(state.ipv6, 'nat66');
      const lines = runner.lines(isChange);
      assert.ok(
        lines.includes(`ip -n vp-s1 addr add ${ADDRESS6} dev vp1`),
        'address6 on the interface, as ip prints it',
      );
      assert.ok(
        lines.indexOf(`ip -n vp-s1 addr add ${ADDRESS6} dev vp1`) < lines.indexOf('ip -n vp-s1 link set vp1 up'),
        'before the interface comes up',
      );
      assert.deepEqual(ipv6Steps(runner), [
        ...VETH_STEPS,
        '[hh] sysctl -w net.ipv6.conf.all.forwarding=1',
        `ip -n vp-s1 -6 route replace default via ${N.hostIp6} dev vp1s`,
        '[vp-s1] nft -f -',
        '[hh] nft -f -',
      ]);
      assert.match(
        inputOf(runner, 4),
        /^table ip6 vpnpanel \{\}\ndelete table ip6 vpnpanel\n.*oifname "vp1s" masquerade/s,
      );
      const hostNat = new RegExp(
        `^table ip6 vpnpanel_vp1 \\{\\}.*ip6 saddr ${N.serverIp6} oifname != "vp1h" masquerade`,
        's',
      );
      assert.match(inputOf(runner, 5), hostNat);
      assert.match(inputOf(runner, 0), /ip6 daddr fd3a:1b2c:4d5e:1::1 icmpv6 type echo-request accept/);
      assert.match(inputOf(runner, 1), /iifname "vp1h" icmpv6 type \{ nd-neighbor-solicit, nd-neighbor-advert \}/);
    },
  );

  test('without one: tunnel_only, nothing on the host namespace, no default route, no NAT66', async () => {
    const runner = emptyHostWith([]);
    const state = await driverOn(runner).up(SPEC);
    assert.equal(state.ipv6, 'tunnel_only');
    assert.deepEqual(ipv6Steps(runner), ['[vp-s1] sysctl -w net.ipv6.conf.all.forwarding=1']);
    assert.ok(runner.lines(isChange).includes(`ip -n vp-s1 addr add ${ADDRESS6} dev vp1`), 'the address in the tunnel');
  });

  test('a kernel without IPv6 (ipv6.disable=1) runs the server on IPv4 and says so: off', async () => {
    const runner = emptyHostWith([UPLINK_ROUTE]).on('test -d /proc/sys/net/ipv6', { exitCode: 1 });
    const driver = driverOn(runner);
    assert.equal((await driver.up(SPEC)).ipv6, 'off');
    assert.ok(!runner.lines(isChange).some((l) => l.includes(':')), runner.lines(isChange).join('\n'));
    assert.doesNotMatch(inputOf(runner, 0), /ip6 daddr fd3a/);
    assert.equal(runner.lines().filter((l) => l.startsWith('test -d')).length, 1, 'read once');
    await driver.up(SPEC);
    assert.equal(runner.lines().filter((l) => l.startsWith('test -d')).length, 1, 'and remembered');
  });

  test('routed6: a route to the prefix over the veth instead of NAT66', async () => {
    const runner = emptyHostWith([UPLINK_ROUTE]);
    const state = await driverOn(runner).up({ ...SPEC, routed6: true });
    assert.equal(state.ipv6, 'routed');
    assert.deepEqual(ipv6Steps(runner), [
      ...VETH_STEPS,
      '[hh] sysctl -w net.ipv6.conf.all.forwarding=1',
      `ip -n vp-s1 -6 route replace default via ${N.hostIp6} dev vp1s`,
      `ip -n hh -6 route replace fd3a:1b2c:4d5e:1::/64 via ${N.serverIp6} dev vp1h`,
    ]);
  });

  test('a default route learned from router advertisements keeps coming: accept_ra 2 before forwarding', async () => {
    const runner = emptyHostWith([{ ...UPLINK_ROUTE, protocol: 'ra' }]);
    await driverOn(runner).up(SPEC);
    const steps = ipv6Steps(runner);
    const ra = steps.indexOf('[hh] sysctl -w net.ipv6.conf.eth0.accept_ra=2');
    assert.ok(ra !== -1 && ra < steps.indexOf('[hh] sysctl -w net.ipv6.conf.all.forwarding=1'), steps.join('\n'));
  });

  test('a host that matches only reads; a server without IPv6 reads nothing of it', async () => {
    for (const [state, spec] of [
      [NAT66, SPEC],
      [ROUTED, { ...SPEC, routed6: true }],
    ] as const) {
      const runner = hostOf(state);
      assert.equal((await driverOn(runner).up(spec)).ipv6, spec.routed6 === true ? 'routed' : 'nat66');
      assert.deepEqual(runner.lines(isChange), []);
      assert.deepEqual(await driverOn(runner).inspect(spec, []), []);
    }
    const plain = hostOf({
      ...NAT66,
      wg6: [],
      vethServer6: [],
      vethHost6: [],
      serverTables: ['ip vpnpanel', 'inet vpnpanel_iso'],
      hostTables: ['ip vpnpanel_vp1', 'inet vpnpanel_iso_vp1'],
      place: ISOLATION_PLACE,
    });
    const { address6: _, ...withoutIpv6 } = SPEC;
    assert.equal((await driverOn(plain).up(withoutIpv6)).ipv6, 'off');
    assert.deepEqual(await driverOn(plain).inspect(withoutIpv6, []), []);
    assert.ok(!plain.lines().some((l) => /-6 |ipv6/.test(l)), 'no IPv6 read: it costs nothing');
  });

  test('modes change in place: nat66 → tunnel_only → routed → off remove what the new one does not use', async () => {
    const lost = hostOf({ ...NAT66, uplink: [] });
    assert.equal((await driverOn(lost).up(SPEC)).ipv6, 'tunnel_only');
    assert.deepEqual(lost.lines(isChange), [
      `ip -n hh addr del ${VETH_HOST6} dev vp1h`,
      `ip -n vp-s1 addr del ${VETH_SERVER6} dev vp1s`,
      'ip -n vp-s1 -6 route del default',
      '[vp-s1] nft delete table ip6 vpnpanel',
      '[hh] nft delete table ip6 vpnpanel_vp1',
    ]);

    const toRouted = hostOf(NAT66);
    await driverOn(toRouted).up({ ...SPEC, routed6: true });
    assert.deepEqual(toRouted.lines(isChange), [
      `ip -n hh -6 route replace fd3a:1b2c:4d5e:1::/64 via ${N.serverIp6} dev vp1h`,
      '[vp-s1] nft delete table ip6 vpnpanel',
      '[hh] nft delete table ip6 vpnpanel_vp1',
    ]);

    const toNat = hostOf(ROUTED);
    await driverOn(toNat).up(SPEC);
    assert.deepEqual(toNat.lines(isChange), [
      'ip -n hh -6 route del fd3a:1b2c:4d5e:1::/64 dev vp1h',
      '[vp-s1] nft -f -',
      '[hh] nft -f -',
    ]);

    const off = hostOf(ROUTED);
    const { address6: _, ...withoutIpv6 } = SPEC;
    assert.equal((await driverOn(off).up(withoutIpv6)).ipv6, 'off');
    assert.deepEqual(off.lines(isChange), [
      '[vp-s1] nft -f -',
      '[hh] nft -f -',
      `ip -n vp-s1 addr del ${ADDRESS6} dev vp1`,
      `ip -n hh addr del ${VETH_HOST6} dev vp1h`,
      `ip -n vp-s1 addr del ${VETH_SERVER6} dev vp1s`,
      'ip -n vp-s1 -6 route del default',
      'ip -n hh -6 route del fd3a:1b2c:4d5e:1::/64 dev vp1h',
    ]);
    assert.doesNotMatch(inputOf(off, 0), /ip6 daddr fd3a/, 'the isolation rules of its IPv6 address go');
  });

  const drifts: [string, Partial<HostState>, RegExp | string, string][] = [
    [
      "the interface's IPv6 address",
      { wg6: [] },
      `link vp1 has IPv6 addresses (none), not ${ADDRESS6}`,
      `ip -n vp-s1 addr add ${ADDRESS6} dev vp1`,
    ],
    [
      'an IPv6 address added to the interface',
      { wg6: [ADDRESS6, 'fd00::9/64'] },
      `link vp1 has IPv6 addresses ${ADDRESS6},fd00::9/64, not ${ADDRESS6}`,
      'ip -n vp-s1 addr del fd00::9/64 dev vp1',
    ],
    [
      "the server end's veth address",
      { vethServer6: [] },
      `uplink vp1s lacks its IPv6 address ${N.serverIp6}`,
      `ip -n vp-s1 addr add ${VETH_SERVER6} dev vp1s nodad`,
    ],
    [
      "the host end's veth address",
      { vethHost6: [] },
      `uplink vp1h lacks its IPv6 address ${N.hostIp6}`,
      `ip -n hh addr add ${VETH_HOST6} dev vp1h nodad`,
    ],
    [
      "the server's IPv6 default route",
      { serverRoute: [] },
      `IPv6 default route of namespace vp-s1 is none, not via ${N.hostIp6} vp1s`,
      `ip -n vp-s1 -6 route replace default via ${N.hostIp6} dev vp1s`,
    ],
    [
      "IPv6 forwarding in the server's namespace",
      { serverForwarding: false },
      'IPv6 forwarding is off in namespace vp-s1',
      '[vp-s1] sysctl -w net.ipv6.conf.all.forwarding=1',
    ],
    [
      'IPv6 forwarding in the host namespace',
      { hostForwarding: false },
      'IPv6 forwarding is off in the host namespace',
      '[hh] sysctl -w net.ipv6.conf.all.forwarding=1',
    ],
    [
      "the server's NAT66 table",
      { serverTables: ['ip vpnpanel', 'inet vpnpanel_iso'] },
      'nft table ip6 vpnpanel is missing from namespace vp-s1',
      '[vp-s1] nft -f -',
    ],
    [
      "the host's NAT66 table",
      { hostTables: ['ip vpnpanel_vp1', 'inet vpnpanel_iso_vp1'] },
      'nft table ip6 vpnpanel_vp1 is missing from the host namespace',
      '[hh] nft -f -',
    ],
    [
      'a route planted over the veth',
      { hostRoutes: [{ ...ROUTED_ROUTE, dst: '2001:db8:66::/64' }] },
      'the host namespace routes 2001:db8:66::/64 over vp1h, which IPv6 nat66 does not use',
      'ip -n hh -6 route del 2001:db8:66::/64 dev vp1h',
    ],
    [
      "the isolation rules of the server's IPv6 address",
      { place: ISOLATION_PLACE },
      'table inet vpnpanel_iso in vp-s1 differs from the expected rules',
      '[vp-s1] nft -f -',
    ],
  ];
  for (const [what, change, line, repair] of drifts) {
    test(`the drift check sees ${what} lost or changed, and up() puts it back`, async () => {
      const runner = hostOf({ ...NAT66, ...change });
      const found = await driverOn(runner).inspect(SPEC, []);
      if (typeof line === 'string') assert.ok(found.includes(line), `${line} in ${JSON.stringify(found)}`);
      else
        assert.ok(
          found.some((f) => line.test(f)),
          JSON.stringify(found),
        );
      runner.clear();
      await driverOn(runner).up(SPEC);
      assert.ok(runner.lines(isChange).includes(repair), `${repair} in ${JSON.stringify(runner.lines(isChange))}`);
    });
  }

  test("the drift check sees a routed server's host route lost", async () => {
    const runner = hostOf({ ...ROUTED, hostRoutes: [] });
    const spec = { ...SPEC, routed6: true };
    assert.deepEqual(await driverOn(runner).inspect(spec, []), [
      'the host namespace has no route to fd3a:1b2c:4d5e:1::/64 over vp1h',
    ]);
  });

  test(
    'the drift check sees the host lose its IPv6 uplink (and ' + 'the next up() makes the server tunnel_only)',
    async () => {
      const runner = hostOf({ ...NAT66, uplink: [] });
      assert.deepEqual(await driverOn(runner).inspect(SPEC, []), [
        `uplink vp1h has IPv6 address ${N.hostIp6}, which IPv6 tunnel_only does not use`,
        `uplink vp1s has IPv6 address ${N.serverIp6}, which IPv6 tunnel_only does not use`,
        `IPv6 default route of namespace vp-s1 is via ${N.hostIp6} vp1s, not none (IPv6 tunnel_only)`,
        'nft table ip6 vpnpanel is in namespace vp-s1, but IPv6 is tunnel_only, not nat66',
        'nft table ip6 vpnpanel_vp1 is in the host namespace, but IPv6 is tunnel_only, not nat66',
      ]);
    },
  );

  test('a malformed address6 is refused before anything is touched', async () => {
    const runner = emptyHostWith([]);
    await assert.rejects(
      driverOn(runner).up({ ...SPEC, address6: '10.0.0.1/24' }),
      /address6 "10\.0\.0\.1\/24" is not an IPv6/,
    );
    assert.deepEqual(runner.lines(isChange), []);
  });
});

describe('wireguard driver: peers with IPv6 addresses (recorded commands)', () => {
  const dual: PeerSpec = {
    publicKey: A,
    allowedIp: '10.128.0.2/32',
    allowedIp6: 'FD3A:1B2C:4D5E:1:0:0:0:2/128',
    speedLimitKbps: 0,
  };
  const peers: PeerSpec[] = [dual, { publicKey: B, allowedIp: '10.128.0.3/32', speedLimitKbps: 0 }];

  test('allowed-ips holds both addresses; the host printing them in another order is no difference', async () => {
    const empty = hostOf(NAT66);
    await driverOn(empty).setPeers(1, peers);
    const sorted = [
      [A, '10.128.0.2/32,fd3a:1b2c:4d5e:1::2/128'],
      [B, '10.128.0.3/32'],
    ].sort(([x = ''], [y = '']) => (x < y ? -1 : 1));
    assert.deepEqual(empty.lines(isChange), [
      `wg set vp1 ${sorted.map(([k, ip]) => `peer ${k} allowed-ips ${ip}`).join(' ')}`,
    ]);

    const same = hostOf({
      ...NAT66,
      peers: [
        [A, 'fd3a:1b2c:4d5e:1::2/128,10.128.0.2/32'],
        [B, '10.128.0.3/32'],
      ],
    });
    await driverOn(same).setPeers(1, peers);
    assert.deepEqual(same.lines(isChange), []);
    assert.deepEqual(await driverOn(same).inspect(SPEC, peers), []);
  });

  test('a lost or changed IPv6 allowed ip is drift, and setPeers puts it back', async () => {
    const runner = hostOf({
      ...NAT66,
      peers: [
        [A, '10.128.0.2/32'],
        [B, '10.128.0.3/32,fd3a:1b2c:4d5e:1::9/128'],
      ],
    });
    assert.deepEqual(
      (await driverOn(runner).inspect(SPEC, peers)).sort(),
      [
        `peer ${A} has allowed ips 10.128.0.2/32, not 10.128.0.2/32,fd3a:1b2c:4d5e:1::2/128`,
        `peer ${B} has allowed ips 10.128.0.3/32,fd3a:1b2c:4d5e:1::9/128, not 10.128.0.3/32`,
      ].sort(),
    );
    runner.clear();
    await driverOn(runner).setPeers(1, peers);
    assert.equal(runner.lines(isChange).length, 1);
    assert.match(
      runner.lines(isChange)[0] ?? '',
      new RegExp(`peer ${escapeRegExp(A)} allowed-ips 10\\.128\\.0\\.2/32,fd3a`),
    );
  });

  test('changePeers and the agent pass the IPv6 address on; a removed peer goes in both families at once', async () => {
    const runner = hostOf(NAT66);
    const agent = new Agent(driverOn(runner), 'test');
    await agent.applyServer({ server: SPEC, peers: [{ ...dual, deviceId: 1, limits: NO_LIMITS }] });
    assert.ok(runner.lines(isChange).some((l) => l.endsWith(`allowed-ips 10.128.0.2/32,fd3a:1b2c:4d5e:1::2/128`)));
    runner.clear();
    await driverOn(runner).changePeers(1, [], [A]);
    assert.deepEqual(runner.lines(isChange), [`wg set vp1 peer ${A} remove`]);
  });

  test('an allowed ip6 that is not IPv6 is refused and the peer left as it is', async () => {
    const runner = hostOf({ ...NAT66, peers: [[A, '10.128.0.2/32']] });
    await assert.rejects(
      driverOn(runner).setPeers(1, [{ ...dual, allowedIp6: '10.128.0.9/32' }]),
      /allowed ip6 "10\.128\.0\.9\/32" is not an IPv6 address\/prefix/,
    );
    assert.deepEqual(runner.lines(isChange), []);
  });
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}
