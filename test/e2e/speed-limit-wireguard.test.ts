/**
 * End to end, as root, on a real WireGuard data plane (wireguard-go): a device's `speed_limit`. The device
 * is made through the API with `speed_limit: 2000`; its config, as the API serves it, is brought up with
 * wg-quick in a client namespace; iperf3 through the tunnel measures each direction against a server in
 * the host namespace, reached through the server's NAT. The limit comes back after the panel restarts
 * with the server's wireguard-go gone (as after a host restart); `PATCH speed_limit: 0` lifts it.
 *
 *   client ns PREFIX-c (wg-quick PREFIX-q1) ══ tunnel ══ server ns PREFIX-s1 ── veth, NAT ── host ns PREFIX-h: iperf3 -s on 198.51.100.1
 *
 * The iperf3 server listens on an address of its own (on the host namespace's loopback) standing for a
 * host on the internet: the client's main table has a route to 192.0.2.0/24 on its veth, which wg-quick
 * keeps, so traffic to the endpoint's address would not enter the tunnel.
 *
 * iperf3 reports what the receiving side counted (TCP payload), so the figure is a little under the
 * limit, which counts whole IP packets. Everything lives in namespaces of this file's prefix (`k…`) and
 * is removed in `after()`, pass or fail.
 */
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { components } from '../support/api-types.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { hostOf, NetLab, requireRoot, run, unusedPrefix, waitFor } from '../support/netns.ts';
import { endLab, type LabPanel, need, startLabPanel } from '../support/lab-panel.ts';
import type { ApiClient } from '../support/panel.ts';

type Server = components['schemas']['Server'];
type Device = components['schemas']['Device'];

const skip = requireRoot([
  ['iperf3', 'iperf3'],
  ['wg-quick', 'wireguard-tools'],
  ['tc', 'iproute2'],
]);
/** About 30 s: the panel (started twice), wg-quick, five 3-second iperf3 runs (eight at worst). */
const SUITE_TIMEOUT_MS = 120_000;
const LIMIT_KBPS = 2000;
/** The check: 2 Mbit/s within ±25 %. */
const TOLERANCE = 0.25;
/** Unlimited, the same tunnel carries hundreds of Mbit/s on the 2-core test machine. */
const UNLIMITED_MIN_MBPS = 10;
const IPERF_SECONDS = 3;
/** TEST-NET-2, on the host namespace's loopback (NetLab.startIperfServer). */
const INTERNET_IP = '198.51.100.1';

