/**
 * What speed limits change (src/agent/shaping/plan.ts), as pure functions of the limits wanted and the host's
 * state: the commands a convergence or a change plans, what is remembered, what the drift check reports. The
 * same operations through the driver, against a scripted and a real host, are in ../speed-limits.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PeerSpec } from '../../../src/agent/driver.ts';
import {
  checkedLimits,
  driftOf,
  type Limit,
  planChange,
  planConvergence,
  restoredLimits,
  wantedLimits,
  withFailed,
} from '../../../src/agent/shaping/plan.ts';
import { classId, classMinor, type DeviceState, type ShapingState } from '../../../src/agent/shaping/tc-nft.ts';

const PLACE = { netns: 'vp-s1', wg: 'vp1', uplink: 'vp1s' };

/** A host holding these classes (IPv4 address → rate as tc prints it) on both devices, and their entries. */
function host(classes: Record<string, string>): ShapingState {
  const device = (): DeviceState => ({
    htbRoot: true,
    classes: new Map(Object.entries(classes).map(([ip, rate]) => [classMinor(ip), { rate, ceil: rate, leaf: true }])),
  });
  return {
    tables: { ip: 'ok', ip6: 'missing' },
    elements: new Map(Object.keys(classes).map((ip) => [ip, classId(ip)])),
    wg: device(),
    uplink: device(),
  };
}

const peer = (publicKey: string, ip: string, speedLimitKbps: number, ip6?: string): PeerSpec =>
  ip6 === undefined
    ? { publicKey, allowedIp: `${ip}/32`, speedLimitKbps }
    : { publicKey, allowedIp: `${ip}/32`, allowedIp6: `${ip6}/128`, speedLimitKbps };

const texts = (plan: { lines: { text: string }[] }): string[] => plan.lines.map((l) => l.text);

describe('speed limits: planning a convergence (setPeers, up)', () => {
  const want = new Map<string, Limit>([['A', { ip: '10.0.0.2', kbps: 2000 }]]);

  test('the host holding the wanted limits: nothing to run', () => {
    const plan = planConvergence(PLACE, host({ '10.0.0.2': '2Mbit' }), want, new Set(), undefined);
    assert.deepEqual(plan, { lines: [], script: '', scriptOwners: [] });
  });

  test('nothing wanted: the roots and the table go whole, not class by class', () => {
    const plan = planConvergence(PLACE, host({ '10.0.0.2': '2Mbit', '10.0.0.3': '1Mbit' }), new Map(), new Set(), want);
    assert.deepEqual(texts(plan), ['qdisc del dev vp1 root', 'qdisc del dev vp1s root']);
    assert.equal(plan.script, 'delete table ip vpnpanel_shape\n');
  });

  test("a kept peer's class and entry stay; those of no wanted or kept peer go", () => {
    const plan = planConvergence(
      PLACE,
      host({ '10.0.0.2': '2Mbit', '10.0.0.3': '1Mbit' }),
      new Map(),
      new Set(['10.0.0.3']),
      want,
    );
    assert.deepEqual(texts(plan), ['class del dev vp1 classid 1:2', 'class del dev vp1s classid 1:2']);
    assert.equal(plan.script, 'delete element ip vpnpanel_shape limited { 10.0.0.2 }\n');
  });

  test('a rate printed as the one held (over 1 Gbit/s) is applied again when the exact one remembered differs', () => {
    const fast = new Map<string, Limit>([['A', { ip: '10.0.0.2', kbps: 1_500_000 }]]);
    const state = host({ '10.0.0.2': '1500Mbit' });
    assert.deepEqual(texts(planConvergence(PLACE, state, fast, new Set(), undefined)), []);
    const remembered = new Map<string, Limit>([['A', { ip: '10.0.0.2', kbps: 1_500_001 }]]);
    const lines = texts(planConvergence(PLACE, state, fast, new Set(), remembered));
    assert.equal(lines.length, 4, 'class and queue on both devices');
    assert.match(lines[0] ?? '', /^class replace dev vp1 parent 1: classid 1:2 htb rate 1500000kbit /);
  });

  test("a missing table is made with every wanted entry, each owned by its peer's class", () => {
    const state: ShapingState = { ...host({}), tables: { ip: 'missing', ip6: 'missing' } };
    const dual = new Map<string, Limit>([['A', { ip: '10.0.0.2', ip6: 'fd00::2', kbps: 2000 }]]);
    const plan = planConvergence(PLACE, state, dual, new Set(), undefined);
    assert.match(plan.script, /^table ip vpnpanel_shape \{\}\ndelete table ip vpnpanel_shape\n/);
    assert.match(plan.script, /elements = \{ 10\.0\.0\.2 : 1:2 \}[\s\S]*elements = \{ fd00::2 : 1:2 \}/);
    assert.deepEqual(plan.scriptOwners, ['10.0.0.2', '10.0.0.2']);
  });
});

