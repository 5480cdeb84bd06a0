/**
 * The text of speed limits (src/agent/shaping/tc-nft.ts): what tc and nft print, read back; the lines of a failed
 * `tc -batch` told apart; a table made afresh. The commands each operation runs are in ../speed-limits.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { batchFailures, type PrintedState, parseState, tableScript } from '../../../src/agent/shaping/tc-nft.ts';
import { listedShapingTable } from '../../support/recorded-host.ts';

const PLACE = { netns: 'vp-s1', wg: 'vp1', uplink: 'vp1s' };
const HTB = 'qdisc htb 1: root refcnt 3 r2q 10 default 0 direct_packets_stat 0 direct_qlen 1000\n';

const FORWARD = [
  'oifname "vp1" meta priority set ip daddr map @limited',
  'oifname "vp1s" meta priority set ip saddr map @limited',
];

function printed(overrides: Partial<PrintedState>): PrintedState {
  return { table4: '', table6: '', wgRoot: '', wgClasses: '', uplinkRoot: '', uplinkClasses: '', ...overrides };
}

describe('speed limits: reading what tc and nft print', () => {
  test('a table holding exactly our chains is ok; a rule missing or added makes it damaged; none is missing', () => {
    const elements = '10.0.0.2 : 1:2, 10.0.1.4 : 1:104';
    const cases: [string, string, string][] = [
      ['our chains', listedShapingTable('ip', elements), 'ok'],
      ['a rule missing', listedShapingTable('ip', elements, FORWARD.slice(0, 1)), 'damaged'],
      ['a rule added', listedShapingTable('ip', elements, [...FORWARD, 'counter accept']), 'damaged'],
      ['no table', '', 'missing'],
    ];
    for (const [name, table4, expected] of cases) {
      const state = parseState(PLACE, printed({ table4 }));
      assert.deepEqual(state.tables, { ip: expected, ip6: 'missing' }, name);
      const entries =
        expected === 'missing'
          ? []
          : [
              ['10.0.0.2', '1:2'],
              ['10.0.1.4', '1:104'],
            ];
      assert.deepEqual([...state.elements], entries, `${name}: the entries are read whatever the chains`);
    }
  });

  test('classes are ours only under our HTB root: rate, ceil, and whether a queue of ours is attached', () => {
    const classes =
      'class htb 1:2 root leaf 2: prio 0 rate 2Mbit ceil 2Mbit burst 3028b cburst 3028b \n' +
      'class htb 1:104 root prio 0 rate 1500Mbit ceil 1500Mbit burst 1875000b cburst 1875000b \n' +
      'class hfsc 2:5 root \n';
    const state = parseState(
      PLACE,
      printed({
        wgRoot: HTB,
        wgClasses: classes,
        uplinkRoot: 'qdisc noqueue 0: root refcnt 2\n',
        uplinkClasses: classes,
      }),
    );
    assert.deepEqual(state.wg, {
      htbRoot: true,
      classes: new Map([
        [0x2, { rate: '2Mbit', ceil: '2Mbit', leaf: true }],
        [0x104, { rate: '1500Mbit', ceil: '1500Mbit', leaf: false }],
      ]),
    });
    assert.deepEqual(state.uplink, { htbRoot: false, classes: new Map() });
  });

  test("a failed `tc -force -batch`: each failed line's message by its number, several lines of one joined", () => {
    const stderr = [
      'RTNETLINK answers: File exists',
      'Command failed -:1',
      'Error: Specified class not found.',
      'We have an error talking to the kernel',
      'Command failed -:3',
      'Command failed -:4',
      '',
    ].join('\n');
    assert.deepEqual(
      batchFailures(stderr),
      new Map([
        [1, 'RTNETLINK answers: File exists'],
        [3, 'Error: Specified class not found. | We have an error talking to the kernel'],
        [4, 'failed'],
      ]),
    );
    assert.deepEqual(batchFailures('Cannot find device "vp1"\n'), new Map(), 'no line named: not a batch failure');
  });
});

describe('speed limits: a table made afresh', () => {
  test('declared, deleted and made again in one script, so a damaged table is replaced in one transaction', () => {
    const script = tableScript(PLACE, 'ip6', new Map([['fd00::2', '1:2']]));
    assert.equal(
      script,
      [
        'table ip6 vpnpanel_shape {}',
        'delete table ip6 vpnpanel_shape',
        'table ip6 vpnpanel_shape {',
        '  map limited {',
        '    type ipv6_addr : classid',
        '    elements = { fd00::2 : 1:2 }',
        '  }',
        '  chain forward {',
        '    type filter hook forward priority 0; policy accept;',
        '    oifname "vp1" meta priority set ip6 daddr map @limited',
        '    oifname "vp1s" meta priority set ip6 saddr map @limited',
        '  }',
        '  chain output {',
        '    type filter hook output priority 0; policy accept;',
        '    oifname "vp1" meta priority set ip6 daddr map @limited',
        '  }',
        '}',
        '',
      ].join('\n'),
    );
    assert.doesNotMatch(tableScript(PLACE, 'ip', new Map()), /elements/, 'an empty map lists no elements');
  });
});
