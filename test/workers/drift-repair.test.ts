/**
 * The panel's drift repair against an in-process node (Agent + dry-run driver), on SQLite and
 * PostgreSQL: drift of the host is repaired at the next round, drift of what the agent was told at
 * the second round that sees it unchanged; matching servers get nothing sent; every repair is an
 * activity entry by `system` and a warn line; offline nodes and deploying servers are left alone;
 * a change the API is applying is never undone.
 */
import { collectAll } from '../../src/domain/async-iterables.ts';
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { pino } from 'pino';
import { Agent } from '../../src/agent/agent.ts';
import { LocalNodeConnection, type NodeConnection } from '../../src/agent/connection.ts';
import { DryRunDriver } from '../../src/agent/dry-run-driver.ts';
import { type DesiredServer, desiredDigest, type NodeDigest } from '../../src/agent/protocol.ts';
import { isoAt, ManualClock } from '../../src/domain/clock.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { generateKeyPair } from '../../src/domain/wireguard-keys.ts';
import { desiredStateOfNode } from '../../src/services/desired-state.ts';
import { quietPublisher } from '../../src/services/changes.ts';
import { NodeConnections } from '../../src/services/nodes.ts';
import { UsageService } from '../../src/services/usage.ts';
import type { NodeRow } from '../../src/store/nodes.ts';
import type { ServerRow } from '../../src/store/servers.ts';
import { DriftRepair } from '../../src/workers/drift-repair.ts';
import { DATABASE_KINDS } from '../support/databases.ts';
import { deviceValues, migratedStoreForSuite, seedNode, seedServer } from '../support/usage-fixtures.ts';

/** The local connection, counting what the panel sends. */
class CountingConnection extends LocalNodeConnection {
  digests = 0;
  readonly applied: number[] = [];
  readonly removed: number[] = [];
  override digest(): Promise<NodeDigest> {
    this.digests++;
    return super.digest();
  }
  override applyServer(desired: DesiredServer) {
    this.applied.push(desired.server.serverId);
    return super.applyServer(desired);
  }
  override removeServer(serverId: number): Promise<void> {
    this.removed.push(serverId);
    return super.removeServer(serverId);
  }
}

