/**
 * The one path of a change (services/changes.ts), in process on SQLite and PostgreSQL with an
 * in-process node (Agent + dry-run driver): a device's event reaches its webhook without waiting
 * for the sender's poll (the publisher nudges it after commit), the events the workers make too
 * (expiry watch, node monitor, usage ingest), and a group's change is one peer change per server,
 * made by the device paths.
 */
import { collectAll } from '../../src/domain/async-iterables.ts';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, beforeEach, describe, it } from 'node:test';
import { pino } from 'pino';
import { Agent } from '../../src/agent/agent.ts';
import { LocalNodeConnection, type NodeConnection } from '../../src/agent/connection.ts';
import { DryRunDriver } from '../../src/agent/dry-run-driver.ts';
import type { AgentStatus, PeerChange } from '../../src/agent/protocol.ts';
import { isoAt, ManualClock } from '../../src/domain/clock.ts';
import type { PanelEvent } from '../../src/domain/events.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { generateWebhookSecret } from '../../src/domain/webhooks.ts';
import { ChangePublisher } from '../../src/services/changes.ts';
import { desiredStateOfNode } from '../../src/services/desired-state.ts';
import { DeviceService } from '../../src/services/devices.ts';
import { GroupService } from '../../src/services/groups.ts';
import { NodeConnections } from '../../src/services/nodes.ts';
import { UsageService } from '../../src/services/usage.ts';
import type { ServerRow } from '../../src/store/servers.ts';
import { insertWebhook } from '../../src/store/webhooks.ts';
import { ExpiryWatch } from '../../src/workers/expiry-watch.ts';
import { NodeMonitor } from '../../src/workers/node-monitor.ts';
import { WebhookSender } from '../../src/workers/webhook-sender.ts';
import { DATABASE_KINDS } from '../support/databases.ts';
import { migratedStoreForSuite, seedNode, seedServer } from '../support/usage-fixtures.ts';

/** The local connection, keeping every peer change the panel sends. */
class RecordingConnection extends LocalNodeConnection {
  readonly peerChanges: { serverId: number; change: PeerChange }[] = [];
  override changePeers(serverId: number, change: PeerChange): Promise<void> {
    this.peerChanges.push({ serverId, change });
    return super.changePeers(serverId, change);
  }
}

/** A node that does not answer: the node monitor finds it offline. */
class SilentConnection extends LocalNodeConnection {
  override status(): Promise<AgentStatus> {
    return Promise.reject(new Error('connect ECONNREFUSED'));
  }
}

