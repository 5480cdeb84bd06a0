/**
 * End to end, as root, at the driver's level: an AmneziaWG server (amneziawg-go) carries what a WireGuard server
 * carries. A real amneziawg-go client in its own namespace, configured over its UAPI socket with the server's
 * obfuscation, reaches the internet namespace through the server's NAT (a TCP answer, an iperf3 transfer), over IPv6
 * too (NAT66); a speed limit holds within 25 % both ways; no host service is reachable through the tunnel.
 *
 *   client ns PREFIX-c (amneziawg-go PREFIX-w0) ══ tunnel ══ server ns PREFIX-s1 ── veth, NAT ── host ns PREFIX-h
 *     ── uplink ── internet ns PREFIX-i: TCP listeners on 198.51.100.80 / 2001:db8:1::80, iperf3 on .81
 *
 * A data limit's cut-off needs the agent's metering and the panel: the lead's panel-level test shows it.
 */
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { ExecRunner } from '../../src/agent/commands.ts';
import type { PeerSpec, ServerSpec } from '../../src/agent/driver.ts';
import { WireGuardDriver } from '../../src/agent/wireguard/driver.ts';
import type { Obfuscation } from '../../src/domain/protocols.ts';
import { generateKeyPair } from '../../src/domain/wireguard-keys.ts';
import {
  CHILD_LOG_DIR,
  INTERNET_IP,
  INTERNET_IP6,
  IPERF_IP,
  NetLab,
  requireRoot,
  run,
  UPLINK_HOST_IP,
  unusedPrefix,
  waitFor,
} from '../support/netns.ts';

const skip = requireRoot([
  ['amneziawg-go', 'bash scripts/go-tools.sh'],
  ['iperf3', 'iperf3'],
  ['tc', 'iproute2'],
]);
const PORT = 8080;
const LIMIT_KBPS = 2000;
/** The check: within ±25 %. */
const TOLERANCE = 0.25;
const IPERF_SECONDS = 3;
const SUBNET6 = 'fd7a:a3e1:5c2b:1::';
const OBFUSCATION: Obfuscation = {
  jc: 5,
  jmin: 50,
  jmax: 1000,
  s1: 68,
  s2: 149,
  s3: 32,
  s4: 16,
  h1: '1033911277',
  h2: '1742000000-1742999999',
  h3: '2100000000',
  h4: '3000000000-3100000000',
};