for (const kind of DATABASE_KINDS) {
  describe(`drift repair (${kind})`, () => {
    const suite = migratedStoreForSuite(kind);
    const clock = new ManualClock(Date.parse('2026-11-24T10:00:00Z'));
    let driver: DryRunDriver;
    let agent: Agent;
    let connection: CountingConnection;
    let worker: DriftRepair;
    let usage: UsageService;
    let node: NodeRow;
    let servers: ServerRow[];
    let logged: string[];
    let round = 0;

    const activity = () =>
      suite.store.db
        .selectFrom('activity')
        .selectAll()
        .where('action', '=', 'server.drift_repaired')
        .orderBy('id')
        .execute();
    /** Servers whose host differs from what the agent applied. */
    const discrepancies = async () => {
      const { servers: reported } = await agent.digest();
      return reported.filter((s) => s.discrepancies.length > 0).map((s) => s.serverId);
    };

    beforeEach(async () => {
      const db = suite.store.db;
      await db.deleteFrom('activity').execute();
      await db.deleteFrom('devices').execute();
      await db.deleteFrom('servers').execute();
      await db.deleteFrom('nodes').execute();
      round++;
      const now = isoAt(clock.nowMs());
      node = await seedNode(db, `n${round}`, now);
      servers = [];
      for (const i of [1, 2]) {
        const fields = { name: `s${i}`, listenPort: 51820 + i, subnet: `10.${i}.0.0/24`, capacity: 253 };
        const server = await seedServer(db, node, fields, now);
        servers.push(server);
        for (const d of [2, 3]) {
          // d3 has a data limit and a speed limit, d2 neither.
          const fields = { name: `d${d}`, address: `10.${i}.0.${d}`, dataLimit: d === 3 ? 1000 : 0 };
          const values = deviceValues(server.id, fields, now);
          await db
            .insertInto('devices')
            .values({ ...values, speed_limit: d === 3 ? 800 : 0 })
            .execute();
        }
      }
      usage = new UsageService(db, clock, new Calendar('UTC'));
      driver = new DryRunDriver();
      agent = new Agent(driver, 'test');
      connection = new CountingConnection(agent);
      await agent.resync(await collectAll(desiredStateOfNode(db, node.id, usage)));
      logged = [];
      const log = pino({ level: 'warn' }, { write: (line: string) => logged.push(line) });
      const connections = new NodeConnections(connection satisfies NodeConnection);
      worker = new DriftRepair(db, connections, quietPublisher(db, clock), usage, log, { intervalMs: 15_000 });
    });

    const server = (i: number): ServerRow => {
      const found = servers[i];
      assert.ok(found);
      return found;
    };

    it('sends nothing while the node matches the database', async () => {
      await worker.checkAll();
      await worker.checkAll();
      assert.equal(connection.digests, 2);
      assert.deepEqual(connection.applied, []);
      assert.deepEqual(await activity(), []);
    });

    it('repairs drift of the host at the next round, only that server, logged and in the activity log', async () => {
      const s1 = server(0);
      const planted = generateKeyPair().publicKey;
      await driver.changePeers(s1.id, [{ publicKey: planted, allowedIp: '0.0.0.0/0', speedLimitKbps: 0 }], []);
      assert.deepEqual(await discrepancies(), [s1.id]);
      await worker.checkAll();
      assert.deepEqual(connection.applied, [s1.id]);
      assert.deepEqual(await discrepancies(), []);
      const entries = await activity();
      assert.equal(entries.length, 1);
      const [entry] = entries;
      assert.equal(entry?.actor, 'system');
      assert.equal(entry?.resource, 'server');
      assert.equal(entry?.resource_id, String(s1.id));
      const key = planted.replace(/[+/]/g, '\\$&');
      const server1 = `server s1 \\(${s1.id}\\) on node ${node.name}`;
      const summary = new RegExp(`${server1} differed from the database.*peer ${key} is on the server`);
      assert.match(entry?.summary ?? '', summary);
      assert.ok(
        logged.some((line) => line.includes('drift repaired') && line.includes(planted)),
        logged.join(''),
      );
      await worker.checkAll();
      assert.deepEqual(connection.applied, [s1.id], 'once repaired, nothing more is sent');
    });

    it('repairs drift of what the agent was told (a peer added with the node token) at the second round', async () => {
      const s2 = server(1);
      const states = await collectAll(desiredStateOfNode(suite.store.db, node.id, usage));
      const desired = states.find((d) => d.server.serverId === s2.id);
      assert.ok(desired);
      const [first] = desired.peers;
      assert.ok(first);
      const planted = { ...first, deviceId: 999, publicKey: generateKeyPair().publicKey, allowedIp: '0.0.0.0/0' };
      await agent.applyServer({ ...desired, peers: [...desired.peers, planted] });
      await worker.checkAll();
      assert.deepEqual(connection.applied, [], 'the first round waits: it may be a change under way');
      await worker.checkAll();
      assert.deepEqual(connection.applied, [s2.id]);
      assert.equal((await agent.digest()).servers.find((s) => s.serverId === s2.id)?.digest, desiredDigest(desired));
      assert.deepEqual(
        (await activity()).map((a) => [a.resource_id, a.actor]),
        [[String(s2.id), 'system']],
      );
      assert.match((await activity())[0]?.summary ?? '', /the desired state the agent holds differs from the database/);
    });

    it('removes a server the database does not place on the node, and brings back one the node lost', async () => {
      const s1 = server(0);
      const privateKey = generateKeyPair().privateKey;
      const spec = { serverId: 4242, privateKey, listenPort: 51900, address: '10.99.0.1/24', mtu: 1420 };
      await agent.applyServer({ server: spec, peers: [] });
      await agent.removeServer(s1.id);
      await worker.checkAll();
      await worker.checkAll();
      assert.deepEqual(connection.removed, [4242]);
      assert.deepEqual(connection.applied, [s1.id]);
      assert.deepEqual(
        (await agent.status()).serverIds,
        servers.map((s) => s.id).sort((a, b) => a - b),
      );
      assert.deepEqual((await activity()).map((a) => a.resource_id).sort(), [String(s1.id), '4242'].sort());
    });

    it('never undoes a change in flight: on the node before its commit (create) or after it (update)', async () => {
      const s1 = server(0);
      const db = suite.store.db;
      // A device the API is creating: on the node before its row commits.
      const values = deviceValues(s1.id, { name: 'new', address: '10.1.0.9' }, isoAt(clock.nowMs()));
      const row = await db.insertInto('devices').values(values).returningAll().executeTakeFirstOrThrow();
      await db.deleteFrom('devices').where('id', '=', row.id).execute();
      await connection.changePeers(s1.id, { upsert: [usage.peerOf(row)], remove: [] });
      await worker.checkAll();
      await db.insertInto('devices').values(row).execute();
      // A device the API is updating: its row commits first, the node hears of it after.
      const device = await db
        .selectFrom('devices')
        .selectAll()
        .where('server_id', '=', s1.id)
        .where('name', '=', 'd2')
        .executeTakeFirstOrThrow();
      const changed = await db
        .updateTable('devices')
        .set({ speed_limit: 300 })
        .where('id', '=', device.id)
        .returningAll()
        .executeTakeFirstOrThrow();
      await worker.checkAll();
      await connection.changePeers(s1.id, { upsert: [usage.peerOf(changed)], remove: [] });
      await worker.checkAll();
      await worker.checkAll();
      assert.deepEqual(connection.applied, []);
      assert.deepEqual(await activity(), []);
      const onNode = (await driver.readCounters(s1.id)).peers.map((p) => p.publicKey);
      assert.ok(onNode.includes(row.public_key), 'the new device stays on the node');
    });

    it('skips offline nodes and leaves deploying servers to their deploy', async () => {
      const s1 = server(0);
      const planted = { publicKey: generateKeyPair().publicKey, allowedIp: '0.0.0.0/0', speedLimitKbps: 0 };
      await driver.changePeers(s1.id, [planted], []);
      await suite.store.db.updateTable('nodes').set({ status: 'offline' }).where('id', '=', node.id).execute();
      await worker.checkAll();
      assert.equal(connection.digests, 0, 'an offline node is not asked');
      assert.deepEqual(await discrepancies(), [s1.id]);

      await suite.store.db.updateTable('nodes').set({ status: 'online' }).where('id', '=', node.id).execute();
      await suite.store.db.updateTable('servers').set({ status: 'deploying' }).where('id', '=', s1.id).execute();
      await worker.checkAll();
      await worker.checkAll();
      assert.deepEqual([connection.applied, connection.removed], [[], []], 'a deploying server is left alone');
    });
  });
}
