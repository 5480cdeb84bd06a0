/**
 * What the node says it does with each server's IPv6 reaches the server row, on SQLite and PostgreSQL: the
 * resync report names each server's mode (NodeMonitor stores it, so a row made before the node applied it stops
 * saying off), the drift check's digest names it too; an agent that predates both (test/support/fake-agent.ts,
 * over HTTP) neither breaks the resync nor makes the drift repair re-apply its servers round after round.
 */
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { pino } from 'pino';
import { Agent } from '../../src/agent/agent.ts';
import { LocalNodeConnection, type NodeConnection } from '../../src/agent/connection.ts';
import { DryRunDriver } from '../../src/agent/dry-run-driver.ts';
import type { DesiredServer, ResyncReport } from '../../src/agent/protocol.ts';
import { isoAt, ManualClock } from '../../src/domain/clock.ts';
import type { Ipv6Status } from '../../src/domain/servers.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { quietPublisher } from '../../src/services/changes.ts';
import { NodeConnections } from '../../src/services/nodes.ts';
import { UsageService } from '../../src/services/usage.ts';
import type { Db } from '../../src/store/db.ts';
import { insertNode, type NodeRow } from '../../src/store/nodes.ts';
import type { ServerRow } from '../../src/store/servers.ts';
import { DriftRepair } from '../../src/workers/drift-repair.ts';
import { NodeMonitor } from '../../src/workers/node-monitor.ts';
import { DATABASE_KINDS } from '../support/databases.ts';
import { FakeAgent } from '../support/fake-agent.ts';
import { migratedStoreForSuite, seedNode, seedServer } from '../support/usage-fixtures.ts';

/** The local connection, keeping the last resync report and counting the servers applied one by one. */
class RecordingConnection extends LocalNodeConnection {
  report: ResyncReport | undefined;
  readonly applied: number[] = [];
  override async resync(servers: AsyncIterable<DesiredServer>): Promise<ResyncReport> {
    this.report = await super.resync(servers);
    return this.report;
  }
  override applyServer(desired: DesiredServer) {
    this.applied.push(desired.server.serverId);
    return super.applyServer(desired);
  }
}

/** Three servers on `node`, each row saying off as migration 017 left them: ULA subnet6, global subnet6, none. */
async function seedServers(db: Db, node: NodeRow, now: string): Promise<ServerRow[]> {
  const rows: ServerRow[] = [];
  const subnets6 = ['fd3a:1b2c:4d5e:1::/64', '2001:db8:77::/64', null];
  for (const [i, subnet6] of subnets6.entries()) {
    const fields = { name: `s${i}`, listenPort: 51830 + i, subnet: `10.${40 + i}.0.0/24`, capacity: 253 };
    const row = await seedServer(db, node, fields, now);
    const address6 = subnet6 === null ? null : `${subnet6.replace('::/64', '::1')}/64`;
    const changed = { subnet6, address6, ipv6: 'off' as const };
    rows.push(
      await db.updateTable('servers').set(changed).where('id', '=', row.id).returningAll().executeTakeFirstOrThrow(),
    );
  }
  return rows;
}

for (const kind of DATABASE_KINDS) {
  describe(`the IPv6 mode a node reports, stored on the server (${kind})`, () => {
    const suite = migratedStoreForSuite(kind);
    const clock = new ManualClock(Date.parse('2026-11-24T10:00:00Z'));
    const silent = pino({ level: 'silent' });
    let usage: UsageService;

    const modes = async (): Promise<Ipv6Status[]> =>
      (await suite.store.db.selectFrom('servers').select('ipv6').orderBy('id').execute()).map((r) => r.ipv6);
    const repairs = async (): Promise<number> =>
      (await suite.store.db.selectFrom('activity').select('id').where('action', '=', 'server.drift_repaired').execute())
        .length;

    beforeEach(async () => {
      const db = suite.store.db;
      for (const table of ['activity', 'events', 'devices', 'servers', 'nodes'] as const)
        await db.deleteFrom(table).execute();
      usage = new UsageService(db, clock, new Calendar('UTC'));
    });

    it('a resync stores each server as the node applied it; the drift check agrees and sends nothing', async () => {
      const db = suite.store.db;
      const now = isoAt(clock.nowMs());
      const node = await seedNode(db, 'local', now);
      const rows = await seedServers(db, node, now);
      const connection = new RecordingConnection(new Agent(new DryRunDriver(), 'test'));
      const connections = new NodeConnections(connection satisfies NodeConnection);
      await new NodeMonitor(db, clock, connections, quietPublisher(db, clock), usage, silent, {
        intervalMs: 5000,
        offlineAfterMs: 15_000,
      }).checkAll();
      const ids = rows.map((r) => r.id);
      assert.deepEqual(connection.report?.ipv6, [
        { serverId: ids[0], mode: 'nat66' },
        { serverId: ids[1], mode: 'routed' },
        { serverId: ids[2], mode: 'off' },
      ]);
      assert.deepEqual(await modes(), ['nat66', 'routed', 'off'], 'the rows say what the node runs');

      // A row that says something else while the agent holds the database's state is put right by the drift check.
      await db
        .updateTable('servers')
        .set({ ipv6: 'off' })
        .where('id', '=', rows[0]?.id ?? 0)
        .execute();
      const drift = new DriftRepair(db, connections, quietPublisher(db, clock), usage, silent, { intervalMs: 15_000 });
      await drift.checkAll();
      await drift.checkAll();
      assert.deepEqual(await modes(), ['nat66', 'routed', 'off']);
      assert.deepEqual(connection.applied.slice(ids.length), [], 'nothing applied again');
      assert.equal(await repairs(), 0);
    });

    it('an agent that predates IPv6 (names no mode): the node is online, its servers off, no repair loop', async () => {
      const db = suite.store.db;
      const fake = new FakeAgent();
      await fake.start();
      try {
        const now = isoAt(clock.nowMs());
        const remote = { url: fake.url, token: fake.token, cert_sha256: null, public_host: '192.0.2.9' };
        const node = await insertNode(db, { name: 'old', ...remote, status: 'offline', created_at: now });
        const rows = await seedServers(db, node, now);
        await db.updateTable('servers').set({ ipv6: 'nat66' }).execute();
        const connections = new NodeConnections(undefined);
        const changes = quietPublisher(db, clock);
        const options = { intervalMs: 5000, offlineAfterMs: 1 };
        const monitor = new NodeMonitor(db, clock, connections, changes, usage, silent, options);
        await monitor.checkAll();
        const seen = await db.selectFrom('nodes').select(['status', 'last_error']).where('id', '=', node.id).execute();
        assert.deepEqual(seen, [{ status: 'online', last_error: null }]);
        assert.deepEqual(
          [...fake.held.keys()],
          rows.map((r) => r.id),
          'the whole state was sent',
        );
        assert.deepEqual(await modes(), ['off', 'off', 'off'], 'it runs no IPv6');

        // Its digest hashes no IPv6 field: compared with the full digest it would differ every round.
        const drift = new DriftRepair(db, connections, changes, usage, silent, { intervalMs: 15_000 });
        for (let round = 0; round < 3; round++) await drift.checkAll();
        assert.deepEqual(fake.applied, [], 'nothing applied again');
        assert.equal(await repairs(), 0);

        // A real difference still counts: a server it lost is brought back.
        fake.held.delete(rows[2]?.id ?? 0);
        await drift.checkAll();
        await drift.checkAll();
        assert.deepEqual(fake.applied, [rows[2]?.id]);
      } finally {
        await fake.stop();
      }
    });
  });
}