describe('speed limits: planning a change (changePeers)', () => {
  const applied = new Map<string, Limit>([['A', { ip: '10.0.0.2', kbps: 2000 }]]);

  test('a new rate needs tc alone: the root (kept if there), the class and its queue on both devices', () => {
    const plan = planChange(PLACE, applied, [peer('A', '10.0.0.2', 3000)], []);
    assert.deepEqual(
      texts(plan).map((t) => t.split(' ').slice(0, 5).join(' ')),
      [
        'qdisc add dev vp1 root',
        'class replace dev vp1 parent',
        'qdisc replace dev vp1 parent',
        'qdisc add dev vp1s root',
        'class replace dev vp1s parent',
        'qdisc replace dev vp1s parent',
      ],
    );
    assert.equal(plan.script, '');
    assert.deepEqual([...plan.known], [['A', { ip: '10.0.0.2', kbps: 3000 }]]);
  });

  test('a new limit adds its map entry, with the script that makes the table should it be missing', () => {
    const plan = planChange(PLACE, applied, [peer('B', '10.0.0.3', 2000)], []);
    assert.equal(plan.script, 'add element ip vpnpanel_shape limited { 10.0.0.3 : 1:3 }\n');
    assert.match(plan.ensure, /^add table ip vpnpanel_shape\n/);
    assert.deepEqual(plan.scriptOwners, ['10.0.0.3']);
  });

  test('a removed limit: its classes go, its entry is added then deleted (so the delete cannot fail)', () => {
    const plan = planChange(PLACE, applied, [], ['A']);
    assert.deepEqual(texts(plan), ['class del dev vp1 classid 1:2', 'class del dev vp1s classid 1:2']);
    assert.equal(
      plan.script,
      'add element ip vpnpanel_shape limited { 10.0.0.2 : 1:2 }\n' +
        'delete element ip vpnpanel_shape limited { 10.0.0.2 }\n',
    );
    assert.deepEqual(plan.known, new Map());
    assert.equal(applied.size, 1, 'what was remembered is not changed by planning');
  });

  test('a limit that cannot be applied is a problem, and nothing is run for it', () => {
    const plan = planChange(PLACE, applied, [peer('C', '10.1.0.2', 2000), peer('D', '10.0.0.0', 2000)], []);
    assert.deepEqual(plan.problems, [
      'peer C: 10.1.0.2 has the class id of 10.0.0.2 (a subnet larger than /16)',
      'peer D: 10.0.0.0 ends in .0.0, which has no class id of its own',
    ]);
    assert.deepEqual([texts(plan), plan.script, [...plan.known.keys()]], [[], '', ['A']]);
  });

  test('a peer whose step failed is remembered with an unknown rate, so the next change applies it again', () => {
    const known = withFailed(new Map([...applied, ['B', { ip: '10.0.0.3', kbps: 1000 }]]), new Set(['10.0.0.2']));
    assert.deepEqual(known.get('A')?.kbps, Number.NaN);
    assert.deepEqual(known.get('B'), { ip: '10.0.0.3', kbps: 1000 });
  });
});

describe('speed limits: the limits wanted, restored and checked', () => {
  test('of two peers with one class id, the first by public key gets it, whatever their order', () => {
    const { want, problems } = wantedLimits([peer('KB', '10.1.0.2', 1000), peer('KA', '10.0.0.2', 2000)]);
    assert.deepEqual([...want.keys()], ['KA']);
    assert.deepEqual(problems, ['peer KB: 10.1.0.2 has the class id of 10.0.0.2 (a subnet larger than /16)']);
  });

  test("restored: the remembered exact rate, else the host's; none without a map entry or an IPv4 address", () => {
    const state = host({ '10.0.0.2': '2Mbit', '10.0.0.3': '1500Mbit' });
    const remembered = new Map<string, Limit>([['A', { ip: '10.0.0.2', kbps: 2001 }]]);
    const peers = new Map([
      ['A', ['10.0.0.2']],
      ['B', ['10.0.0.3', 'fd00::3']],
      ['C', ['10.0.0.4']],
      ['D', ['fd00::5']],
    ]);
    assert.deepEqual(
      restoredLimits(state, remembered, peers),
      new Map([
        ['A', { ip: '10.0.0.2', kbps: 2001 }],
        ['B', { ip: '10.0.0.3', ip6: 'fd00::3', kbps: 1_500_000 }],
      ]),
    );
  });

  test('the drift check names each difference: rate, queue, stray class and entry, a missing table', () => {
    const wanted = checkedLimits([peer('A', '10.0.0.2', 2000)]);
    assert.deepEqual(driftOf(PLACE, host({ '10.0.0.2': '2Mbit' }), wanted), []);
    const state = host({ '10.0.0.2': '2Mbit' });
    state.wg.classes.set(0x2, { rate: '3Mbit', ceil: '3Mbit', leaf: true });
    state.wg.classes.set(0x5, { rate: '1Mbit', ceil: '1Mbit', leaf: true });
    state.uplink.classes.set(0x2, { rate: '2Mbit', ceil: '2Mbit', leaf: false });
    state.elements.set('10.0.0.9', '1:9');
    assert.deepEqual(driftOf(PLACE, state, checkedLimits([peer('A', '10.0.0.2', 2000, 'fd00::2')])), [
      'nft table ip6 vpnpanel_shape is missing',
      'speed limit of 10.0.0.2: class 1:2 on vp1 is 3Mbit, not 2Mbit',
      'class 1:5 on vp1 is of no limited peer',
      'speed limit of 10.0.0.2: class 1:2 on vp1s has lost its queue',
      'map entry 10.0.0.9 is of no limited peer',
    ]);
  });
});
