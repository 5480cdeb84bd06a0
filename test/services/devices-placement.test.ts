/**
 * `server_id: auto` through DeviceService (docs/api.md "Creating a device": the running server with the
 * fewest devices), with the status the API shows: a server whose node is offline is `node_offline`, so it is
 * never chosen, even when it has fewer devices or the lower id.
 */
import { collectAll } from '../../src/domain/async-iterables.ts';
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { Agent } from '../../src/agent/agent.ts';
import { LocalNodeConnection } from '../../src/agent/connection.ts';
import { DryRunDriver } from '../../src/agent/dry-run-driver.ts';
import { isoAt, ManualClock } from '../../src/domain/clock.ts';
import { AppError } from '../../src/domain/errors.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { ChangePublisher } from '../../src/services/changes.ts';
import { desiredStateOfNode } from '../../src/services/desired-state.ts';
import { DeviceService } from '../../src/services/devices.ts';
import { NodeConnections } from '../../src/services/nodes.ts';
import { UsageService } from '../../src/services/usage.ts';
import { updateNode } from '../../src/store/nodes.ts';
import type { ServerRow } from '../../src/store/servers.ts';
import { DATABASE_KINDS } from '../support/databases.ts';
import { migratedStoreForSuite, seedNode, seedServer } from '../support/usage-fixtures.ts';

for (const kind of DATABASE_KINDS) {
  describe(`server_id auto skips servers of offline nodes (${kind})`, () => {
    const suite = migratedStoreForSuite(kind);
    const clock = new ManualClock(Date.parse('2026-11-24T10:00:00Z'));
    let devices: DeviceService;
    let reachable: ServerRow;
    let round = 0;

    beforeEach(async () => {
      const db = suite.store.db;
      for (const table of ['activity', 'events', 'devices', 'servers', 'nodes'] as const) {
        await db.deleteFrom(table).execute();
      }
      round++;
      const now = isoAt(clock.nowMs());
      const offline = await seedNode(db, `off${round}`, now);
      const online = await seedNode(db, `on${round}`, now);
      // The offline node's server is the older one and stays empty: by count and id it would win.
      await seedServer(db, offline, { name: 'a', listenPort: 51821, subnet: '10.1.0.0/24', capacity: 253 }, now);
      reachable = await seedServer(
        db,
        online,
        { name: 'b', listenPort: 51822, subnet: '10.2.0.0/24', capacity: 253 },
        now,
      );
      await updateNode(db, offline.id, { status: 'offline' });
      const usage = new UsageService(db, clock, new Calendar('UTC'));
      const agent = new Agent(new DryRunDriver(), 'test');
      await agent.resync(await collectAll(desiredStateOfNode(db, online.id, usage)));
      const changes = new ChangePublisher(db, clock, new NodeConnections(new LocalNodeConnection(agent)), {
        nudgeWebhooks: () => undefined,
      });
      devices = new DeviceService(suite.store, clock, usage, changes);
    });

    it('places a new device on the running server of the online node', async () => {
      const placed = await devices.create({ serverId: 'auto', name: 'phone' }, 'test');
      assert.equal(placed.server.id, reachable.id);
    });

    it('answers no_server_available when the only server with room is on an offline node', async () => {
      await suite.store.db.deleteFrom('servers').where('id', '=', reachable.id).execute();
      await assert.rejects(
        devices.create({ serverId: 'auto', name: 'phone' }, 'test'),
        (error) => error instanceof AppError && error.code === 'no_server_available',
      );
    });
  });
}
