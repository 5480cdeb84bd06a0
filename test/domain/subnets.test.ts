import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { AppError } from '../../src/domain/errors.ts';
import {
  type NodeOccupancy,
  type ServerStatus,
  effectiveServerStatus,
  firstFreePort,
  planServer,
} from '../../src/domain/servers.ts';
import {
  DEFAULT_POOL,
  type Subnet,
  deviceRoom,
  firstFreeSubnet,
  formatSubnet,
  intToIp,
  ipToInt,
  overlaps,
  parseCidr,
  parseSubnet,
  prefixFor,
} from '../../src/domain/subnets.ts';

/** Asserts a 422 `validation_failed` whose `fields` names `field` (spec §7: fields names the inputs). */
function assertRefused(fn: () => unknown, field: string): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof AppError, `expected an AppError, got ${String(error)}`);
    assert.equal(error.code, 'validation_failed');
    assert.ok(Object.hasOwn(error.fields, field), `fields ${JSON.stringify(error.fields)} should name ${field}`);
    return true;
  });
}

const net = (cidr: string): Subnet => parseSubnet(cidr);
const emptyNode: NodeOccupancy = { subnets: [], listenPorts: [], hostNetworks: [] };

/** Subnets covering all of DEFAULT_POOL (10.128.0.0/9) except its last block of `leftPrefix`. */
function poolTakenExceptLast(leftPrefix: number): Subnet[] {
  const taken: Subnet[] = [];
  let network = DEFAULT_POOL.network;
  for (let prefix = DEFAULT_POOL.prefix + 1; prefix <= leftPrefix; prefix++) {
    taken.push({ network, prefix });
    network += 2 ** (32 - prefix);
  }
  return taken;
}

describe('IPv4 addresses as integers', () => {
  const cases: Array<[ip: string, n: number]> = [
    ['0.0.0.0', 0],
    ['10.128.0.0', 0x0a800000],
    ['192.168.1.1', 0xc0a80101],
    ['255.255.255.255', 0xffffffff],
  ];
  for (const [ip, n] of cases) {
    test(`${ip} is ${n} and back`, () => {
      assert.equal(ipToInt(ip), n);
      assert.equal(intToIp(n), ip);
    });
  }

  for (const bad of ['10.0.0', '10.0.0.0.0', '256.0.0.1', '10.01.0.1', '10.0.0.-1', 'a.b.c.d', '', '::1']) {
    test(`${JSON.stringify(bad)} is refused naming address`, () => assertRefused(() => ipToInt(bad), 'address'));
  }
});

describe('parseCidr: an explicit server address', () => {
  const accepted: Array<[intent: string, cidr: string, address: string, subnet: string]> = [
    ['a /16, the widest allowed', '10.200.0.1/16', '10.200.0.1', '10.200.0.0/16'],
    ['the last host of a /16', '10.200.255.254/16', '10.200.255.254', '10.200.0.0/16'],
    ['a /20 with the address in the middle', '10.200.7.9/20', '10.200.7.9', '10.200.0.0/20'],
    ['a /24', '192.168.5.1/24', '192.168.5.1', '192.168.5.0/24'],
    ['a /30, the narrowest allowed: first host', '10.0.0.1/30', '10.0.0.1', '10.0.0.0/30'],
    ['a /30: second host', '10.0.0.2/30', '10.0.0.2', '10.0.0.0/30'],
  ];
  for (const [intent, cidr, address, subnet] of accepted) {
    test(`accepts ${intent} (${cidr})`, () => {
      const parsed = parseCidr(cidr);
      assert.equal(intToIp(parsed.address), address);
      assert.equal(formatSubnet(parsed.subnet), subnet);
    });
  }

  const refused: Array<[intent: string, cidr: string]> = [
    ['the network address of a /16', '10.200.0.0/16'],
    ['the broadcast address of a /16', '10.200.255.255/16'],
    ['the network address of a /24', '10.128.5.0/24'],
    ['the broadcast address of a /24', '10.128.5.255/24'],
    ['the network address of a /30', '10.0.0.0/30'],
    ['the broadcast address of a /30', '10.0.0.3/30'],
    ['the broadcast address of an unaligned-looking /20', '10.200.15.255/20'],
    ['a /15, wider than a /16', '10.200.0.1/15'],
    ['a /8', '10.0.0.1/8'],
    ['a /31, no room for a device', '10.0.0.1/31'],
    ['a /32', '10.0.0.1/32'],
    ['a prefix with three digits', '10.0.0.1/024'],
    ['no prefix', '10.200.0.1'],
    ['an empty prefix', '10.200.0.1/'],
    ['an octet over 255', '10.200.0.256/24'],
    ['an IPv6 CIDR', 'fd00::1/64'],
    ['surrounding spaces', ' 10.200.0.1/24 '],
    ['an empty string', ''],
  ];
  for (const [intent, cidr] of refused) {
    test(`refuses ${intent} (${JSON.stringify(cidr)}) naming address`, () =>
      assertRefused(() => parseCidr(cidr), 'address'));
  }
});

