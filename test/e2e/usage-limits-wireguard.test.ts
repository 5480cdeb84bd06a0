/**
 * End to end, as root, on a real WireGuard data plane (wireguard-go): data limits and expiry enforced
 * by a remote `vpn-panel node` agent. A WireGuard client in its own namespace, configured from the
 * config the API returned, downloads from iperf3 beyond the node's uplink (the lab's internet namespace:
 * client isolation keeps clients off the server's own ports) until the node
 * cuts it off. The test reads the server's own counters (`wg show IF transfer`) every 50 ms: the time
 * from the counter crossing the limit to the peer leaving the interface must be under 10 s
 * (docs/api.md "Limits"; the goal is 2 s). Status and event follow; usage reset brings the peer back. Then
 * the same with the panel stopped after the allowance was handed over, and an expiry a few seconds ahead.
 * Everything lives in namespaces this file makes (test/support/netns.ts), removed in `after()`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { components } from '../../console/src/api-types.ts';
import { need, settledPeerBytes } from '../support/lab-panel.ts';
import { LabNode } from '../support/lab-node.ts';
import { hostOf, requireRoot, sleep, succeeds, waitFor, type WgClient } from '../support/netns.ts';
import type { ApiClient } from '../support/panel.ts';

type Server = components['schemas']['Server'];
type Device = components['schemas']['Device'];

const skip = requireRoot();
const SUITE_TIMEOUT_MS = 150_000;
/** docs/api.md "Limits": a device is cut off within ten seconds of reaching its limit. */
const CUT_OFF_LIMIT_MS = 10_000;
const DATA_LIMIT = 3_000_000;
/** TEST-NET-2, in the lab's internet namespace beyond the host's uplink: where the clients download from. */
const DOWNLOAD_IP = '198.51.100.5';

