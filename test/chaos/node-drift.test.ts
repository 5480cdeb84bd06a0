/**
 * Chaos, as root, on a real WireGuard data plane (issue 27): drift made on the node's host during traffic, repaired
 * within the drift period, with usage neither jumping nor dropping. A speed-limited device downloads through the
 * tunnel while (1) its peer's tc class is deleted, then (2) the server's WireGuard interface is deleted. The panel
 * checks the node every DRIFT_CHECK_INTERVAL (2 s here, the shortest the test can rely on: one round and a repair);
 * drift of the host is repaired at the next round.
 *
 * Usage across the repair: a deleted interface takes its counters with it, and the new one counts from 0. The
 * ledger holds what the agent last read from the old interface, then every byte of the new one: it must never count
 * a byte twice nor go down, and the new interface is counted whole. What it misses of the old one is at most two
 * metering ticks at the speed limit: the agent meters a server before it inspects it, in the same queue turn, and a
 * metering turn waiting behind a drift check reads the counters as soon as the check ends.
 */
import assert from 'node:assert/strict';
import {
  chaosTest,
  deviceWithClient,
  downloaded,
  panelUsage,
  peerCounters,
  startDownload,
} from '../support/chaos-node.ts';
import { type DeviceBytes, need, settledPeerBytes } from '../support/lab-panel.ts';
import { requireRoot, run, waitFor } from '../support/netns.ts';

const skip = requireRoot([['tc', 'iproute2']]);
/** The drift period the panel is given (seconds, DRIFT_CHECK_INTERVAL). */
const DRIFT_SECONDS = 2;
/** The product's bound (README, docs/dataplane.md): drift is repaired within 60 s whatever the period. */
const REPAIR_BOUND_MS = 60_000;
const SPEED_LIMIT_KBPS = 2000;
/**
 * The agent's metering tick: what the ledger may miss of a deleted interface is what passed after its last read,
 * bounded by two ticks (a tick on 2 loaded cores has taken up to 1.07 s; docs/dataplane.md).
 */
const METER_TICK_MS = 1000;
/** The panel collects a node's usage every 5 s (NODE_MONITOR_DEFAULTS): a ledger unchanged for longer is complete. */
const COLLECTION_MS = 5000;
/**
 * The most bytes the interface counts in `ms` at the speed limit: WireGuard's framing adds at most 47 bytes to a
 * packet of about 1,400 (under 4 %); 10 % allowed for that and tc's burst.
 */
const shapedBytes = (ms: number): number => ((SPEED_LIMIT_KBPS * 1000) / 8) * 1.1 * (ms / 1000);

/** The HTB class id the driver gives a limited peer: `1:` and the low 16 bits of its address in hex. */
function classIdOf(ip: string): string {
  const [, , third, fourth] = ip.split('.').map(Number);
  return `1:${((third ?? 0) * 256 + (fourth ?? 0)).toString(16)}`;
}

const sum = (a: DeviceBytes, b: DeviceBytes): DeviceBytes => ({
  rx_bytes: a.rx_bytes + b.rx_bytes,
  tx_bytes: a.tx_bytes + b.tx_bytes,
});