describe('subnet arithmetic', () => {
  test('parseSubnet reads a stored subnet and formatSubnet writes it back', () => {
    for (const cidr of ['10.128.0.0/24', '10.200.0.0/16', '10.0.0.4/30', '10.255.255.0/24']) {
      assert.equal(formatSubnet(parseSubnet(cidr)), cidr);
    }
  });

  test('parseSubnet aligns a host address down to its network', () => {
    assert.deepEqual(parseSubnet('10.128.3.77/22'), { network: ipToInt('10.128.0.0'), prefix: 22 });
  });

  const rooms: Array<[prefix: number, devices: number]> = [
    [16, 65533],
    [20, 4093],
    [23, 509],
    [24, 253],
    [30, 1],
  ];
  for (const [prefix, devices] of rooms) {
    test(`a /${prefix} holds ${devices} devices (size − network, broadcast and server)`, () => {
      assert.equal(deviceRoom({ network: 0, prefix }), devices);
    });
  }

  const overlapCases: Array<[intent: string, a: string, b: string, expected: boolean]> = [
    ['the same subnet', '10.128.0.0/24', '10.128.0.0/24', true],
    ['a /30 inside a /24', '10.128.0.0/24', '10.128.0.252/30', true],
    ['a /24 inside a /16', '10.128.0.0/16', '10.128.77.0/24', true],
    ['a /23 over the second half /24', '10.128.0.0/23', '10.128.1.0/24', true],
    ['adjacent /24s', '10.128.0.0/24', '10.128.1.0/24', false],
    ['adjacent /30s', '10.0.0.0/30', '10.0.0.4/30', false],
    ['a /16 and the /24 right after it', '10.200.0.0/16', '10.201.0.0/24', false],
    ['far apart', '10.0.0.0/24', '192.168.0.0/24', false],
  ];
  for (const [intent, a, b, expected] of overlapCases) {
    test(`overlaps: ${intent} → ${expected}, both ways`, () => {
      assert.equal(overlaps(net(a), net(b)), expected);
      assert.equal(overlaps(net(b), net(a)), expected);
    });
  }
});

describe('prefixFor: the smallest subnet that holds max_devices', () => {
  const cases: Array<[devices: number, prefix: number]> = [
    [1, 30],
    [2, 29],
    [5, 29],
    [6, 28],
    [253, 24],
    [254, 23],
    [509, 23],
    [510, 22],
    [1000, 22],
    [4093, 20],
    [65533, 16],
  ];
  for (const [devices, prefix] of cases) {
    test(`${devices} devices → /${prefix}`, () => assert.equal(prefixFor(devices), prefix));
  }

  test('more than a /16 holds (65,534) is refused naming max_devices', () => {
    assertRefused(() => prefixFor(65534), 'max_devices');
  });
});

