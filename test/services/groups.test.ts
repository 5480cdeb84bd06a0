import { collectAll } from '../../src/domain/async-iterables.ts';
/**
 * Groups at scale (docs/decisions.md "Groups", issue 16): a group larger than one SQLite batch is paged by GET
 * (`after`, `limit`, `has_more`, totals over every device), and PATCH, usage reset and DELETE reach every device with
 * each device's own event, webhook delivery and activity entry, the node's peers changed and the servers'
 * counts kept.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { Agent } from '../../src/agent/agent.ts';
import { LocalNodeConnection } from '../../src/agent/connection.ts';
import { DryRunDriver } from '../../src/agent/dry-run-driver.ts';
import type { PeerChange } from '../../src/agent/protocol.ts';
import { isoAt, ManualClock } from '../../src/domain/clock.ts';
import { AppError } from '../../src/domain/errors.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { ChangePublisher } from '../../src/services/changes.ts';
import { desiredStateOfNode } from '../../src/services/desired-state.ts';
import { DeviceService } from '../../src/services/devices.ts';
import { GroupService } from '../../src/services/groups.ts';
import { NodeConnections } from '../../src/services/nodes.ts';
import { UsageService } from '../../src/services/usage.ts';
import type { Db } from '../../src/store/db.ts';
import type { ServerRow } from '../../src/store/servers.ts';
import { DATABASE_KINDS } from '../support/databases.ts';
import { deviceValues, migratedStoreForSuite, seedNode, seedServer } from '../support/usage-fixtures.ts';

/** Many of SQLite's batches of 100 (and a part), and not a multiple of a page. */
const MEMBERS = 1_201;
const GROUP = 'customer-7';
const MONTH = '2026-11';

