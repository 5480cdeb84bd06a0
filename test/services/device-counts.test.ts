import { collectAll } from '../../src/domain/async-iterables.ts';
/**
 * Each server's `device_count` (migration 018) against COUNT(*) of its devices, after creates, moves, deletes
 * and group deletes run at once: on PostgreSQL by two panels (two stores on one database, each with its own
 * pool and address allocator), on SQLite by one. Every outcome must be a success or an answer the API gives
 * for a lost race (the device is gone, or on that server already): a deadlock or drift fails the test.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Agent } from '../../src/agent/agent.ts';
import { LocalNodeConnection } from '../../src/agent/connection.ts';
import { DryRunDriver } from '../../src/agent/dry-run-driver.ts';
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
import { openStore, type Store } from '../../src/store/open.ts';
import type { ServerRow } from '../../src/store/servers.ts';
import { DATABASE_KINDS } from '../support/databases.ts';
import { migratedStoreForSuite, seedNode, seedServer } from '../support/usage-fixtures.ts';

/**
 * Codes a lost race answers with: the device was deleted meanwhile, or is on the chosen server already (two
 * moves of one device to one server: the second is told it is there, as it would be after the first).
 */
const RACE_CODES = new Set(['not_found', 'validation_failed']);

/** Each server's stored count beside COUNT(*) of its devices. */
async function countsOf(db: Db): Promise<{ id: number; stored: number; counted: number }[]> {
  const rows = await db
    .selectFrom('servers')
    .select((eb) => [
      'servers.id',
      'servers.device_count',
      eb
        .selectFrom('devices')
        .select(eb.fn.countAll<number>().as('n'))
        .whereRef('devices.server_id', '=', 'servers.id')
        .as('counted'),
    ])
    .orderBy('servers.id')
    .execute();
  return rows.map((r) => ({ id: r.id, stored: Number(r.device_count), counted: Number(r.counted ?? 0) }));
}

/** A seeded pseudo-random sequence, so a failing run can be read again. */
function randomFrom(seed: number): (n: number) => number {
  let state = seed;
  return (n) => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state % n;
  };
}

for (const kind of DATABASE_KINDS) {
  describe(`server device counts under concurrent changes (${kind})`, () => {
    const suite = migratedStoreForSuite(kind);
    const clock = new ManualClock(Date.parse('2026-11-24T10:00:00Z'));
    const panels: { devices: DeviceService; groups: GroupService }[] = [];
    const extraStores: Store[] = [];
    let servers: ServerRow[] = [];

    before(async () => {
      const db = suite.store.db;
      const now = isoAt(clock.nowMs());
      const node = await seedNode(db, 'n1', now);
      servers = [];
      for (let i = 1; i <= 3; i++) {
        const fields = { name: `s${i}`, listenPort: 51820 + i, subnet: `10.${i}.0.0/24`, capacity: 253 };
        servers.push(await seedServer(db, node, fields, now));
      }
      const agent = new Agent(new DryRunDriver(), 'test');
      const connections = new NodeConnections(new LocalNodeConnection(agent));
      // PostgreSQL: a second panel on the same database; SQLite runs one panel.
      const stores = [suite.store];
      if (kind === 'postgres') {
        const second = openStore({ dataDir: suite.database.dataDir, databaseUrl: suite.database.env.DATABASE_URL });
        extraStores.push(second);
        stores.push(second);
      }
      for (const store of stores) {
        const usage = new UsageService(store.db, clock, new Calendar('UTC'));
        const changes = new ChangePublisher(store.db, clock, connections, { nudgeWebhooks: () => undefined });
        const devices = new DeviceService(store, clock, usage, changes);
        panels.push({ devices, groups: new GroupService(devices) });
      }
      await agent.resync(
        await collectAll(desiredStateOfNode(db, node.id, new UsageService(db, clock, new Calendar('UTC')))),
      );
    });

    after(async () => {
      for (const store of extraStores) await store.close();
    });

    it('keeps each server count equal to COUNT(*) of its devices', async () => {
      const random = randomFrom(16);
      const panel = () => panels[random(panels.length)] ?? panels[0];
      const server = () => servers[random(servers.length)]?.id ?? 1;
      const ids: number[] = [];
      const failures: unknown[] = [];
      const settle = async (work: Promise<unknown>) => {
        try {
          await work;
        } catch (error) {
          if (!(error instanceof AppError && RACE_CODES.has(error.code))) failures.push(error);
        }
      };
      let made = 0;
      const create = async (group: string) => {
        const serverId: number | 'auto' = random(4) === 0 ? 'auto' : server();
        // Names unique panel-wide, so a move never meets a name taken on its new server.
        const input = { serverId, externalId: group, name: `d${++made}` };
        const placed = await panel()?.devices.create(input, 'test');
        if (placed) ids.push(placed.row.id);
      };
      await Promise.all(Array.from({ length: 60 }, (_, i) => settle(create(`g${i % 4}`))));
      for (let round = 0; round < 3; round++) {
        const work: Promise<unknown>[] = [];
        for (let i = 0; i < 40; i++) {
          const id = ids[random(ids.length)] ?? 1;
          const choice = random(10);
          const target = panel();
          if (!target) continue;
          if (choice < 4) work.push(settle(create(`g${random(4)}`)));
          else if (choice < 7) work.push(settle(target.devices.move(id, random(3) === 0 ? 'auto' : server(), 'test')));
          else if (choice < 9) work.push(settle(target.devices.delete(id, 'test')));
          else work.push(settle(target.groups.delete(`g${random(4)}`, 'test')));
        }
        await Promise.all(work);
      }
      assert.deepEqual(failures, []);
      const counts = await countsOf(suite.store.db);
      for (const { id, stored, counted } of counts) assert.equal(stored, counted, `server ${id}`);
      assert.ok(
        counts.some((c) => c.counted > 0),
        'devices remain, so the counts were exercised',
      );
    });

    it('answers the second of two moves of one device to one server as if it came after the first', async () => {
      const [first, other] = panels;
      const second = other ?? first;
      const [from, to] = servers;
      assert.ok(first && second && from && to);
      const placed = await first.devices.create({ serverId: from.id, name: 'mover' }, 'test');
      const outcomes = await Promise.allSettled([
        first.devices.move(placed.row.id, to.id, 'test'),
        second.devices.move(placed.row.id, to.id, 'test'),
      ]);
      assert.deepEqual(outcomes.map((o) => o.status).sort(), ['fulfilled', 'rejected']);
      const lost = outcomes.find((o) => o.status === 'rejected');
      assert.ok(lost?.reason instanceof AppError);
      const { code, fields } = lost.reason;
      assert.deepEqual([code, fields], ['validation_failed', { server_id: 'the current server' }]);
      assert.equal((await first.devices.get(placed.row.id)).server.id, to.id);
    });
  });
}