describe('firstFreeSubnet', () => {
  const pool = net('10.128.0.0/9');
  const cases: Array<[intent: string, prefix: number, taken: string[], expected: string | undefined]> = [
    ['an empty pool gives its first /24', 24, [], '10.128.0.0/24'],
    ['skips a taken /24', 24, ['10.128.0.0/24'], '10.128.1.0/24'],
    [
      'skips a run of taken /24s given out of order',
      24,
      ['10.128.2.0/24', '10.128.0.0/24', '10.128.1.0/24'],
      '10.128.3.0/24',
    ],
    ['fills a hole before later taken subnets', 24, ['10.128.0.0/24', '10.128.2.0/24'], '10.128.1.0/24'],
    ['skips a taken /23 (other size, larger)', 24, ['10.128.0.0/23'], '10.128.2.0/24'],
    ['skips a /24 holding a taken /30 (other size, smaller)', 24, ['10.128.0.4/30'], '10.128.1.0/24'],
    ['skips a /24 holding a /30 at its very end', 24, ['10.128.0.252/30'], '10.128.1.0/24'],
    ['a /23 skips a /24 taken in its second half (unaligned neighbour)', 23, ['10.128.1.0/24'], '10.128.2.0/23'],
    ['a /22 skips past a /30 and a /24 in different /22s', 22, ['10.128.1.0/30', '10.128.6.0/24'], '10.128.8.0/22'],
    ['ignores taken subnets outside the pool', 24, ['10.0.0.0/16', '192.168.0.0/24'], '10.128.0.0/24'],
    ['skips a taken /16 wholly', 24, ['10.128.0.0/16'], '10.129.0.0/24'],
    ['no /16 left when the whole pool is taken', 16, ['10.128.0.0/9'], undefined],
    ['nothing left when the whole pool is taken', 24, ['10.128.0.0/9'], undefined],
    ['nothing left when a wider subnet covers the pool', 30, ['10.0.0.0/8'], undefined],
  ];
  for (const [intent, prefix, taken, expected] of cases) {
    test(intent, () => {
      const free = firstFreeSubnet(pool, prefix, taken.map(net));
      assert.equal(free && formatSubnet(free), expected);
    });
  }

  test('a small pool is used up to its last block, then is exhausted', () => {
    const small = net('10.9.0.0/28');
    const taken: Subnet[] = [];
    const handedOut: string[] = [];
    for (let free = firstFreeSubnet(small, 30, taken); free; free = firstFreeSubnet(small, 30, taken)) {
      handedOut.push(formatSubnet(free));
      taken.push(free);
    }
    assert.deepEqual(handedOut, ['10.9.0.0/30', '10.9.0.4/30', '10.9.0.8/30', '10.9.0.12/30']);
  });

  test('the last /24 of the default pool is still found', () => {
    const free = firstFreeSubnet(DEFAULT_POOL, 24, poolTakenExceptLast(24));
    assert.equal(free && formatSubnet(free), '10.255.255.0/24');
  });

  test('a fragmented pool has /24s but no /23', () => {
    const small = net('10.9.0.0/22');
    const taken = ['10.9.0.0/24', '10.9.2.0/24'].map(net);
    assert.equal(firstFreeSubnet(small, 23, taken), undefined);
    const free = firstFreeSubnet(small, 24, taken);
    assert.equal(free && formatSubnet(free), '10.9.1.0/24');
  });
});