describe('an AmneziaWG server carries traffic like a WireGuard one (amneziawg-go client)', {
  skip,
  timeout: 90_000,
}, () => {
  let lab: NetLab;
  let driver: WireGuardDriver;
  const serverId = 1;
  const listenPort = 40_000 + randomInt(20_000);
  const iperfPort = 20_000 + randomInt(20_000);
  const clientKey = generateKeyPair();
  const spec: ServerSpec = {
    serverId,
    privateKey: generateKeyPair().privateKey,
    listenPort,
    address: '10.81.0.1/24',
    address6: `${SUBNET6}1/64`,
    mtu: 1420,
    protocol: 'amneziawg',
    obfuscation: OBFUSCATION,
  };
  const peer: PeerSpec = {
    publicKey: clientKey.publicKey,
    allowedIp: '10.81.0.2/32',
    allowedIp6: `${SUBNET6}2/128`,
    speedLimitKbps: 0,
  };

  const iperf = (direction: 'upload' | 'download'): Promise<number> =>
    lab.iperf(IPERF_IP, iperfPort, direction, IPERF_SECONDS);

  before(async () => {
    // `aw` and a letter: this helper's names, apart from the other e2e files'.
    lab = await NetLab.create(`aw${(await unusedPrefix('d')).slice(2)}`);
    const internetNs = await lab.addInternet();
    await lab.addIpv6();
    for (const ip of [INTERNET_IP, INTERNET_IP6]) {
      await lab.addInternetAddress(ip);
      await lab.listenTcp(internetNs, ip, PORT, 'internet');
    }
    await lab.listenTcp(lab.hostNs, '0.0.0.0', PORT, 'host');
    await lab.startIperfServer(IPERF_IP, iperfPort);
    driver = new WireGuardDriver({
      runner: new ExecRunner(CHILD_LOG_DIR),
      namePrefix: lab.prefix,
      hostNetns: lab.hostNs,
      amneziawg: true,
    });
    const { publicKey } = await driver.up(spec);
    await driver.setPeers(serverId, [peer]);
    const client = await lab.connectClient({
      serverPublicKey: publicKey,
      endpoint: lab.hostIp,
      port: listenPort,
      privateKey: clientKey.privateKey,
      address: '10.81.0.2/24',
      allowedIps: ['0.0.0.0/0', '::/0'],
      obfuscation: OBFUSCATION,
    });
    // What wg-quick would route into the tunnel: the internet's and the uplink's addresses (the endpoint's /24
    // stays on the veth).
    const via = (prefix: string): Promise<string> =>
      run('ip', ['-n', lab.clientNs, 'route', 'add', prefix, 'dev', client.iface]);
    await run('ip', ['-n', lab.clientNs, 'addr', 'add', `${SUBNET6}2/64`, 'dev', client.iface, 'nodad']);
    for (const prefix of ['198.51.100.0/24', '203.0.113.252/30', '2001:db8:1::/64']) await via(prefix);
  });

  after(async () => {
    await driver?.down(serverId).catch(() => undefined);
    await driver?.close();
    assert.deepEqual(await lab?.cleanup(), []);
  });

  test('handshake, ping and a TCP answer through both NATs; an iperf3 transfer', async () => {
    assert.ok(await lab.waitForPing('10.81.0.1'), 'the client pings the server through the tunnel');
    const answer = await waitFor(
      'a TCP answer through the tunnel',
      () => lab.tcpRead(lab.clientNs, INTERNET_IP, PORT),
      5000,
    );
    assert.equal(answer, `internet ${UPLINK_HOST_IP}`, 'the listener sees the uplink address: through NAT');
    const mbps = await iperf('download');
    assert.ok(mbps > 10, `unlimited, the tunnel carries ${mbps.toFixed(1)} Mbit/s`);
    const [counters] = (await driver.readCounters(serverId)).peers;
    assert.ok((counters?.txBytes ?? 0) > 1_000_000, JSON.stringify(counters));
  });

  test('IPv6: the server address answers in the tunnel and the internet is reached through NAT66', async () => {
    assert.ok(await lab.waitForPing(`${SUBNET6}1`), "the client pings the server's IPv6 address");
    const answer = await waitFor('a TCP answer over IPv6', () => lab.tcpRead(lab.clientNs, INTERNET_IP6, PORT), 5000);
    assert.match(answer, /^internet 2001:db8:f::1$/, 'the listener sees the uplink IPv6 address');
  });

  test('no host service is reachable through the tunnel', async () => {
    assert.ok(
      await lab.tcpConnects(await lab.addInternet(), UPLINK_HOST_IP, PORT),
      'the host listener answers (control)',
    );
    assert.equal(await lab.tcpConnects(lab.clientNs, UPLINK_HOST_IP, PORT), false, 'the uplink address');
    assert.equal(await lab.tcpConnects(lab.clientNs, '10.81.0.1', PORT), false, "the server's tunnel address");
  });

  test(`a speed limit of ${LIMIT_KBPS} kbit/s holds within ${TOLERANCE * 100} % both ways`, async () => {
    await driver.setPeers(serverId, [{ ...peer, speedLimitKbps: LIMIT_KBPS }]);
    const limit = LIMIT_KBPS / 1000;
    for (const direction of ['download', 'upload'] as const) {
      const mbps = await iperf(direction);
      assert.ok(Math.abs(mbps - limit) <= limit * TOLERANCE, `${direction}: ${mbps.toFixed(2)} Mbit/s, limit ${limit}`);
    }
    assert.deepEqual(await driver.inspect(spec, [{ ...peer, speedLimitKbps: LIMIT_KBPS }]), []);
  });
});