async function countRows(db: Db, table: 'events' | 'webhook_deliveries' | 'activity', kind: string): Promise<number> {
  const column = table === 'activity' ? 'action' : 'kind';
  const row = await db
    .selectFrom(table)
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where(column, '=', kind)
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/** The embedded agent's connection, counting the peer changes it is sent. */
class CountingConnection extends LocalNodeConnection {
  peerChanges = 0;

  override changePeers(serverId: number, change: PeerChange): Promise<void> {
    this.peerChanges++;
    return super.changePeers(serverId, change);
  }
}

for (const kind of DATABASE_KINDS) {
  describe(`a group of ${MEMBERS} devices (${kind})`, () => {
    const suite = migratedStoreForSuite(kind);
    const clock = new ManualClock(Date.parse('2026-11-24T10:00:00Z'));
    const driver = new DryRunDriver();
    let groups: GroupService;
    let server: ServerRow;
    let connection: CountingConnection;

    const peersOnNode = async () => (await driver.readCounters(server.id)).peers.length;

    before(async () => {
      const db = suite.store.db;
      const now = isoAt(clock.nowMs());
      const node = await seedNode(db, 'n1', now);
      server = await seedServer(
        db,
        node,
        { name: 's1', listenPort: 51820, subnet: '10.9.0.0/20', capacity: 4000 },
        now,
      );
      const rows = Array.from({ length: MEMBERS + 3 }, (_, i) => ({
        ...deviceValues(server.id, { name: `d${i}`, address: `10.9.${(i + 2) >> 8}.${(i + 2) & 255}` }, now),
        // Three devices outside the group, between its members.
        external_id: i % 400 === 399 ? 'someone-else' : GROUP,
        usage_month: MONTH,
        month_rx: 10,
        month_tx: 1,
      }));
      for (let i = 0; i < rows.length; i += 500)
        await db
          .insertInto('devices')
          .values(rows.slice(i, i + 500))
          .execute();
      await db.updateTable('servers').set({ device_count: rows.length }).execute();
      await db
        .insertInto('webhooks')
        .values({
          url: 'https://hooks.example.com/x',
          events: JSON.stringify(['device.updated', 'device.disabled', 'device.usage_reset', 'device.deleted']),
          description: '',
          enabled: 1,
          secret: 'whsec_AAAA',
          created_by: 'test',
          created_at: now,
          updated_at: now,
        })
        .execute();
      const usage = new UsageService(db, clock, new Calendar('UTC'));
      const agent = new Agent(driver, 'test');
      await agent.resync(await collectAll(desiredStateOfNode(db, node.id, usage)));
      connection = new CountingConnection(agent);
      const changes = new ChangePublisher(db, clock, new NodeConnections(connection), {
        nudgeWebhooks: () => undefined,
      });
      groups = new GroupService(new DeviceService(suite.store, clock, usage, changes));
    });

    it('pages its devices with after and limit; the totals count every device', async () => {
      const seen: number[] = [];
      let after = 0;
      for (let pages = 0; ; pages++) {
        const group = await groups.get(GROUP, { afterId: after, limit: 200 });
        assert.equal(group.device_count, MEMBERS);
        assert.deepEqual(group.month_usage, { rx_bytes: 10 * MEMBERS, tx_bytes: MEMBERS, total_bytes: 11 * MEMBERS });
        seen.push(...group.devices.map((d) => d.id));
        assert.ok(group.devices.every((d) => d.external_id === GROUP));
        if (!group.has_more) break;
        after = group.devices.at(-1)?.id ?? 0;
        assert.ok(pages < 10);
      }
      assert.equal(seen.length, MEMBERS);
      assert.deepEqual(
        seen,
        [...seen].sort((a, b) => a - b),
        'oldest first, no repeats',
      );
      assert.equal(new Set(seen).size, MEMBERS);
      const first = await groups.get(GROUP, { afterId: 0, limit: 50 });
      assert.equal(first.devices.length, 50);
      assert.equal(first.has_more, true);
    });

    it('PATCH reaches every device with its own events, deliveries and activity, and the node', async () => {
      const db = suite.store.db;
      assert.equal(await peersOnNode(), MEMBERS + 3);
      connection.peerChanges = 0;
      const group = await groups.update(GROUP, { enabled: false, speedLimit: 1000 }, 'test');
      assert.equal(group.device_count, MEMBERS);
      assert.equal(group.devices.length, 50, 'answers the first page');
      assert.equal(group.has_more, true);
      assert.ok(group.devices.every((d) => d.enabled === false && d.speed_limit === 1000));
      const still = await db
        .selectFrom('devices')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('external_id', '=', GROUP)
        .where('enabled', '=', 1)
        .executeTakeFirst();
      assert.equal(Number(still?.n), 0);
      assert.equal(await countRows(db, 'events', 'device.updated'), MEMBERS);
      assert.equal(await countRows(db, 'events', 'device.disabled'), MEMBERS);
      assert.equal(await countRows(db, 'webhook_deliveries', 'device.updated'), MEMBERS);
      assert.equal(await countRows(db, 'webhook_deliveries', 'device.disabled'), MEMBERS);
      assert.equal(await countRows(db, 'activity', 'device.updated'), MEMBERS);
      assert.equal(await peersOnNode(), 3, 'only the devices outside the group stay on the node');
      assert.equal(connection.peerChanges, 1, 'one peer change for the one server');
    });

    it('resets the usage of every device, each with its event', async () => {
      const db = suite.store.db;
      const group = await groups.resetUsage(GROUP, 'test');
      assert.equal(group.device_count, MEMBERS);
      assert.equal(await countRows(db, 'events', 'device.usage_reset'), MEMBERS);
      assert.equal(await countRows(db, 'webhook_deliveries', 'device.usage_reset'), MEMBERS);
    });

    it('DELETE removes every device, one event each, and keeps the server count', async () => {
      const db = suite.store.db;
      await groups.delete(GROUP, 'test');
      assert.equal(await countRows(db, 'events', 'device.deleted'), MEMBERS);
      assert.equal(await countRows(db, 'webhook_deliveries', 'device.deleted'), MEMBERS);
      const servers = await db.selectFrom('servers').select('device_count').execute();
      assert.deepEqual(
        servers.map((s) => s.device_count),
        [3],
      );
      for (const afterId of [0, 5]) {
        await assert.rejects(
          groups.get(GROUP, { afterId, limit: 50 }),
          (error) => error instanceof AppError && error.code === 'not_found',
        );
      }
    });
  });
}