describe('planServer: explicit address', () => {
  const accepted: Array<[intent: string, address: string, node: string[], subnet: string, capacity: number]> = [
    ['a /16 on an empty node', '10.200.0.1/16', [], '10.200.0.0/16', 65533],
    ['a /20 gets room for 4,093 devices', '10.200.0.1/20', [], '10.200.0.0/20', 4093],
    ['a /30 gets room for one device', '10.200.0.1/30', [], '10.200.0.0/30', 1],
    ['a /24 right after a node subnet', '10.200.1.1/24', ['10.200.0.0/24'], '10.200.1.0/24', 253],
    ['a /20 right before a node subnet', '10.200.0.1/20', ['10.200.16.0/24'], '10.200.0.0/20', 4093],
    ['any address inside the default pool on an empty node', '10.128.0.1/24', [], '10.128.0.0/24', 253],
  ];
  for (const [intent, address, nodeSubnets, subnet, capacity] of accepted) {
    test(`accepts ${intent}`, () => {
      const plan = planServer(
        { name: 's', address },
        { subnets: nodeSubnets.map(net), listenPorts: [], hostNetworks: [] },
        nodeSubnets.map(net),
      );
      assert.deepEqual(plan, { address, subnet, listenPort: 51820, capacity });
    });
  }

  const overlapping: Array<[intent: string, address: string, node: string]> = [
    ['the same /24 as a server of the node', '10.128.0.1/24', '10.128.0.0/24'],
    ['another host of a node /24', '10.128.0.77/24', '10.128.0.0/24'],
    ['a /16 around a node /24', '10.128.9.1/16', '10.128.200.0/24'],
    ['a /24 inside a node /20', '10.200.3.1/24', '10.200.0.0/20'],
    ['a /30 inside a node /24', '10.200.0.9/30', '10.200.0.0/24'],
    ['a /23 over a node /24 in its second half', '10.200.0.1/23', '10.200.1.0/24'],
  ];
  for (const [intent, address, nodeSubnet] of overlapping) {
    test(`refuses ${intent} naming address`, () => {
      assertRefused(
        () =>
          planServer({ name: 's', address }, { subnets: [net(nodeSubnet)], listenPorts: [], hostNetworks: [] }, [
            net(nodeSubnet),
          ]),
        'address',
      );
    });
  }

  for (const address of ['10.200.0.0/16', '10.200.255.255/16', '10.200.0.0/30', '10.200.0.3/30', '10.200.0.1/31']) {
    test(`refuses ${address} (network, broadcast or too narrow) naming address`, () => {
      assertRefused(() => planServer({ name: 's', address }, emptyNode, []), 'address');
    });
  }

  test('max_devices up to the subnet room is the capacity', () => {
    assert.equal(planServer({ name: 's', address: '10.200.0.1/24', maxDevices: 253 }, emptyNode, []).capacity, 253);
    assert.equal(planServer({ name: 's', address: '10.200.0.1/24', maxDevices: 10 }, emptyNode, []).capacity, 10);
  });

  test('max_devices beyond the subnet room is refused naming max_devices', () => {
    assertRefused(
      () => planServer({ name: 's', address: '10.200.0.1/24', maxDevices: 254 }, emptyNode, []),
      'max_devices',
    );
    assertRefused(
      () => planServer({ name: 's', address: '10.200.0.1/30', maxDevices: 2 }, emptyNode, []),
      'max_devices',
    );
  });
});

