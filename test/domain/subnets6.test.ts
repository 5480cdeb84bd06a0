import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { deviceAddress6, lowestFreeAddress6, sameHostPart6 } from '../../src/domain/devices.ts';
import { type Ipv6Occupancy, planSubnet6 } from '../../src/domain/servers.ts';
import { ipToInt, parseSubnet } from '../../src/domain/subnets.ts';
import {
  bigIntToIpv6,
  deviceRoom6,
  firstFreeSubnet6,
  formatSubnet6,
  ipv6Networks,
  ipv6ToBigInt,
  isGlobal6,
  parseNetwork6,
  parseServerAddress6,
  type Subnet6,
  ulaPrefixOf,
} from '../../src/domain/subnets6.ts';
import { assertRefused } from '../support/refusals.ts';

const net6 = (cidr: string): Subnet6 => parseNetwork6(cidr);
const ip6 = (text: string): bigint => {
  const n = ipv6ToBigInt(text);
  assert.ok(n !== undefined, `${text} is an IPv6 address`);
  return n;
};
const ULA = net6('fd3a:1b2c:4d5e::/48');
const nothingTaken: Ipv6Occupancy = { ulaPrefix: ULA, panelSubnets: [], hostNetworks: [] };

describe('IPv6 text', () => {
  const cases: Array<[written: string, stored: string]> = [
    ['fd00::2', 'fd00::2'],
    ['FD00:0:0:0:0:0:0:2', 'fd00::2'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['::', '::'],
    ['fd3a:1b2c:4d5e:ffff::255:254', 'fd3a:1b2c:4d5e:ffff::255:254'],
    ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'],
  ];
  for (const [written, stored] of cases) {
    test(`${written} is stored as ${stored} (RFC 5952)`, () => assert.equal(bigIntToIpv6(ip6(written)), stored));
  }
  test('no IPv6 address is no number', () => {
    for (const text of ['10.0.0.1', 'fd00::2::3', 'fd00::g', '', '[fd00::2]']) {
      assert.equal(ipv6ToBigInt(text), undefined, text);
    }
  });
});

describe('the panel ULA prefix (RFC 4193)', () => {
  test('is fd00::/8 followed by the 40 random bits, a /48', () => {
    assert.equal(formatSubnet6(ulaPrefixOf(Uint8Array.from([0x3a, 0x1b, 0x2c, 0x4d, 0x5e]))), 'fd3a:1b2c:4d5e::/48');
    assert.equal(formatSubnet6(ulaPrefixOf(new Uint8Array(5))), 'fd00::/48');
    assert.equal(formatSubnet6(ulaPrefixOf(new Uint8Array(5).fill(255))), 'fdff:ffff:ffff::/48');
  });
  test('takes exactly 40 bits', () => {
    assert.throws(() => ulaPrefixOf(new Uint8Array(4)));
    assert.throws(() => ulaPrefixOf(new Uint8Array(6)));
  });
});

describe('parseServerAddress6', () => {
  const accepted: Array<[intent: string, given: string, address: string, subnet: string, routed: boolean]> = [
    [
      'a ULA /64 with the server address',
      'fd12:3456:789a:1::1/64',
      'fd12:3456:789a:1::1',
      'fd12:3456:789a:1::/64',
      false,
    ],
    [
      'a ULA /64 written as its network: the first address',
      'fd12:3456:789a:1::/64',
      'fd12:3456:789a:1::1',
      'fd12:3456:789a:1::/64',
      false,
    ],
    ['another host of the subnet', 'fd12::77/112', 'fd12::77', 'fd12::/112', false],
    ['a /120, the smallest', 'fc00:0:0:1::1/120', 'fc00:0:0:1::1', 'fc00:0:0:1::/120', false],
    ['a global /64 the operator routes', '2001:db8:100:1::1/64', '2001:db8:100:1::1', '2001:db8:100:1::/64', true],
    ['upper case', 'FD12:3456:789A:1::1/64', 'fd12:3456:789a:1::1', 'fd12:3456:789a:1::/64', false],
  ];
  for (const [intent, given, address, subnet, routed] of accepted) {
    test(`accepts ${intent}`, () => {
      const parsed = parseServerAddress6(given);
      assert.equal(bigIntToIpv6(parsed.address), address);
      assert.equal(formatSubnet6(parsed.subnet), subnet);
      assert.equal(isGlobal6(parsed.subnet), routed);
    });
  }

  const refused: Array<[intent: string, given: string]> = [
    ['link-local space', 'fe80::1/64'],
    ['multicast space', 'ff02::1/64'],
    ['loopback', '::1/128'],
    ['an IPv4-mapped address', '::ffff:10.0.0.1/120'],
    ['a /63, wider than /64', 'fd12:3456:789a::1/63'],
    ['a /121, narrower than /120', 'fd12:3456:789a:1::1/121'],
    ['a /128', 'fd12:3456:789a:1::1/128'],
    ['no prefix', 'fd12:3456:789a:1::1'],
    ['an IPv4 CIDR', '10.0.0.1/24'],
    ['brackets', '[fd12::1]/64'],
    ['a zone', 'fe80::1%eth0/64'],
  ];
  for (const [intent, given] of refused) {
    test(`refuses ${intent} naming address6`, () => assertRefused(() => parseServerAddress6(given), 'address6'));
  }
});

describe('the IPv6 networks of a node', () => {
  test('are its IPv6 entries; IPv4 and malformed ones are skipped', () => {
    const networks = ipv6Networks(['192.0.2.2/24', '2001:db8::2/64', 'fe80::1/64', 'garbage', 'fd00::/129']);
    assert.deepEqual(networks.map(formatSubnet6), ['2001:db8::/64', 'fe80::/64']);
  });
});

describe('firstFreeSubnet6', () => {
  test('takes the /64s of a /48 in order, jumping past what is taken', () => {
    assert.equal(formatSubnet6(firstFreeSubnet6(ULA, 64, []) ?? ULA), 'fd3a:1b2c:4d5e::/64');
    const taken = [net6('fd3a:1b2c:4d5e::/64'), net6('fd3a:1b2c:4d5e:1::/112')];
    assert.equal(formatSubnet6(firstFreeSubnet6(ULA, 64, taken) ?? ULA), 'fd3a:1b2c:4d5e:2::/64');
    const around = [net6('fd3a:1b2c:4d5e::/63')];
    assert.equal(formatSubnet6(firstFreeSubnet6(ULA, 64, around) ?? ULA), 'fd3a:1b2c:4d5e:2::/64');
  });
  test('finds nothing in a pool that is taken', () => {
    assert.equal(firstFreeSubnet6(ULA, 64, [net6('fd3a::/16')]), undefined);
  });
});

describe('planSubnet6', () => {
  test('by default: the first free /64 of the panel ULA /48, the server at ::1', () => {
    assert.deepEqual(planSubnet6({}, nothingTaken), {
      address6: 'fd3a:1b2c:4d5e::1/64',
      subnet6: 'fd3a:1b2c:4d5e::/64',
      room: Number.MAX_SAFE_INTEGER,
    });
    const second = planSubnet6({}, { ...nothingTaken, panelSubnets: [net6('fd3a:1b2c:4d5e::/64')] });
    assert.equal(second.subnet6, 'fd3a:1b2c:4d5e:1::/64', 'each new server the next free /64');
    const offHost = planSubnet6({}, { ...nothingTaken, hostNetworks: [net6('fd3a:1b2c:4d5e::/63')] });
    assert.equal(offHost.subnet6, 'fd3a:1b2c:4d5e:2::/64', "never on the node's own networks");
  });

  test('a /120 holds 254 devices', () => {
    assert.equal(planSubnet6({ address6: 'fd00:1::1/120' }, nothingTaken).room, 254);
    assert.equal(deviceRoom6(net6('fd00::/112')), 65534);
  });

  test('refuses a subnet6 over another server naming address6', () => {
    const panelSubnets = [net6('fd00:1::/64')];
    for (const address6 of ['fd00:1::1/64', 'fd00:1::100/120', 'fd00:1:0:0:8000::1/65']) {
      assertRefused(() => planSubnet6({ address6 }, { ...nothingTaken, panelSubnets }), 'address6');
    }
    assert.equal(planSubnet6({ address6: 'fd00:2::1/64' }, { ...nothingTaken, panelSubnets }).subnet6, 'fd00:2::/64');
  });

  test("refuses a subnet6 over the node's own networks naming address6", () => {
    const hostNetworks = [net6('2001:db8:5::/64')];
    assertRefused(
      () => planSubnet6({ address6: '2001:db8:5::100/120' }, { ...nothingTaken, hostNetworks }),
      'address6',
    );
  });

  test('refuses max_devices beyond the subnet6 naming max_devices', () => {
    assertRefused(() => planSubnet6({ address6: 'fd00:1::1/120', maxDevices: 255 }, nothingTaken), 'max_devices');
    assert.equal(planSubnet6({ address6: 'fd00:1::1/120', maxDevices: 254 }, nothingTaken).room, 254);
  });

  test('says when the panel ULA prefix is used up, naming address6', () => {
    assertRefused(() => planSubnet6({}, { ...nothingTaken, panelSubnets: [ULA] }), 'address6');
  });
});

describe('a device address6', () => {
  const v4 = (address: string, subnet: string) => ({ address: ipToInt(address), subnet: parseSubnet(subnet) });
  const same = (address: string, subnet: string, subnet6: string): string | undefined => {
    const found = sameHostPart6(ipToInt(address), parseSubnet(subnet), net6(subnet6));
    return found === undefined ? undefined : bigIntToIpv6(found);
  };

  test('reads like the IPv4 address: its host octets in decimal, one group each', () => {
    assert.equal(same('10.128.0.2', '10.128.0.0/24', 'fd00:1::/64'), 'fd00:1::2');
    assert.equal(same('10.128.0.77', '10.128.0.0/24', 'fd00:1::/64'), 'fd00:1::77');
    assert.equal(same('10.128.0.254', '10.128.0.0/24', 'fd00:1::/64'), 'fd00:1::254');
    assert.equal(same('10.200.17.5', '10.200.16.0/20', 'fd00:1::/64'), 'fd00:1::17:5');
    assert.equal(same('10.5.3.200', '10.5.0.0/16', 'fd00:1::/64'), 'fd00:1::3:200');
    assert.equal(same('10.200.0.6', '10.200.0.4/30', 'fd00:1::/64'), 'fd00:1::6');
  });

  test('has none where that does not fit the subnet6', () => {
    assert.equal(same('10.128.0.99', '10.128.0.0/24', 'fd00:1::/120'), 'fd00:1::99', '0x99 fits a /120');
    assert.equal(same('10.128.0.100', '10.128.0.0/24', 'fd00:1::/120'), undefined, '0x100 does not');
    assert.equal(same('10.200.1.5', '10.200.0.0/20', 'fd00:1::/112'), undefined);
  });

  test('is the readable one when free, else the lowest free one', () => {
    const subnet6 = net6('fd00:1::/120');
    const server = ip6('fd00:1::1');
    const used = new Set([ip6('fd00:1::2'), ip6('fd00:1::3')]);
    const pick = (address: string, subnet: string) => {
      const found = deviceAddress6(v4(address, subnet), subnet6, server, (a) => used.has(a));
      return found === undefined ? undefined : bigIntToIpv6(found);
    };
    assert.equal(pick('10.128.0.9', '10.128.0.0/24'), 'fd00:1::9');
    assert.equal(pick('10.128.0.3', '10.128.0.0/24'), 'fd00:1::4', 'its own is taken: the lowest free');
    assert.equal(pick('10.128.0.200', '10.128.0.0/24'), 'fd00:1::4', 'its own does not fit: the lowest free');
    assert.equal(pick('10.200.0.1', '10.200.0.0/24'), 'fd00:1::4', "the server's own address is never a device's");
  });

  test('a /120 runs out after 254 devices', () => {
    const subnet6 = net6('fd00:1::/120');
    const server = ip6('fd00:1::1');
    const used = new Set<bigint>();
    for (let i = 0; i < 254; i++) {
      const next = lowestFreeAddress6(subnet6, server, (a) => used.has(a));
      assert.ok(next !== undefined && next !== server && next !== subnet6.network, `device ${i}`);
      used.add(next);
    }
    assert.equal(used.size, 254);
    assert.equal(
      lowestFreeAddress6(subnet6, server, (a) => used.has(a)),
      undefined,
    );
    assert.equal(
      deviceAddress6(v4('10.128.0.2', '10.128.0.0/24'), subnet6, server, (a) => used.has(a)),
      undefined,
    );
  });
});