/** Polls until `check` holds; the deadline is only a backstop (the poll it replaces is an hour). */
async function eventually<T>(check: () => T | undefined, what: string): Promise<T> {
  const deadlineMs = Date.now() + 60_000;
  for (;;) {
    const value = check();
    if (value !== undefined) return value;
    if (Date.now() > deadlineMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** So long that a delivery seen during a test was not found by the poll. */
const HOUR_MS = 3_600_000;
const silent = pino({ level: 'silent' });

for (const kind of DATABASE_KINDS) {
  describe(`one path for a change (${kind})`, () => {
    const suite = migratedStoreForSuite(kind);
    const clock = new ManualClock(Date.parse('2026-11-24T10:00:00Z'));
    const received: PanelEvent[] = [];
    let receiver: Server;
    let receiverUrl: string;
    let sender: WebhookSender;
    let nudges: number;
    let connection: RecordingConnection;
    let agent: Agent;
    let usage: UsageService;
    let changes: ChangePublisher;
    let devices: DeviceService;
    let groups: GroupService;
    let servers: ServerRow[];
    let round = 0;

    before(async () => {
      receiver = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (chunk: Buffer) => chunks.push(chunk));
        req.on('end', () => {
          received.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
          res.writeHead(204).end();
        });
      });
      await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
      const address = receiver.address();
      assert.ok(address !== null && typeof address === 'object');
      receiverUrl = `http://127.0.0.1:${address.port}/hook`;
    });

    after(async () => {
      await sender.stop();
      receiver.closeAllConnections();
      await new Promise((resolve) => receiver.close(resolve));
    });

    beforeEach(async () => {
      const db = suite.store.db;
      await sender?.stop();
      const tables = ['webhook_deliveries', 'webhooks', 'activity', 'events', 'devices', 'servers', 'nodes'] as const;
      for (const table of tables) await db.deleteFrom(table).execute();
      received.length = 0;
      round++;
      const now = isoAt(clock.nowMs());
      const node = await seedNode(db, `n${round}`, now);
      servers = [];
      for (const i of [1, 2]) {
        const fields = { name: `s${i}`, listenPort: 51820 + i, subnet: `10.${i}.0.0/24`, capacity: 253 };
        servers.push(await seedServer(db, node, fields, now));
      }
      usage = new UsageService(db, clock, new Calendar('UTC'));
      agent = new Agent(new DryRunDriver(), 'test');
      await agent.resync(await collectAll(desiredStateOfNode(db, node.id, usage)));
      connection = new RecordingConnection(agent);
      const connections = new NodeConnections(connection satisfies NodeConnection);
      nudges = 0;
      changes = new ChangePublisher(db, clock, connections, {
        nudgeWebhooks: () => {
          nudges++;
          sender.nudge();
        },
      });
      sender = new WebhookSender(db, clock, changes, silent, {
        scheduleMs: [100],
        timeoutMs: 5_000,
        concurrency: 8,
        pollIntervalMs: HOUR_MS,
        allowPrivate: true,
      });
      devices = new DeviceService(suite.store, clock, usage, changes);
      groups = new GroupService(devices);
      await insertWebhook(db, {
        url: receiverUrl,
        events: JSON.stringify([
          'device.created',
          'device.deleted',
          'device.expired',
          'device.limit_reached',
          'node.offline',
        ]),
        description: '',
        enabled: 1,
        secret: generateWebhookSecret(),
        created_by: 'test',
        created_at: now,
        updated_at: now,
      });
      // Its first round finds nothing due; the next poll is an hour away.
      sender.start();
      await sender.runOnce();
    });

    it('attempts a device.created delivery at once after the commit, not at the next poll', async () => {
      const { device } = await devices.create({ serverId: servers[0]?.id ?? 0, name: 'phone' }, 'test');
      assert.equal(nudges, 1, 'one nudge for the commit');
      const event = await eventually(() => received.find((e) => e.kind === 'device.created'), 'its delivery');
      assert.equal(event.device_id, device.id);
    });

    it('deletes a group through the device path: one event each, one peer change per server', async () => {
      const made = [];
      for (const [i, server] of [servers[0], servers[0], servers[1]].entries()) {
        made.push(await devices.create({ serverId: server?.id ?? 0, name: `g${i}`, externalId: 'fleet' }, 'test'));
      }
      connection.peerChanges.length = 0;
      nudges = 0;
      await groups.delete('fleet', 'test');
      assert.equal(nudges, 1, 'one nudge for the one commit');
      const byServer = connection.peerChanges.map((c) => [c.serverId, c.change.remove.length, c.change.deleted]);
      assert.deepEqual(byServer, [
        [servers[0]?.id, 2, true],
        [servers[1]?.id, 1, true],
      ]);
      const deleted = await eventually(() => {
        const events = received.filter((e) => e.kind === 'device.deleted');
        return events.length === made.length ? events : undefined;
      }, 'three device.deleted deliveries');
      assert.deepEqual(deleted.map((e) => e.device_id).sort(), made.map((m) => m.device.id).sort());
      assert.ok(deleted.every((e) => e.detail === 'group fleet deleted'));
    });

    it('attempts a device.expired delivery at once after the expiry watch commits it', async () => {
      const expiresAt = isoAt(clock.nowMs() + 60_000);
      const { device } = await devices.create({ serverId: servers[0]?.id ?? 0, name: 'lease', expiresAt }, 'test');
      clock.advance(61_000);
      nudges = 0;
      assert.equal(await new ExpiryWatch(suite.store.db, clock, changes, silent).runOnce(), 1);
      assert.equal(nudges, 1, 'one nudge for the commit');
      const event = await eventually(() => received.find((e) => e.kind === 'device.expired'), 'its delivery');
      assert.equal(event.device_id, device.id);
    });

    it('attempts a node.offline delivery at once after the node monitor commits it', async () => {
      const unreachable = new NodeConnections(new SilentConnection(agent));
      const options = { intervalMs: HOUR_MS, offlineAfterMs: 0 };
      nudges = 0;
      await new NodeMonitor(suite.store.db, clock, unreachable, changes, usage, silent, options).checkAll();
      assert.equal(nudges, 1, 'one nudge for the commit');
      const event = await eventually(() => received.find((e) => e.kind === 'node.offline'), 'its delivery');
      assert.equal(event.node_name, `n${round}`);
    });

    it('attempts a device.limit_reached delivery at once after a usage batch over the limit is stored', async () => {
      const server = servers[0];
      assert.ok(server);
      const { device } = await devices.create({ serverId: server.id, name: 'metered', dataLimit: 1000 }, 'test');
      const entries = [{ deviceId: device.id, rxBytes: 700, txBytes: 600, meter: 1300 }];
      const report = { journalId: 'j', batches: [{ seq: 1, slotStartMs: clock.nowMs(), entries }], handshakes: [] };
      nudges = 0;
      await usage.ingest({ id: server.node_id }, report, changes);
      assert.equal(nudges, 1, 'one nudge for the commit');
      const event = await eventually(() => received.find((e) => e.kind === 'device.limit_reached'), 'its delivery');
      assert.equal(event.device_id, device.id);
    });
  });
}