describe('planServer: default allocation from 10.128.0.0/9', () => {
  const cases: Array<
    [intent: string, maxDevices: number | undefined, node: string[], panel: string[], address: string, capacity: number]
  > = [
    ['a new panel gets the first /24 with room for 253', undefined, [], [], '10.128.0.1/24', 253],
    ['skips subnets of the node', undefined, ['10.128.0.0/24', '10.128.1.0/24'], [], '10.128.2.1/24', 253],
    [
      'skips subnets of other nodes too (panel-wide unique addresses)',
      undefined,
      [],
      ['10.128.0.0/24'],
      '10.128.1.1/24',
      253,
    ],
    ['skips a node /20 given explicitly inside the pool', undefined, ['10.128.0.0/20'], [], '10.128.16.1/24', 253],
    ['skips a /24 holding a small explicit /30', undefined, ['10.128.0.8/30'], [], '10.128.1.1/24', 253],
    ['max_devices 253 still fits a /24', 253, [], [], '10.128.0.1/24', 253],
    ['max_devices 254 needs a /23', 254, [], [], '10.128.0.1/23', 254],
    ['a /23 skips an unaligned taken /24', 254, ['10.128.1.0/24'], [], '10.128.2.1/23', 254],
    ['max_devices 1000 gets a /22 with capacity 1000', 1000, [], [], '10.128.0.1/22', 1000],
    ['max_devices 65533 gets a /16', 65533, [], [], '10.128.0.1/16', 65533],
  ];
  for (const [intent, maxDevices, nodeSubnets, panelSubnets, address, capacity] of cases) {
    test(intent, () => {
      const input = maxDevices === undefined ? { name: 's' } : { name: 's', maxDevices };
      const plan = planServer(
        input,
        { subnets: nodeSubnets.map(net), listenPorts: [], hostNetworks: [] },
        [...nodeSubnets, ...panelSubnets].map(net),
      );
      assert.equal(plan.address, address);
      assert.equal(plan.subnet, formatSubnet(net(address)));
      assert.equal(plan.capacity, capacity);
    });
  }

  test('a small max_devices is the capacity, not the subnet room', () => {
    // Which subnet it gets is left open: see prefixFor for the smallest that fits.
    assert.equal(planServer({ name: 's', maxDevices: 100 }, emptyNode, []).capacity, 100);
    assert.equal(planServer({ name: 's', maxDevices: 1 }, emptyNode, []).capacity, 1);
  });

  test('the last free /24 of the pool is handed out', () => {
    const plan = planServer({ name: 's' }, emptyNode, poolTakenExceptLast(24));
    assert.equal(plan.address, '10.255.255.1/24');
  });

  test('an exhausted pool is refused naming address (give one explicitly)', () => {
    assertRefused(() => planServer({ name: 's' }, emptyNode, [DEFAULT_POOL]), 'address');
    assertRefused(
      () => planServer({ name: 's' }, { subnets: [DEFAULT_POOL], listenPorts: [], hostNetworks: [] }, []),
      'address',
    );
  });

  test('a /24 left but no /23 is exhausted for max_devices 254', () => {
    assertRefused(() => planServer({ name: 's', maxDevices: 254 }, emptyNode, poolTakenExceptLast(24)), 'address');
  });

  test('an explicit address still works when the pool is exhausted', () => {
    const plan = planServer({ name: 's', address: '172.16.0.1/24' }, emptyNode, [DEFAULT_POOL]);
    assert.equal(plan.subnet, '172.16.0.0/24');
  });

  test('max_devices over 65,533 is refused naming max_devices', () => {
    assertRefused(() => planServer({ name: 's', maxDevices: 65534 }, emptyNode, []), 'max_devices');
  });
});

describe('listen ports', () => {
  const cases: Array<[intent: string, taken: number[], port: number]> = [
    ['an empty node starts at 51820', [], 51820],
    ['skips 51820 when taken', [51820], 51821],
    ['skips a run of taken ports given out of order', [51822, 51820, 51821], 51823],
    ['fills a hole', [51820, 51822], 51821],
    ['ignores taken ports below 51820', [51819, 443], 51820],
    ['takes 51820 when only later ports are taken', [51821, 51822], 51820],
  ];
  for (const [intent, taken, port] of cases) {
    test(`firstFreePort ${intent}`, () => assert.equal(firstFreePort(taken), port));
    test(`planServer ${intent}`, () =>
      assert.equal(
        planServer({ name: 's' }, { subnets: [], listenPorts: taken, hostNetworks: [] }, []).listenPort,
        port,
      ));
  }

  test('the last port 65535 is still handed out', () => {
    const taken = Array.from({ length: 65535 - 51820 }, (_, i) => 51820 + i);
    assert.equal(firstFreePort(taken), 65535);
  });

  test('every port from 51820 taken is refused naming listen_port', () => {
    const taken = Array.from({ length: 65536 - 51820 }, (_, i) => 51820 + i);
    assertRefused(() => firstFreePort(taken), 'listen_port');
    assertRefused(
      () => planServer({ name: 's' }, { subnets: [], listenPorts: taken, hostNetworks: [] }, []),
      'listen_port',
    );
  });

  test('an explicit free port is used, even below 51820', () => {
    assert.equal(
      planServer({ name: 's', listenPort: 51821 }, { subnets: [], listenPorts: [51820], hostNetworks: [] }, [])
        .listenPort,
      51821,
    );
    assert.equal(planServer({ name: 's', listenPort: 443 }, emptyNode, []).listenPort, 443);
  });

  test('an explicit port taken on the node is refused naming listen_port', () => {
    assertRefused(
      () => planServer({ name: 's', listenPort: 51820 }, { subnets: [], listenPorts: [51820], hostNetworks: [] }, []),
      'listen_port',
    );
    assertRefused(
      () =>
        planServer(
          { name: 's', listenPort: 51999 },
          { subnets: [], listenPorts: [51820, 51999], hostNetworks: [] },
          [],
        ),
      'listen_port',
    );
  });
});