chaosTest(
  'drift on the host during traffic is repaired within its period; usage neither jumps nor drops',
  { skip, timeoutMs: 180_000, panelEnv: { DRIFT_CHECK_INTERVAL: String(DRIFT_SECONDS) } },
  "a peer's tc class, then the server's interface, deleted mid-download",
  async (t, c) => {
    const device = await deviceWithClient(c, { speed_limit: SPEED_LIMIT_KBPS });
    const n = c.lab.serverNames(c.server.id);
    const classId = classIdOf(device.address);
    const hasClass = async () =>
      new RegExp(`^class htb ${classId} `, 'm').test(await run('tc', ['-n', n.netns, 'class', 'show', 'dev', n.iface]));
    const download = await startDownload(c, '4M', 150);
    const samples: { at: number; usage: DeviceBytes }[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        samples.push({ at: Date.now(), usage: await panelUsage(c, device.id) });
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    })();
    let old: DeviceBytes;
    let gapMs: number;
    try {
      await downloaded(c, download, device.public_key, 100_000);
      assert.ok(await hasClass(), `the limited device has class ${classId}`);

      let driftMs = Date.now();
      await run('tc', ['-n', n.netns, 'class', 'del', 'dev', n.iface, 'classid', classId]);
      await waitFor('the class to come back', async () => (await hasClass()) || undefined, REPAIR_BOUND_MS, 100);
      t.diagnostic(
        `tc class ${classId} back ${Date.now() - driftMs} ms after its deletion (period ${DRIFT_SECONDS} s)`,
      );

      const askedMs = Date.now();
      old = need(await peerCounters(c, device.public_key), 'the peer on the interface');
      driftMs = Date.now();
      await run('ip', ['-n', n.netns, 'link', 'del', n.iface]);
      gapMs = Date.now() - askedMs;
      await waitFor(
        'the interface, the peer and its class to come back',
        async () => ((await peerCounters(c, device.public_key)) !== undefined && (await hasClass())) || undefined,
        REPAIR_BOUND_MS,
        100,
      );
      t.diagnostic(`interface ${n.iface} back with its peer ${Date.now() - driftMs} ms after its deletion`);
      await downloaded(c, download, device.public_key, 100_000);
      t.diagnostic(`old interface counted ${JSON.stringify(old)} when read ${gapMs} ms before its deletion`);
      assert.ok(gapMs < 1000, 'the read came right before the deletion');
    } finally {
      await download.stop();
    }
    const fresh = await settledPeerBytes(c.lab, c.server.id, device.public_key);
    const moved = sum(old, fresh);
    const bound = shapedBytes(2 * METER_TICK_MS);
    // Complete once no collection changes it any more (the counters are settled, so nothing new is to come).
    let seen = { usage: await panelUsage(c, device.id), sinceMs: Date.now() };
    const settled = await waitFor(
      'the ledger to settle',
      async () => {
        const u = await panelUsage(c, device.id);
        if (u.rx_bytes !== seen.usage.rx_bytes || u.tx_bytes !== seen.usage.tx_bytes)
          seen = { usage: u, sinceMs: Date.now() };
        return Date.now() - seen.sinceMs > COLLECTION_MS + METER_TICK_MS ? u : undefined;
      },
      30_000,
      250,
    );
    sampling = false;
    await sampler;
    // What the ledger missed of the old interface, against the test's read of it right before the deletion: at most
    // its last tick's bytes; below 0 by at most the read → delete gap's bytes (the agent read it later than the test).
    const missed = moved.rx_bytes + moved.tx_bytes - (settled.rx_bytes + settled.tx_bytes);
    t.diagnostic(
      `moved ${JSON.stringify(moved)} (old + new interface), ledger ${JSON.stringify(settled)}: ` +
        `${missed} bytes of the old interface not counted (bound ${Math.round(bound)}: two ${METER_TICK_MS} ms ticks ` +
        `at the speed limit)`,
    );
    assert.ok(missed >= -shapedBytes(gapMs), `the ledger counted ${-missed} bytes more than the interfaces did`);
    // Measured 2,748-435,052 bytes while metering waited behind the drift checks in the server's queue (the last
    // reading of the old interface could be older than a tick); the agent now meters in the drift check's own turn.
    assert.ok(missed <= bound, `${missed} bytes lost, more than two ticks'`);
    assert.ok(settled.rx_bytes >= fresh.rx_bytes, 'the new interface is counted whole');
    for (const [i, s] of samples.entries()) {
      const prev = samples[i - 1];
      if (prev === undefined) continue;
      assert.ok(
        s.usage.rx_bytes >= prev.usage.rx_bytes && s.usage.tx_bytes >= prev.usage.tx_bytes,
        `usage went down at ${new Date(s.at).toISOString()}: ` +
          `${JSON.stringify(prev.usage)} → ${JSON.stringify(s.usage)}`,
      );
      const total = s.usage.rx_bytes + s.usage.tx_bytes;
      const most = moved.rx_bytes + moved.tx_bytes + shapedBytes(gapMs);
      assert.ok(total <= most, `usage jumped past the bytes moved: ${total}`);
    }
  },
);
