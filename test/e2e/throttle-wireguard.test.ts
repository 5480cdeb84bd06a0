/**
 * End to end on the node, as root, on a real WireGuard data plane (wireguard-go): throttle at the limit (issue 26
 * item 5). An Agent with the WireGuard driver in the lab's host namespace, metering every second as a node does,
 * is given a device whose limits say `quotaAction: 'throttle'` at 2000 kbit/s with a 4 MB allowance and no speed
 * limit of its own; a wg-quick client uses it up with a ping flood. It stays connected, moves about 2 Mbit/s each
 * way (iperf3, ±40 %) while the ledger keeps counting it, and a top-up gives it full speed back.
 *
 *   client ns PREFIX-c (wg-quick PREFIX-q1) ══ tunnel ══ host ns PREFIX-h (the node) ── uplink, NAT ──
 *        internet ns PREFIX-i: iperf3 -s on 198.51.100.81
 *
 * Everything lives in namespaces of this file's prefix (`th…`), removed in `after()`, pass or fail.
 */
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Agent } from '../../src/agent/agent.ts';
import { ExecRunner } from '../../src/agent/commands.ts';
import { type CutoffReason, UNOBSERVED_NODE } from '../../src/agent/metrics.ts';
import type { AgentPeer, PeerLimits } from '../../src/agent/protocol.ts';
import { WireGuardDriver } from '../../src/agent/wireguard/driver.ts';
import { generateKeyPair } from '../../src/domain/wireguard-keys.ts';
import { NO_LIMITS } from '../support/agent-peers.ts';
import { need } from '../support/lab-panel.ts';
import { CHILD_LOG_DIR, hostOf, IPERF_IP, NetLab, randomPrefix, requireRoot, run } from '../support/netns.ts';

const skip = requireRoot([
  ['iperf3', 'iperf3'],
  ['wg-quick', 'wireguard-tools'],
  ['tc', 'iproute2'],
  ['nft', 'nftables'],
]);
/** About 30 s: wg-quick, a ping flood past the allowance, four to seven 3-second iperf3 runs. */
const SUITE_TIMEOUT_MS = 150_000;
const SERVER_ID = 1;
const THROTTLE_KBPS = 2000;
/** The check: throttle_speed within ±40 %. */
const TOLERANCE = 0.4;
/** Unlimited, the same tunnel carries hundreds of Mbit/s on the 2-core test machine. */
const UNLIMITED_MIN_MBPS = 10;
const ALLOWANCE_BYTES = 4_000_000;
const IPERF_SECONDS = 3;
/** A 4 MB allowance is crossed within this by a ping flood. */
const THROTTLED_WITHIN_MS = 40_000;

