/**
 * Chaos, as root, on a real WireGuard data plane (issue 27): the panel and its node partitioned for a minute while
 * a client downloads through the tunnel. The partition is an nftables drop of the agent's port in the agent's own
 * namespace (test/support/chaos-node.ts), so the panel's link stalls as on a cut wire. Alone, the node cuts the
 * device at its data limit within 2 s of the server's counters reaching it; after the heal the panel's usage equals
 * those counters byte for byte, with one `device.limit_reached`, and the node went offline and came back.
 */
import assert from 'node:assert/strict';
import {
  chaosTest,
  deviceWithClient,
  downloaded,
  eventsOf,
  expectLedger,
  peerCounters,
  startDownload,
  waitForNode,
} from '../support/chaos-node.ts';
import type { DeviceBytes } from '../support/lab-panel.ts';
import { requireRoot, sleep, waitFor } from '../support/netns.ts';

const skip = requireRoot();
/** The partition: a minute. */
const PARTITION_MS = 60_000;
/** The bound on the cut during the partition, from the server's counters reaching the limit. */
const CUT_WITHIN_MS = 2_000;
/** At 4 Mbit/s (about 0.5 MB/s) a limit of 10 MB is reached about 20 s into the partition. */
const BITRATE = '4M';
const DATA_LIMIT = 10_000_000;
/** Bytes the download moves before the partition begins: traffic is flowing when the link goes. */
const BEFORE_PARTITION = 500_000;

const total = (b: DeviceBytes): number => b.rx_bytes + b.tx_bytes;

chaosTest(
  'a node partitioned from its panel for a minute enforces alone and loses nothing',
  { skip, timeoutMs: PARTITION_MS + 120_000 },
  'the cut within 2 s during the partition; after the heal the ledger equals the counters',
  async (t, c) => {
    const device = await deviceWithClient(c, { data_limit: DATA_LIMIT, limit_period: 'total' });
    const download = await startDownload(c, BITRATE, 120);
    let partitionedAt = 0;
    let last: DeviceBytes | undefined;
    let crossedMs: number | undefined;
    let cutMs: number | undefined;
    try {
      await downloaded(c, download, device.public_key, BEFORE_PARTITION);
      await c.node.partition(true);
      partitionedAt = Date.now();
      // Every 50 ms until the peer leaves: the last reading is the counters at the cut (the kernel allowance holds
      // them still from the limit on), the first at the limit when the crossing was seen.
      for (;;) {
        const askedMs = Date.now();
        const now = await peerCounters(c, device.public_key);
        if (now === undefined) {
          cutMs = Date.now();
          crossedMs ??= askedMs;
          break;
        }
        last = now;
        if (total(now) >= DATA_LIMIT) crossedMs ??= Date.now();
        assert.ok(Date.now() - partitionedAt < PARTITION_MS, `not cut during the partition: ${JSON.stringify(now)}`);
        await sleep(50);
      }
      const offline = await waitForNode(c.panel, 'edge', 'offline', PARTITION_MS - (Date.now() - partitionedAt));
      assert.equal(offline.status, 'offline');
      // The minute, measured from the drop: the node stays alone that long whatever happened inside it.
      await sleep(PARTITION_MS - (Date.now() - partitionedAt));
    } finally {
      await download.stop();
      await c.node.partition(false);
    }
    const healedAt = Date.now();
    const counters = last;
    assert.ok(counters !== undefined && crossedMs !== undefined && cutMs !== undefined, 'the peer was cut');
    const latency = cutMs - crossedMs;
    t.diagnostic(
      `partition ${healedAt - partitionedAt} ms; counters at the cut ${JSON.stringify(counters)} ` +
        `(limit ${DATA_LIMIT}); counters at the limit → peer off the interface ${latency} ms, ` +
        `${cutMs - partitionedAt} ms into the partition`,
    );
    assert.ok(total(counters) >= DATA_LIMIT, 'the cut came at the limit, not before');
    assert.ok(latency <= CUT_WITHIN_MS, `cut ${latency} ms after the counters reached the limit`);

    await waitForNode(c.panel, 'edge', 'online', 30_000);
    t.diagnostic(`node online ${Date.now() - healedAt} ms after the heal`);
    await expectLedger(c, device.id, counters);
    const limited = await waitFor(
      'status limit_reached',
      async () => {
        const got = await c.panel.api.GET('/api/v1/devices/{id}', { params: { path: { id: device.id } } });
        return got.data?.status === 'limit_reached' ? got.data : undefined;
      },
      15_000,
      250,
    );
    assert.equal(limited.status, 'limit_reached');
    assert.equal((await eventsOf(c, 'device.limit_reached', device.id)).length, 1, 'one device.limit_reached');
    const nodeEvents = (await eventsOf(c, 'node.offline,node.online')).filter((e) => e.node_name === 'edge');
    assert.deepEqual(
      nodeEvents.map((e) => e.kind),
      ['node.online', 'node.offline', 'node.online'],
      'online when added, offline in the partition, online again after it',
    );
  },
);
