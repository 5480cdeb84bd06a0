/**
 * Kernel allowances on a real namespace, as root: src/agent/quota/quotas.ts sets a peer's quota in a "server"
 * namespace whose veth stands in for the WireGuard interface (the rules match the interface by name, whatever
 * carries it), and UDP floods through it in each direction. What passes is counted after the quota, in the
 * receiving namespace: it stops within one packet of the allowance; both directions count toward one quota;
 * small packets count three times; a limit moved keeps what was counted. Namespaces are removed in `after()`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ExecRunner } from '../../../src/agent/commands.ts';
import { Quotas } from '../../../src/agent/quota/quotas.ts';
import { CHILD_LOG_DIR, randomPrefix, requireRoot, run } from '../../support/netns.ts';

const skip = requireRoot();
const PEER_KEY = Buffer.alloc(32, 7).toString('base64');
const SERVER_IP = '10.77.0.1';
const PEER_IP = '10.77.0.2';
const PORT = 9999;
/** A UDP payload that makes a 1428-byte IP packet. */
const PAYLOAD = 1400;
const PACKET = PAYLOAD + 28;

/** Sends `count` datagrams of `size` bytes to `ip`, one after another; the ones the quota drops fail (EPERM). */
const FLOOD = `
const socket = require('node:dgram').createSocket('udp4');
const [ip, count, size] = process.argv.slice(1);
const payload = Buffer.alloc(Number(size));
let left = Number(count);
const next = () => (left-- > 0 ? socket.send(payload, ${PORT}, ip, next) : socket.close());
next();
`;

describe('kernel allowances on a real namespace (nftables quota)', { skip }, () => {
  const prefix = `qt${randomPrefix('q').slice(2)}`;
  const server = `${prefix}-s`;
  const peer = `${prefix}-p`;
  const place = { netns: server, wg: `${prefix}s` };
  const quotas = new Quotas(new ExecRunner(CHILD_LOG_DIR));

  async function flood(from: string, to: string, count: number, size = PAYLOAD): Promise<void> {
    await run('ip', ['netns', 'exec', from, process.execPath, '-e', FLOOD, to, String(count), String(size)]);
  }

  /** The bytes of our UDP packets that reached `netns` (counted after the quota, then dropped: no replies). */
  async function received(netns: string): Promise<number> {
    const listed = await run('ip', ['netns', 'exec', netns, 'nft', '-j', 'list', 'counter', 'inet', 'qtcount', 'got']);
    const match = /"bytes":\s*(\d+)/.exec(listed);
    return Number(match?.[1] ?? Number.NaN);
  }

  async function allow(limitBytes: number): Promise<void> {
    const failures: string[] = [];
    await quotas.set(1, place, [{ publicKey: PEER_KEY, allowedIp: `${PEER_IP}/32`, limitBytes }], failures);
    assert.deepEqual(failures, []);
  }

  before(async () => {
    for (const ns of [server, peer]) await run('ip', ['netns', 'add', ns]);
    await run('ip', ['link', 'add', place.wg, 'netns', server, 'type', 'veth', 'peer', `${prefix}p`, 'netns', peer]);
    for (const [ns, dev, ip] of [
      [server, place.wg, SERVER_IP],
      [peer, `${prefix}p`, PEER_IP],
    ] as const) {
      await run('ip', ['-n', ns, 'addr', 'add', `${ip}/24`, 'dev', dev]);
      await run('ip', ['-n', ns, 'link', 'set', dev, 'up']);
      const count =
        'table inet qtcount {\n counter got {}\n chain input {\n type filter hook input priority 0;\n' +
        ` udp dport ${PORT} counter name got drop\n }\n}\n`;
      await run('ip', ['netns', 'exec', ns, 'nft', '-f', '-'], count);
    }
  });

  after(async () => {
    for (const ns of [server, peer]) await run('ip', ['netns', 'del', ns]).catch(() => undefined);
  });

  test('a download stops within one packet of the allowance, and the upload shares the rest', async () => {
    const limit = 1_000_000;
    await allow(limit);
    await flood(server, PEER_IP, 400);
    assert.equal(await received(peer), 400 * PACKET, 'all 571,200 bytes of the download pass');
    await flood(peer, SERVER_IP, 1000);
    const total = (await received(peer)) + (await received(server));
    assert.ok(total <= limit && total > limit - PACKET, `${total} bytes passed of ${limit}`);
    const used = (await quotas.read(1, place)).get(PEER_KEY) ?? 0;
    assert.ok(used >= 1400 * PACKET, `the quota counted what it dropped too: ${used}`);
  });

  test('a limit moved keeps what the quota counted: the next allowance starts from it', async () => {
    const used = (await quotas.read(1, place)).get(PEER_KEY) ?? 0;
    const before = await received(peer);
    await allow(used + 100_000);
    await flood(server, PEER_IP, 200);
    const passed = (await received(peer)) - before;
    assert.ok(passed <= 100_000 && passed > 100_000 - PACKET, `${passed} bytes passed of 100,000`);
    assert.deepEqual(await quotas.inspect(1, place), [], 'the host holds what was set');
  });

  test('packets under 38 bytes count three times, under 376 twice', async () => {
    const used = (await quotas.read(1, place)).get(PEER_KEY) ?? 0;
    await allow(used + 10_000_000);
    await flood(server, PEER_IP, 100, 0);
    await flood(server, PEER_IP, 100, 100);
    const counted = ((await quotas.read(1, place)).get(PEER_KEY) ?? 0) - used;
    assert.equal(counted, 100 * 3 * 28 + 100 * 2 * 128);
  });

  test('a quota changed or removed by hand is reported, and the next set repairs it', async () => {
    const used = (await quotas.read(1, place)).get(PEER_KEY) ?? 0;
    await allow(used + 5000);
    const name = `k${Buffer.from(PEER_KEY, 'base64').toString('hex')}`;
    await run('ip', [
      'netns',
      'exec',
      server,
      'nft',
      'add',
      'quota',
      'inet',
      'vpnpanel_quota',
      name,
      '{ over 9999999999 bytes }',
    ]);
    const changed = await quotas.inspect(1, place);
    assert.match(changed.join('\n'), /kernel allowance ends at 9999999999 bytes/);
    await run('ip', ['netns', 'exec', server, 'nft', 'delete', 'table', 'inet', 'vpnpanel_quota']);
    assert.match((await quotas.inspect(1, place)).join('\n'), /vpnpanel_quota is missing/);
    await quotas.read(1, place);
    await allow(5000);
    assert.deepEqual(await quotas.inspect(1, place), []);
    const before = await received(peer);
    await flood(server, PEER_IP, 10);
    assert.equal((await received(peer)) - before, 3 * PACKET, 'the quota made anew holds again');
  });
});