describe('effectiveServerStatus', () => {
  const cases: Array<[stored: ServerStatus, nodeOnline: boolean, shown: ServerStatus]> = [
    ['running', true, 'running'],
    ['running', false, 'node_offline'],
    ['error', false, 'error'],
    ['error', true, 'error'],
    ['deploying', false, 'deploying'],
  ];
  for (const [stored, nodeOnline, shown] of cases) {
    test(`${stored} on a node ${nodeOnline ? 'online' : 'offline'} shows ${shown}`, () => {
      assert.equal(effectiveServerStatus(stored, nodeOnline), shown);
    });
  }
});

describe('planServer keeps server subnets in private space and off the node', () => {
  const outside: Array<[intent: string, address: string]> = [
    ['loopback', '127.0.0.1/24'],
    ['link-local, where cloud metadata lives', '169.254.169.1/24'],
    ['public space', '8.8.8.1/24'],
    ['a documentation range', '198.51.100.1/24'],
    ['just below 172.16/12', '172.15.255.1/24'],
    ['just past 172.16/12', '172.32.0.1/24'],
    ['just past CGNAT 100.64/10', '100.128.0.1/24'],
    ['next to 192.168/16', '192.169.0.1/16'],
  ];
  for (const [intent, address] of outside) {
    test(`refuses ${intent} (${address}) naming address`, () =>
      assertRefused(() => planServer({ name: 's', address }, emptyNode, []), 'address'));
  }

  for (const address of [
    '10.0.0.1/16',
    '172.16.0.1/24',
    '172.31.255.1/24',
    '192.168.77.1/24',
    '100.64.0.1/16',
    '100.127.255.1/24',
  ]) {
    test(`accepts ${address}`, () => assert.equal(planServer({ name: 's', address }, emptyNode, []).address, address));
  }

  const hostNode: NodeOccupancy = {
    subnets: [],
    listenPorts: [],
    hostNetworks: [net('10.0.5.0/24'), net('192.168.1.10/32')],
  };
  test("refuses an address overlapping the node's own network, naming address", () => {
    assertRefused(() => planServer({ name: 's', address: '10.0.0.1/16' }, hostNode, []), 'address');
    assertRefused(() => planServer({ name: 's', address: '192.168.1.1/24' }, hostNode, []), 'address');
  });
  test("accepts an address beside the node's own networks", () => {
    assert.equal(planServer({ name: 's', address: '10.0.6.1/24' }, hostNode, []).subnet, '10.0.6.0/24');
  });
  test("the default pool skips the node's own networks", () => {
    const onPool: NodeOccupancy = { subnets: [], listenPorts: [], hostNetworks: [net('10.128.0.5/23')] };
    assert.equal(planServer({ name: 's' }, onPool, []).subnet, '10.128.2.0/24');
  });
});
