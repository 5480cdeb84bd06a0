import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { ExecRunner } from '../../src/agent/commands.ts';
import {
  type Cidr,
  blockedPrefixes,
  ensureIsolation,
  hostTableText,
  isolationProblems,
  type IsolationPlace,
  normaliseTable,
  parseAllowCidrs,
  parseCidr,
  replaceScript,
  serverTableText,
} from '../../src/agent/isolation.ts';
import { ConfigError, nodeDriverConfig } from '../../src/main/config.ts';
import { ISOLATED, ISOLATION_PLACE } from '../support/isolation.ts';
import { CHILD_LOG_DIR } from '../support/netns.ts';

function allow(text: string): Cidr[] {
  const parsed = parseAllowCidrs(text);
  if (typeof parsed === 'string') throw new Error(parsed);
  return parsed;
}

/** True when `address` falls in one of `prefixes`. */
function covered(prefixes: readonly string[], address: string): boolean {
  const point = parseCidr(address);
  assert.ok(point !== null, address);
  return prefixes.some((p) => {
    const range = parseCidr(p);
    return range !== null && range.family === point.family && range.start <= point.start && point.end <= range.end;
  });
}

const rulesOf = (text: string, chain: string): string[] =>
  (new RegExp(`chain ${chain} \\{\\n([^}]*)\\}`).exec(text)?.[1] ?? '')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('type '));

describe('client isolation: the blocked set', () => {
  const { v4, v6 } = blockedPrefixes([]);

  test('blocks private, CGNAT, link-local (metadata), loopback, this-network, multicast and reserved space', () => {
    for (const ip of [
      ...['10.0.0.1', '10.255.255.255', '172.16.0.1', '172.31.255.254', '192.168.1.1', '100.64.0.1', '100.127.255.255'],
      ...['169.254.169.254', '169.254.1.1', '127.0.0.1', '0.0.0.0', '0.1.2.3', '224.0.0.1', '239.255.255.250'],
      ...['240.0.0.1', '255.255.255.255', '192.0.0.8', '198.18.0.1'],
    ]) {
      assert.ok(covered(v4, ip), `${ip} is blocked`);
    }
    for (const ip of ['::1', '::', 'fc00::1', 'fd12:3456::1', 'fe80::1', 'febf::1', 'ff02::1', '::ffff:10.0.0.1']) {
      assert.ok(covered(v6, ip), `${ip} is blocked`);
    }
  });

  test('leaves the public internet and the documentation ranges tests use as the internet open', () => {
    for (const ip of [
      ...['192.0.2.1', '198.51.100.7', '203.0.113.9', '8.8.8.8', '1.1.1.1', '100.63.255.255', '100.128.0.0'],
      ...['172.15.255.255', '172.32.0.0', '192.167.255.255', '192.169.0.0', '11.0.0.0', '9.255.255.255'],
      ...['223.255.255.255', '169.253.255.255', '169.255.0.0'],
    ]) {
      assert.ok(!covered(v4, ip), `${ip} is open`);
    }
    for (const ip of ['2001:db8::1', '2606:4700::1111', 'fec0::1', 'fbff::1']) {
      assert.ok(!covered(v6, ip), `${ip} is open`);
    }
  });

  test('NODE_ALLOW_CIDRS takes exactly its ranges out, in either family', () => {
    const opened = blockedPrefixes(allow('10.20.0.0/16, 169.254.169.254/32,fd00:1::/32'));
    for (const ip of ['10.20.0.0', '10.20.255.255', '169.254.169.254']) {
      assert.ok(!covered(opened.v4, ip), `${ip} is opened`);
    }
    for (const ip of ['10.19.255.255', '10.21.0.0', '10.0.0.1', '169.254.169.253', '169.254.169.255', '172.16.0.1']) {
      assert.ok(covered(opened.v4, ip), `${ip} stays blocked`);
    }
    assert.ok(!covered(opened.v6, 'fd00:1::5'));
    assert.ok(covered(opened.v6, 'fd00:2::5'));
    assert.ok(covered(opened.v6, 'fd00::5'));
  });

  test('an allowed range wider than a blocked one removes it whole; an empty v4 set leaves out its rule', () => {
    const text = serverTableText(ISOLATION_PLACE, { ...ISOLATED, allow: allow('0.0.0.0/0') });
    assert.doesNotMatch(text, /@blocked4/);
    assert.match(text, /ip6 daddr @blocked6 drop/);
  });

  test('NODE_ALLOW_CIDRS must be networks', () => {
    for (const bad of ['10.0.0.1', '10.0.0.1/8', '10.0.0.0/33', 'fd00::/129', 'x', '10.0.0.0/8;x', '1.2.3.256/32']) {
      assert.equal(typeof parseAllowCidrs(bad), 'string', bad);
    }
    assert.deepEqual(parseAllowCidrs(''), []);
    assert.equal((parseAllowCidrs('10.0.0.0/8,fd00::/8') as Cidr[]).length, 2);
  });

  test('NODE_ALLOW_CIDRS reaches the node driver configuration; a bad one is a one-line ConfigError naming it', () => {
    assert.deepEqual(nodeDriverConfig({}).nodeAllowCidrs, []);
    const config = nodeDriverConfig({ NODE_ALLOW_CIDRS: ' 10.8.0.0/16 ,fd00::/8' });
    assert.deepEqual(config.nodeAllowCidrs, allow('10.8.0.0/16,fd00::/8'));
    assert.throws(
      () => nodeDriverConfig({ NODE_ALLOW_CIDRS: '10.8.0.0/16,10.9.0.1/16' }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.equal(
          error.message,
          "invalid configuration: NODE_ALLOW_CIDRS must be comma-separated networks: '10.9.0.1/16' " +
            'is not an IPv4 or IPv6 network such as 10.8.0.0/16 or fd00::/8',
        );
        return true;
      },
    );
  });
});

