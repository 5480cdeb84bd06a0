/**
 * Chaos, as root, on a real WireGuard data plane (issue 27): the node's agent SIGKILLed (by PID) and started again
 * 20 times while a client downloads through the tunnel. The servers' wireguard-go daemons outlive the agent, so
 * their counters never reset: the panel's ledger must equal them byte for byte at the end (usage-ledger.ts: the
 * journal's baselines are read again after a crash, so what was counted since the last save is counted once).
 */
import assert from 'node:assert/strict';
import {
  chaosTest,
  deviceWithClient,
  downloaded,
  expectLedger,
  panelUsage,
  startDownload,
} from '../support/chaos-node.ts';
import { settledPeerBytes } from '../support/lab-panel.ts';
import { requireRoot, sleep, waitFor } from '../support/netns.ts';

const skip = requireRoot();
const KILLS = 20;
/**
 * Where each kill lands after the agent's ready line: spread over the panel's 5 s collection round, so kills fall
 * before the first metering tick, between ticks, and while a collection is in flight. The fault's schedule, not
 * a wait for a condition.
 */
const killAfterMs = (i: number): number => (i * 263) % 5000;

chaosTest(
  'the agent SIGKILLed 20 times during traffic: the ledger equals the counters',
  { skip, timeoutMs: 240_000 },
  '20 kills and restarts mid-download; every byte the server counted is in the ledger once',
  async (t, c) => {
    const device = await deviceWithClient(c, {});
    const download = await startDownload(c, '8M', 200);
    const startedMs = Date.now();
    try {
      await downloaded(c, download, device.public_key, 200_000);
      for (let i = 0; i < KILLS; i++) {
        await sleep(killAfterMs(i));
        const pid = c.node.pid;
        await c.node.stop('SIGKILL');
        assert.throws(() => process.kill(pid, 0), 'the killed agent is gone');
        await c.node.start();
      }
      // The last agent's work reaches the panel while the download still runs.
      const before = await panelUsage(c, device.id);
      await waitFor(
        'the panel to collect again',
        async () => {
          const now = await panelUsage(c, device.id);
          return now.rx_bytes > before.rx_bytes || undefined;
        },
        15_000,
        250,
      );
    } finally {
      await download.stop();
    }
    const counters = await settledPeerBytes(c.lab, c.server.id, device.public_key);
    t.diagnostic(
      `${KILLS} kills in ${((Date.now() - startedMs) / 1000).toFixed(0)} s; counters ${JSON.stringify(counters)}`,
    );
    assert.ok(counters.rx_bytes > 5_000_000, 'a real download happened');
    await expectLedger(c, device.id, counters);
  },
);