describe('speed_limit on a real WireGuard tunnel (wg-quick client, iperf3)', {
  skip,
  timeout: SUITE_TIMEOUT_MS,
}, () => {
  let lab: NetLab | undefined;
  let db: TestDatabase | undefined;
  let panel: LabPanel | undefined;
  let api: ApiClient;
  let server: Server | undefined;
  let device: Device | undefined;
  const iperfPort = 20_000 + randomInt(20_000);

  const measure = (direction: 'upload' | 'download'): Promise<number> =>
    need(lab, 'the lab').iperf(INTERNET_IP, iperfPort, direction, IPERF_SECONDS);

  /**
   * Asserts that `direction` measures 2 Mbit/s ±25 %. A second run is allowed: on the shared 2-core
   * machine, under the load of the whole suite, one 3-second run once measured 1.37 Mbit/s (a process of
   * the tunnel descheduled for a while); a wrong limit misses both runs.
   */
  async function assertLimited(
    direction: 'upload' | 'download',
    t: { diagnostic(message: string): void },
  ): Promise<void> {
    const [low, high] = [(LIMIT_KBPS / 1000) * (1 - TOLERANCE), (LIMIT_KBPS / 1000) * (1 + TOLERANCE)];
    const runs: number[] = [];
    do runs.push(await measure(direction));
    while (runs.length < 2 && !runs.some((mbps) => mbps >= low && mbps <= high));
    t.diagnostic(
      `${direction} at speed_limit ${LIMIT_KBPS}: ${runs.map((mbps) => mbps.toFixed(3)).join(', then ')} Mbit/s`,
    );
    assert.ok(
      runs.some((mbps) => mbps >= low && mbps <= high),
      `${direction} ${runs.map((mbps) => mbps.toFixed(3)).join(' and ')} Mbit/s: within ${low}-${high} Mbit/s`,
    );
  }

  before(async () => {
    const prefix = await unusedPrefix('k');
    lab = await NetLab.create(prefix);
    db = await createTestDatabase('sqlite');
    panel = await startLabPanel(lab, db, 'e2e-speed');
    api = panel.api;
    const created = await api.POST('/api/v1/servers', { body: { name: 'speed' } });
    assert.equal(created.response.status, 201, JSON.stringify(created.error));
    server = created.data;

    await lab.startIperfServer(INTERNET_IP, iperfPort);
  });

  after(async () => {
    assert.deepEqual(await endLab({ panel, labs: [lab], database: db }), [], 'cleanup left nothing behind');
  });

  test('a device created with speed_limit 2000 measures 2 Mbit/s ±25 % each way through the tunnel', async (t) => {
    const l = need(lab, 'the lab');
    const s = need(server, 'the server');
    const created = await api.POST('/api/v1/devices', {
      body: { server_id: s.id, name: 'limited', speed_limit: LIMIT_KBPS },
    });
    assert.equal(created.response.status, 201, JSON.stringify(created.error));
    device = need(created.data, 'a device body');
    assert.equal(device.speed_limit, LIMIT_KBPS);

    await l.wgQuickUp(`${l.prefix}-q1`, device.config);
    assert.ok(await l.waitForPing(hostOf(s.address), 6000), 'the client reaches the server through the tunnel');
    await assertLimited('upload', t);
    await assertLimited('download', t);
  });

  test("the limit comes back when the panel restarts after the server's wireguard-go died (its interface and classes with it)", async (t) => {
    const l = need(lab, 'the lab');
    const s = need(server, 'the server');
    const d = need(device, 'the device of the first test');
    const n = l.serverNames(s.id);
    const p = need(panel, 'the panel');
    await p.stop();
    for (const [pid, name] of l.wireguardGoProcesses()) if (name === n.iface) process.kill(pid, 'SIGKILL');
    await waitFor(
      `interface ${n.iface} to go`,
      async () => ((await run('ip', ['-n', n.netns, 'link', 'show'])).includes(`${n.iface}:`) ? undefined : true),
      5000,
      50,
    );

    await p.start();
    // The client would re-handshake by itself within about 15 s; bringing it up again is quicker.
    await l.wgQuickDown(`${l.prefix}-q1`);
    await l.wgQuickUp(`${l.prefix}-q1`, d.config);
    assert.ok(await l.waitForPing(hostOf(s.address), 8000), 'the tunnel works again');
    // Download is the direction whose classes (on the WireGuard interface) were lost.
    await assertLimited('download', t);
  });

  test('after PATCH speed_limit 0 the same tunnel is no longer limited', async (t) => {
    const d = need(device, 'the device');
    const patched = await api.PATCH('/api/v1/devices/{id}', {
      params: { path: { id: d.id } },
      body: { speed_limit: 0 },
    });
    assert.equal(patched.response.status, 200, JSON.stringify(patched.error));
    assert.equal(patched.data?.speed_limit, 0);
    for (const direction of ['upload', 'download'] as const) {
      const mbps = await measure(direction);
      t.diagnostic(`${direction} at speed_limit 0: ${mbps.toFixed(1)} Mbit/s`);
      assert.ok(
        mbps > UNLIMITED_MIN_MBPS,
        `${direction} ${mbps.toFixed(1)} Mbit/s is over ${UNLIMITED_MIN_MBPS} Mbit/s`,
      );
    }
  });
});