describe('data limits and expiry enforced on the node (wireguard-go, remote agent)', {
  skip,
  timeout: SUITE_TIMEOUT_MS,
}, () => {
  let labNode: LabNode | undefined;
  let api: ApiClient;
  let server: Server | undefined;

  /** A device made through the API, and a client brought up from the config it returned. */
  async function deviceWithClient(body: {
    data_limit?: number;
    limit_period?: 'monthly' | 'total';
    expires_at?: string;
  }): Promise<{ device: Device; client: WgClient }> {
    const s = need(server, 'the server');
    const created = await api.POST('/api/v1/devices', { body: { server_id: s.id, ...body } });
    assert.equal(created.response.status, 201, JSON.stringify(created.error));
    const device = need(created.data, 'a device');
    // The newest client carries the downloads.
    const client = await need(labNode, 'the lab').connect(s, device);
    return { device, client };
  }

  /** rx+tx the server counts for the peer, or undefined when the peer is not on the interface. */
  function peerBytes(publicKey: string): Promise<number | undefined> {
    return need(labNode, 'the lab').peerBytes(need(server, 'the server').id, publicKey);
  }

  /** Waits until the client pings the server's tunnel address. */
  async function reachServer(timeoutMs: number): Promise<void> {
    const serverIp = hostOf(need(server, 'the server').address);
    await waitFor(
      'the client to reach the server',
      async () => ((await pings(serverIp)) ? true : undefined),
      timeoutMs,
      100,
    );
  }

  function pings(ip: string): Promise<boolean> {
    return succeeds('ip', ['netns', 'exec', need(labNode, 'the lab').lab.clientNs, 'ping', '-c1', '-W1', ip]);
  }

  /** Downloads (20 Mbit/s) until the node cuts the device off; the time from the counters' crossing to the cut. */
  async function downloadUntilCut(publicKey: string): Promise<number> {
    const options = { bitrate: '20M', seconds: 60, deadlineMs: 40_000 };
    const cut = await need(labNode, 'the lab').downloadUntilCut(
      need(server, 'the server').id,
      publicKey,
      DATA_LIMIT,
      options,
    );
    return cut.cutMs - cut.crossedMs;
  }

  async function deviceEvents(kind: string, deviceId: number): Promise<unknown[]> {
    return need(labNode, 'the lab').events(kind, deviceId);
  }

  before(async () => {
    labNode = await LabNode.start({ keyName: 'e2e-limits', internetIp: DOWNLOAD_IP });
    api = labNode.api;
    server = await labNode.addServer('limits');
  });

  after(async () => {
    const problems = (await labNode?.end()) ?? [];
    assert.deepEqual(problems, [], 'cleanup left nothing behind');
  });

  test(
    'a device that downloads its data limit is cut off by the node within 10 s; ' +
      'status, event, and usage reset bring it back',
    async (t) => {
      const { device, client } = await deviceWithClient({ data_limit: DATA_LIMIT, limit_period: 'total' });
      const serverIp = hostOf(need(server, 'the server').address);
      await reachServer(10_000);
      const latency = await downloadUntilCut(device.public_key);
      t.diagnostic(`counters reached the limit → peer off the interface: ${latency} ms`);
      assert.ok(latency < CUT_OFF_LIMIT_MS, `cut off ${latency} ms after the limit`);
      assert.equal(await pings(serverIp), false, 'no traffic passes');

      const limited = await waitFor(
        'status limit_reached',
        async () => {
          const got = await api.GET('/api/v1/devices/{id}', { params: { path: { id: device.id } } });
          return got.data?.status === 'limit_reached' ? got.data : undefined;
        },
        15_000,
        250,
      );
      assert.ok(limited.period_usage.total_bytes >= DATA_LIMIT, JSON.stringify(limited.period_usage));
      assert.ok(
        limited.period_usage.rx_bytes > limited.period_usage.tx_bytes,
        'a download is mostly rx (bytes the device received)',
      );
      assert.equal((await deviceEvents('device.limit_reached', device.id)).length, 1, 'one device.limit_reached');
      const listed = await api.GET('/api/v1/devices', {
        params: { query: { status: 'limit_reached', server_id: device.server_id } },
      });
      assert.deepEqual(
        listed.data?.data.map((d) => d.id),
        [device.id],
      );
      const report = await api.GET('/api/v1/devices/{id}/usage', { params: { path: { id: device.id } } });
      assert.equal(report.response.status, 200);
      const dailyTotal = (report.data?.daily ?? []).reduce((n, d) => n + d.rx_bytes + d.tx_bytes, 0);
      assert.equal(dailyTotal, limited.month_usage.total_bytes, 'the daily history holds the month so far');

      const resetAt = Date.now();
      const reset = await api.POST('/api/v1/devices/{id}/usage/reset', { params: { path: { id: device.id } } });
      assert.equal(reset.response.status, 200, JSON.stringify(reset.error));
      assert.equal(reset.data?.status, 'active');
      assert.equal(reset.data?.period_usage.total_bytes, 0);
      assert.notEqual(
        await peerBytes(device.public_key),
        undefined,
        'the peer is back on the interface when the reset answers',
      );
      t.diagnostic(`peer back ${Date.now() - resetAt} ms after the reset was sent`);
      await reachServer(25_000);
      const history = await api.GET('/api/v1/devices/{id}/usage', { params: { path: { id: device.id } } });
      assert.ok(
        (history.data?.daily ?? []).reduce((n, d) => n + d.rx_bytes + d.tx_bytes, 0) >= DATA_LIMIT,
        'history stays after the reset',
      );
      await client.close();
    },
  );

  test('the node cuts a device off while the panel is stopped; the panel reports it when it is back', async (t) => {
    const { device, client } = await deviceWithClient({ data_limit: DATA_LIMIT, limit_period: 'monthly' });
    await reachServer(10_000);
    const p = need(labNode, 'the lab').panel;
    await p.stop('SIGKILL');
    const latency = await downloadUntilCut(device.public_key);
    t.diagnostic(`panel down: limit → cut ${latency} ms`);
    assert.ok(latency < CUT_OFF_LIMIT_MS);
    await p.start();
    const limited = await waitFor(
      'status limit_reached after the panel is back',
      async () => {
        const got = await api.GET('/api/v1/devices/{id}', { params: { path: { id: device.id } } });
        return got.data?.status === 'limit_reached' ? got.data : undefined;
      },
      20_000,
      250,
    );
    assert.ok(limited.month_usage.total_bytes >= DATA_LIMIT, 'usage made while the panel was down arrived');
    assert.equal((await deviceEvents('device.limit_reached', device.id)).length, 1);
    await client.close();
  });

  test('an expiry a few seconds ahead cuts the device off; device.expired arrives once', async (t) => {
    const expiresAt = new Date(Date.now() + 4000).toISOString();
    const { device, client } = await deviceWithClient({ expires_at: expiresAt });
    await reachServer(3500);
    const gone = await waitFor(
      'the peer to leave at its expiry',
      async () => ((await peerBytes(device.public_key)) === undefined ? Date.now() : undefined),
      15_000,
      50,
    );
    const late = gone - Date.parse(expiresAt);
    t.diagnostic(`peer off ${late} ms after expires_at`);
    assert.ok(late >= 0 && late < CUT_OFF_LIMIT_MS, `${late} ms`);
    const got = await api.GET('/api/v1/devices/{id}', { params: { path: { id: device.id } } });
    assert.equal(got.data?.status, 'expired');
    await waitFor(
      'device.expired',
      async () => ((await deviceEvents('device.expired', device.id)).length === 1 ? true : undefined),
      5000,
      200,
    );
    const renewed = await api.PATCH('/api/v1/devices/{id}', {
      params: { path: { id: device.id } },
      body: { expires_at: new Date(Date.now() + 3_600_000).toISOString() },
    });
    assert.equal(renewed.data?.status, 'active');
    assert.notEqual(await peerBytes(device.public_key), undefined, 'a later expiry re-admits it at once');
    await sleep(1500);
    assert.equal((await deviceEvents('device.expired', device.id)).length, 1, 'still one device.expired');
    await client.close();
  });

  test(
    "usage recorded by the panel equals the server's own counters, " + 'with the agent killed (SIGKILL) mid-transfer',
    async (t) => {
      const { device, client } = await deviceWithClient({});
      await reachServer(10_000);
      const stop = await need(labNode, 'the lab').download({ bitrate: '20M', seconds: 60 });
      try {
        await sleep(1500);
        const killed = need(labNode, 'the lab').agent;
        await killed.stop('SIGKILL');
        await sleep(1500);
        await killed.start();
        await sleep(1500);
      } finally {
        await stop();
      }
      const truth = await settledPeerBytes(
        need(labNode, 'the lab').lab,
        need(server, 'the server').id,
        device.public_key,
      );
      assert.ok(truth.rx_bytes > 1_000_000, `a real download happened: ${JSON.stringify(truth)}`);
      const recorded = await waitFor(
        'the panel to record every byte',
        async () => {
          const got = await api.GET('/api/v1/devices/{id}', { params: { path: { id: device.id } } });
          const month = got.data?.month_usage;
          return month && month.rx_bytes === truth.rx_bytes && month.tx_bytes === truth.tx_bytes ? month : undefined;
        },
        20_000,
        500,
      ).catch(
        async () => (await api.GET('/api/v1/devices/{id}', { params: { path: { id: device.id } } })).data?.month_usage,
      );
      t.diagnostic(`server counters ${JSON.stringify(truth)}, panel ${JSON.stringify(recorded)}`);
      assert.deepEqual(
        recorded && { rx_bytes: recorded.rx_bytes, tx_bytes: recorded.tx_bytes },
        truth,
        'exactly the bytes the interface counted',
      );
      await client.close();
    },
  );
});