describe('throttle at the limit on a real WireGuard node (wg-quick client, iperf3)', {
  skip,
  timeout: SUITE_TIMEOUT_MS,
}, () => {
  let lab: NetLab | undefined;
  let driver: WireGuardDriver | undefined;
  let agent: Agent | undefined;
  const observed: CutoffReason[] = [];
  /** When each was observed (Date.now()). */
  const observedAtMs: number[] = [];
  const errors: unknown[] = [];
  const serverKeys = generateKeyPair();
  const clientKeys = generateKeyPair();
  const listenPort = 40_000 + randomInt(20_000);
  const iperfPort = 20_000 + randomInt(20_000);
  const spec = {
    serverId: SERVER_ID,
    privateKey: serverKeys.privateKey,
    listenPort,
    address: '10.132.0.1/24',
    mtu: 1420,
  };
  const peer = (limits: Partial<PeerLimits>): AgentPeer => ({
    deviceId: 1,
    publicKey: clientKeys.publicKey,
    allowedIp: '10.132.0.2/32',
    speedLimitKbps: 0,
    limits: { ...NO_LIMITS, quotaAction: 'throttle', throttleKbps: THROTTLE_KBPS, ...limits },
  });

  const measure = (direction: 'upload' | 'download'): Promise<number> =>
    need(lab, 'the lab').iperf(IPERF_IP, iperfPort, direction, IPERF_SECONDS);

  /** Whether the client's peer is on the server's interface. */
  async function onInterface(): Promise<boolean> {
    const n = need(driver, 'the driver').names(SERVER_ID);
    return (await run('ip', ['netns', 'exec', n.netns, 'wg', 'show', n.iface, 'peers'])).includes(clientKeys.publicKey);
  }

  /** The device's meter as the node booked it, and its journal, as the panel would collect them. */
  function booked(): { journalId: string; meter: number } {
    const report = need(agent, 'the agent').collectUsage(null);
    const meters = report.batches.flatMap((b) => b.entries).map((e) => e.meter);
    return { journalId: report.journalId, meter: Math.max(0, ...meters) };
  }

  /**
   * Asserts that `direction` measures the throttle speed ±40 %. A second run is allowed, as in the speed-limit
   * test: on the shared machine one run can be descheduled for a while; a wrong limit misses both.
   */
  async function assertThrottled(direction: 'upload' | 'download', t: { diagnostic(m: string): void }) {
    const [low, high] = [(THROTTLE_KBPS / 1000) * (1 - TOLERANCE), (THROTTLE_KBPS / 1000) * (1 + TOLERANCE)];
    const runs: number[] = [];
    do runs.push(await measure(direction));
    while (runs.length < 2 && !runs.some((mbps) => mbps >= low && mbps <= high));
    const shown = runs.map((mbps) => mbps.toFixed(3)).join(', then ');
    t.diagnostic(`${direction} throttled at ${THROTTLE_KBPS} kbit/s: ${shown} Mbit/s`);
    assert.ok(
      runs.some((mbps) => mbps >= low && mbps <= high),
      `${direction} ${shown} Mbit/s: within ${low}-${high}`,
    );
  }

  before(async () => {
    lab = await NetLab.create(`th${randomPrefix('x').slice(2)}`);
    await lab.startIperfServer(IPERF_IP, iperfPort);
    driver = new WireGuardDriver({
      runner: new ExecRunner(CHILD_LOG_DIR),
      namePrefix: lab.prefix,
      hostNetns: lab.hostNs,
      implementation: 'wireguard-go',
    });
    const cutOff = (reason: CutoffReason) => {
      observed.push(reason);
      observedAtMs.push(Date.now());
    };
    const observer = { ...UNOBSERVED_NODE, cutOff };
    agent = new Agent(driver, 'test', { observer });
  });

  after(async () => {
    await agent?.stop();
    await driver?.down(SERVER_ID).catch(() => undefined);
    await driver?.close();
    assert.deepEqual((await lab?.cleanup()) ?? [], [], 'cleanup left nothing behind');
  });

  test('past its allowance it stays connected at its throttle speed each way, and is still counted', async (t) => {
    const l = need(lab, 'the lab');
    const a = need(agent, 'the agent');
    await a.applyServer({
      server: spec,
      peers: [peer({ remainingBytes: ALLOWANCE_BYTES, dataLimit: ALLOWANCE_BYTES })],
    });
    a.start((error) => errors.push(error));
    const config = [
      '[Interface]',
      `PrivateKey = ${clientKeys.privateKey}`,
      'Address = 10.132.0.2/32',
      'MTU = 1420',
      '',
      '[Peer]',
      `PublicKey = ${serverKeys.publicKey}`,
      'AllowedIPs = 0.0.0.0/0',
      `Endpoint = ${l.hostIp}:${listenPort}`,
      '',
    ].join('\n');
    await l.wgQuickUp(`${l.prefix}-q1`, config);
    assert.ok(await l.waitForPing(hostOf(spec.address), 8000), 'the client reaches the server through the tunnel');

    // Past the allowance with a ping flood to the server's tunnel address (1428-byte packets each way, as fast as
    // they are answered): near the limit the quota drops what passes it (docs/dataplane.md, "Where each byte is
    // counted"), which would stall a TCP download and its iperf3 server; pings just go on until the node throttles.
    const startedMs = Date.now();
    const flood = [
      'netns',
      'exec',
      l.clientNs,
      'ping',
      '-n',
      '-q',
      '-f',
      '-s',
      '1400',
      '-w',
      '2',
      hostOf(spec.address),
    ];
    while (!observed.includes('throttled') && Date.now() - startedMs < THROTTLED_WITHIN_MS)
      await run('ip', flood).catch(() => '');
    t.diagnostic(`throttled ${(observedAtMs[0] ?? Number.NaN) - startedMs} ms after the flood started`);
    assert.deepEqual(observed, ['throttled'], 'throttled, not cut off');
    assert.ok(await onInterface(), 'the peer stays on the interface');
    const atLimit = booked().meter;
    assert.ok(atLimit >= ALLOWANCE_BYTES, `${atLimit} bytes booked: the allowance was used`);

    await assertThrottled('download', t);
    await assertThrottled('upload', t);
    assert.ok(booked().meter > atLimit + 500_000, 'its bytes past the limit are still counted');
    assert.ok(await onInterface());
    const { servers } = await a.digest();
    assert.deepEqual(servers[0]?.discrepancies, [], 'the drift check finds the host as throttled');
    assert.deepEqual(errors, []);
  });

  test('a top-up gives it full speed back at once', async (t) => {
    const a = need(agent, 'the agent');
    const { journalId, meter } = booked();
    const topUp = peer({ remainingBytes: 2_000_000_000, dataLimit: ALLOWANCE_BYTES, journalId, meter });
    await a.changePeers(SERVER_ID, { upsert: [topUp], remove: [] });
    const mbps = await measure('download');
    t.diagnostic(`download after the top-up: ${mbps.toFixed(1)} Mbit/s`);
    assert.ok(mbps > UNLIMITED_MIN_MBPS, `${mbps} Mbit/s: no longer throttled`);
    assert.deepEqual(observed, ['throttled'], 'nothing cut since');
    assert.deepEqual(errors, []);
  });
});
