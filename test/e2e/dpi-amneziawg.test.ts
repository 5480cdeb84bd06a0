/**
 * The DPI test, as root: what the node's uplink shows of a client's handshake and traffic, as tshark's WireGuard
 * heuristic dissector (`wg` on UDP, on by default in tshark 4.x) sees it. The capture is of the veth the client
 * reaches the server through (PREFIX-vh in the host namespace), while a client connects and pings.
 *
 * For a plain WireGuard server (wireguard-go) the dissector recognises the packets: the control, without which the
 * test would prove nothing. For an AmneziaWG server (amneziawg-go) it recognises none, and no UDP payload is a
 * 148-byte handshake initiation starting `01 00 00 00` or a 92-byte response starting `02 00 00 00`.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ExecRunner } from '../../src/agent/commands.ts';
import type { ServerSpec } from '../../src/agent/driver.ts';
import { WireGuardDriver } from '../../src/agent/wireguard/driver.ts';
import type { Obfuscation } from '../../src/domain/protocols.ts';
import { generateKeyPair } from '../../src/domain/wireguard-keys.ts';
import { CHILD_LOG_DIR, killPids, NetLab, requireRoot, run, unusedPrefix, waitFor } from '../support/netns.ts';

const skip = requireRoot([
  ['amneziawg-go', 'bash scripts/go-tools.sh'],
  ['tshark', 'tshark'],
]);
const OBFUSCATION: Obfuscation = {
  jc: 4,
  jmin: 40,
  jmax: 700,
  s1: 52,
  s2: 87,
  s3: 19,
  s4: 11,
  h1: '184719263',
  h2: '2036118341-2036119999',
  h3: '977000001',
  h4: '3300000000-3399999999',
};
/** A handshake initiation (type 1) is 148 bytes, a response (type 2) 92: WireGuard's fixed wire image. */
const HANDSHAKES = [
  { size: 148, head: '01000000' },
  { size: 92, head: '02000000' },
];

interface Capture {
  /** Packets the WireGuard dissector recognised. */
  wireguard: number;
  /** Every UDP payload of the exchange, as hex. */
  payloads: string[];
}

describe('DPI: tshark finds WireGuard servers on the uplink, and no AmneziaWG one', { skip, timeout: 60_000 }, () => {
  let lab: NetLab;
  let driver: WireGuardDriver;
  let dir: string;
  const port = 40_000 + randomInt(20_000);

  before(async () => {
    lab = await NetLab.create(`aw${(await unusedPrefix('p')).slice(2)}`);
    dir = mkdtempSync(join(tmpdir(), 'vpn-panel-dpi-'));
    const runner = new ExecRunner(CHILD_LOG_DIR);
    driver = new WireGuardDriver({ runner, namePrefix: lab.prefix, hostNetns: lab.hostNs, amneziawg: true });
  });

  after(async () => {
    for (const id of [1, 2]) await driver?.down(id).catch(() => undefined);
    await driver?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    assert.deepEqual(await lab?.cleanup(), []);
  });

  /** Captures the uplink while a client of server `id` (`spec` beside it) connects and pings; then reads it. */
  async function captureClient(id: number, extra: Partial<ServerSpec>): Promise<Capture> {
    const spec: ServerSpec = {
      serverId: id,
      privateKey: generateKeyPair().privateKey,
      listenPort: port + id,
      address: `10.8${id}.0.1/24`,
      mtu: 1420,
      ...extra,
    };
    const clientKey = generateKeyPair();
    const { publicKey } = await driver.up(spec);
    await driver.setPeers(id, [{ publicKey: clientKey.publicKey, allowedIp: `10.8${id}.0.2/32`, speedLimitKbps: 0 }]);
    const file = join(dir, `server-${id}.pcapng`);
    const tshark = await startCapture(`${lab.prefix}-vh`, `udp port ${spec.listenPort}`, file);
    const client = await lab.connectClient({
      serverPublicKey: publicKey,
      endpoint: lab.hostIp,
      port: spec.listenPort,
      privateKey: clientKey.privateKey,
      address: `10.8${id}.0.2/24`,
      allowedIps: [`10.8${id}.0.0/24`],
      ...(spec.obfuscation === undefined ? {} : { obfuscation: spec.obfuscation }),
    });
    assert.ok(await lab.waitForPing(`10.8${id}.0.1`), 'the client gets through');
    assert.ok(await lab.ping(`10.8${id}.0.1`, 5));
    await client.close();
    await killPids([tshark.pid ?? -1]);
    const recognised = await run('tshark', ['-r', file, '-Y', 'wg', '-T', 'fields', '-e', 'frame.number']);
    const payloads = await run('tshark', ['-r', file, '-Y', 'udp', '-T', 'fields', '-e', 'udp.payload']);
    return {
      wireguard: recognised.split('\n').filter((l) => l !== '').length,
      payloads: payloads.split('\n').filter((l) => l !== ''),
    };
  }

  /** tshark capturing `iface` of the host namespace into `file`; resolves once it captures. */
  async function startCapture(iface: string, filter: string, file: string): Promise<ChildProcess> {
    const args = ['netns', 'exec', lab.hostNs, 'tshark', '-q', '-i', iface, '-f', filter, '-w', file];
    const child = spawn('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    lab.track(child);
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    await waitFor(
      `tshark to capture on ${iface}`,
      async () => {
        if (child.exitCode !== null) throw new Error(`tshark exited: ${stderr}`);
        return stderr.includes('Capturing on') ? true : undefined;
      },
      10_000,
      50,
    );
    return child;
  }

  const handshakesIn = (payloads: readonly string[]): string[] =>
    payloads.filter((hex) => HANDSHAKES.some((h) => hex.length === 2 * h.size && hex.startsWith(h.head)));

  test('WireGuard (the control): the dissector recognises the packets; the handshakes have their image', async () => {
    const capture = await captureClient(1, {});
    assert.ok(capture.wireguard > 0, 'tshark recognises WireGuard');
    assert.equal(capture.wireguard, capture.payloads.length, 'every packet of the exchange');
    assert.ok(handshakesIn(capture.payloads).length >= 2, 'an initiation of 148 bytes and a response of 92');
  });

  test('AmneziaWG: the dissector recognises none of the packets, and none is a WireGuard handshake', async () => {
    const capture = await captureClient(2, { protocol: 'amneziawg', obfuscation: OBFUSCATION });
    assert.ok(capture.payloads.length > 10, `the exchange was captured (${capture.payloads.length} packets)`);
    assert.equal(capture.wireguard, 0, 'tshark recognises no WireGuard');
    assert.deepEqual(handshakesIn(capture.payloads), []);
  });
});