describe('client isolation: the tables', () => {
  test('by default: no client to client, the blocked sets, the server only for ping', () => {
    const text = serverTableText(ISOLATION_PLACE, ISOLATED);
    assert.deepEqual(rulesOf(text, 'forward'), [
      'iifname "vp1" oifname "vp1" drop',
      'iifname "vp1" ip daddr @blocked4 drop',
      'iifname "vp1" ip6 daddr @blocked6 drop',
    ]);
    assert.deepEqual(rulesOf(text, 'input'), [
      'iifname != "vp1" accept',
      'ct state established,related accept',
      'ip daddr 10.128.0.1 icmp type echo-request accept',
      'drop',
    ]);
    assert.match(text, /^table inet vpnpanel_iso \{/);
  });

  test('client_to_client accepts from the interface back out of it, before the blocked set (private space)', () => {
    const forward = rulesOf(serverTableText(ISOLATION_PLACE, { ...ISOLATED, clientToClient: true }), 'forward');
    assert.equal(forward[0], 'iifname "vp1" oifname "vp1" accept');
    assert.equal(forward.length, 3);
  });

  test('dns_on_server opens udp and tcp 53 on the server address, nothing else', () => {
    const input = rulesOf(serverTableText(ISOLATION_PLACE, { ...ISOLATED, dnsOnServer: true }), 'input');
    assert.deepEqual(input.slice(2), [
      'ip daddr 10.128.0.1 icmp type echo-request accept',
      'ip daddr 10.128.0.1 udp dport 53 accept',
      'ip daddr 10.128.0.1 tcp dport 53 accept',
      'drop',
    ]);
  });

  test('the host table drops everything from the veth; scripts replace a table in one transaction', () => {
    const host = hostTableText(ISOLATION_PLACE);
    assert.deepEqual(rulesOf(host, 'input'), ['iifname "vp1h" drop']);
    const table = 'table inet vpnpanel_iso_vp1';
    const replaced = new RegExp(`^${table} \\{\\}\ndelete ${table}\n${table} \\{`);
    assert.match(replaceScript(host), replaced);
  });

  test("a listing compares equal despite nft's layout, element order, bare /32 and dotted mapped addresses", () => {
    const text = serverTableText(ISOLATION_PLACE, { ...ISOLATED, allow: allow('169.254.169.254/32') });
    const listed = text
      .replace('169.254.169.255/32', '169.254.169.255')
      .replace('::ffff:0:0/96', '::ffff:0.0.0.0/96')
      .replace(/elements = \{ ([^}]*) \}/, (_, list: string) => {
        return `elements = { ${list.split(', ').reverse().join(',\n\t\t\t     ')} }`;
      });
    assert.notEqual(listed, text);
    assert.equal(normaliseTable(listed), normaliseTable(text));
    assert.notEqual(normaliseTable(text.replace('10.0.0.0/8', '10.0.0.0/9')), normaliseTable(text));
    assert.notEqual(normaliseTable(text.replace(' oifname "vp1" drop', ' oifname "vp1" accept')), normaliseTable(text));
  });
});

const notRoot = process.getuid?.() !== 0 ? 'needs root (network namespaces)' : false;

describe('client isolation: real nft in a namespace of its own', { skip: notRoot }, () => {
  test('what is loaded lists as expected; a deleted rule or table is seen and put back', async () => {
    const ns = `iso${randomInt(1_000_000)}t`;
    const runner = new ExecRunner(CHILD_LOG_DIR);
    const place: IsolationPlace = { ...ISOLATION_PLACE, serverNetns: ns, hostNetns: ns };
    const policy = { clientToClient: false, dnsOnServer: true, allow: allow('10.20.0.0/16,fd00::/8') };
    execFileSync('ip', ['netns', 'add', ns]);
    try {
      assert.deepEqual(await isolationProblems(runner, place, policy), [
        `table inet vpnpanel_iso in ${ns} is missing`,
        `table inet vpnpanel_iso_vp1 in ${ns} is missing`,
      ]);
      const failures: string[] = [];
      await ensureIsolation(runner, place, policy, failures);
      assert.deepEqual(failures, []);
      assert.deepEqual(await isolationProblems(runner, place, policy), []);
      assert.deepEqual(await isolationProblems(runner, place, { ...policy, clientToClient: true }), [
        `table inet vpnpanel_iso in ${ns} differs from the expected rules`,
      ]);

      const nft = (...args: string[]): string =>
        execFileSync('ip', ['netns', 'exec', ns, 'nft', ...args], { encoding: 'utf8' });
      const forward = nft('-a', 'list', 'chain', 'inet', 'vpnpanel_iso', 'forward');
      const handle = /iifname "vp1" oifname "vp1" drop # handle (\d+)/.exec(forward)?.[1];
      assert.ok(handle !== undefined);
      nft('delete', 'rule', 'inet', 'vpnpanel_iso', 'forward', 'handle', handle);
      nft('delete', 'element', 'inet', 'vpnpanel_iso', 'blocked4', '{ 169.254.0.0/16 }');
      nft('delete', 'table', 'inet', 'vpnpanel_iso_vp1');
      assert.equal((await isolationProblems(runner, place, policy)).length, 2);
      await ensureIsolation(runner, place, policy, failures);
      assert.deepEqual(failures, []);
      assert.deepEqual(await isolationProblems(runner, place, policy), []);
    } finally {
      execFileSync('ip', ['netns', 'del', ns]);
    }
  });
});
