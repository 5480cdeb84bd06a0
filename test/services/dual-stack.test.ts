/**
 * Dual stack through the services, on SQLite and PostgreSQL with an in-process node: what the node is sent
 * (address6, routed6, allowedIp6), the node's ipv6 report stored on the server, and IPv6 addresses that stay
 * distinct when two panels create devices on one server at once.
 */
import { collectAll } from '../../src/domain/async-iterables.ts';
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { Agent } from '../../src/agent/agent.ts';
import { LocalNodeConnection } from '../../src/agent/connection.ts';
import type { PeerSpec, ServerSpec, ServerState } from '../../src/agent/driver.ts';
import { DryRunDriver } from '../../src/agent/dry-run-driver.ts';
import type { DesiredServer, PeerChange } from '../../src/agent/protocol.ts';
import { isoAt, ManualClock } from '../../src/domain/clock.ts';
import type { Ipv6Status } from '../../src/domain/servers.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { ChangePublisher, quietPublisher } from '../../src/services/changes.ts';
import { desiredStateOfNode } from '../../src/services/desired-state.ts';
import { DeviceService } from '../../src/services/devices.ts';
import { NodeConnections, NodeService } from '../../src/services/nodes.ts';
import { ServerService } from '../../src/services/servers.ts';
import { UsageService } from '../../src/services/usage.ts';
import type { NodeRow } from '../../src/store/nodes.ts';
import { DATABASE_KINDS } from '../support/databases.ts';
import { migratedStoreForSuite, seedNode } from '../support/usage-fixtures.ts';

/** The in-process node, reporting `report` as what it does with IPv6 and keeping what it is sent. */
class ReportingConnection extends LocalNodeConnection {
  report: Ipv6Status = 'nat66';
  readonly applied: DesiredServer[] = [];
  readonly peerChanges: PeerChange[] = [];
  override async applyServer(desired: DesiredServer): Promise<ServerState> {
    this.applied.push(desired);
    return { ...(await super.applyServer(desired)), ipv6: this.report };
  }
  override changePeers(serverId: number, change: PeerChange): Promise<void> {
    this.peerChanges.push(change);
    return super.changePeers(serverId, change);
  }
}

const noCountries = { countryOf: async () => undefined };

/** What the node was sent, as the driver's types name it (with the IPv6 fields). */
const specOf = (desired: DesiredServer | undefined): ServerSpec | undefined => desired?.server;
const peersOf = (peers: readonly PeerSpec[] | undefined): PeerSpec[] => [...(peers ?? [])];

for (const kind of DATABASE_KINDS) {
  describe(`dual stack through the services (${kind})`, () => {
    const suite = migratedStoreForSuite(kind);
    const clock = new ManualClock(Date.parse('2026-11-24T10:00:00Z'));
    let connection: ReportingConnection;
    let servers: ServerService;
    let usage: UsageService;
    let node: NodeRow;
    /** A DeviceService as one panel has it; a second one stands for another panel on the same database. */
    let panelDevices: () => DeviceService;
    let round = 0;

    beforeEach(async () => {
      const db = suite.store.db;
      for (const table of ['activity', 'events', 'devices', 'servers', 'nodes'] as const) {
        await db.deleteFrom(table).execute();
      }
      round++;
      node = await seedNode(db, `n${round}`, isoAt(clock.nowMs()));
      usage = new UsageService(db, clock, new Calendar('UTC'));
      connection = new ReportingConnection(new Agent(new DryRunDriver(), 'test'));
      const connections = new NodeConnections(connection);
      const changes = new ChangePublisher(db, clock, connections, { nudgeWebhooks: () => undefined });
      servers = new ServerService(db, clock, connections, noCountries, usage, changes);
      panelDevices = () => new DeviceService(suite.store, clock, usage, changes);
    });

    it("sends the node the server's address6, NAT66 for a ULA subnet6, and stores what the node reports", async () => {
      const server = await servers.create({ name: 'ula' }, 'test');
      assert.match(server.address6 ?? '', /^fd[0-9a-f]{2}:[0-9a-f]{1,4}:[0-9a-f]{1,4}::1\/64$/);
      assert.equal(server.ipv6, 'nat66', 'the report of the deploy');
      const sent = specOf(connection.applied.at(-1));
      assert.deepEqual([sent?.address6, sent?.routed6], [server.address6, false]);

      connection.report = 'tunnel_only';
      const recreated = await servers.update(server.id, { listenPort: 51999 }, 'test');
      assert.equal(recreated.ipv6, 'tunnel_only', 'the report of the recreate, stored');
      assert.equal((await servers.get(server.id)).ipv6, 'tunnel_only');
    });

    it('sends routed6 for a global subnet6', async () => {
      connection.report = 'routed';
      const server = await servers.create({ name: 'global', address6: '2001:db8:100:1::1/64' }, 'test');
      assert.deepEqual(
        [server.subnet6, server.address6, server.ipv6],
        ['2001:db8:100:1::/64', '2001:db8:100:1::1/64', 'routed'],
      );
      assert.equal(specOf(connection.applied.at(-1))?.routed6, true);
    });

    it("sends each device's /128 with its peer, and in the whole state a resync applies", async () => {
      const server = await servers.create({ name: 'peers' }, 'test');
      const devices = panelDevices();
      const { device } = await devices.create({ serverId: server.id, name: 'phone' }, 'test');
      const prefix = (server.subnet6 ?? '').replace(/::\/64$/, '');
      assert.equal(device.address6, `${prefix}::2`, '10.x.y.2 reads as ::2');
      assert.equal(peersOf(connection.peerChanges.at(-1)?.upsert)[0]?.allowedIp6, `${prefix}::2/128`);
      const [state] = await collectAll(desiredStateOfNode(suite.store.db, node.id, usage));
      assert.equal(specOf(state)?.address6, server.address6);
      assert.deepEqual(
        peersOf(state?.peers).map((p) => [p.allowedIp, p.allowedIp6]),
        [[`${device.address}/32`, `${prefix}::2/128`]],
      );
    });

    it('gives distinct IPv6 addresses when two panels create devices on one server at once', async () => {
      const server = await servers.create({ name: 'race', maxDevices: 60 }, 'test');
      const [first, second] = [panelDevices(), panelDevices()];
      // Each panel reads the server's addresses once, so the other's creates show as conflicts it retries.
      await first.create({ serverId: server.id }, 'test');
      await second.create({ serverId: server.id }, 'test');
      const made = await Promise.allSettled(
        Array.from({ length: 70 }, (_, i) => (i % 2 === 0 ? first : second).create({ serverId: server.id }, 'test')),
      );
      const created = made.flatMap((m) => (m.status === 'fulfilled' ? [m.value.device] : []));
      const refused = made.flatMap((m) => (m.status === 'rejected' ? [m.reason] : []));
      assert.equal(created.length, 58, refused.map(String).join('\n'));
      assert.ok(
        refused.every((e) => String(e).includes('full')),
        refused.map(String).join('\n'),
      );
      const rows = await suite.store.db.selectFrom('devices').select(['address', 'address6']).execute();
      assert.equal(rows.length, 60);
      assert.equal(new Set(rows.map((r) => r.address6)).size, 60, 'no duplicate address6');
      const prefix = (server.subnet6 ?? '').replace(/::\/64$/, '');
      for (const { address, address6 } of rows) {
        assert.equal(address6, `${prefix}::${address.split('.')[3]}`, `${address} and ${address6} read alike`);
      }
    });

    it('keeps the host of an IPv6 node URL without its brackets, as clients are given it', async () => {
      const nodes = new NodeService(suite.store.db, clock, quietPublisher(suite.store.db, clock));
      const token = 'a-node-token-of-16+';
      const implied = await nodes.add(
        { name: `v6-${round}`, url: 'http://[2001:db8::2]:7000', token, publicHost: undefined, certSha256: undefined },
        'test',
      );
      assert.equal(implied.public_host, '2001:db8::2');
      const given = await nodes.add(
        {
          name: `v6b-${round}`,
          url: 'http://192.0.2.9:7000',
          token,
          publicHost: '[2001:db8::3]',
          certSha256: undefined,
        },
        'test',
      );
      assert.equal(given.public_host, '2001:db8::3');
    });

    it('gives a moved device an address6 on its new server', async () => {
      const [from, to] = [await servers.create({ name: 'from' }, 'test'), await servers.create({ name: 'to' }, 'test')];
      assert.notEqual(from.subnet6, to.subnet6, 'each server its own /64');
      const devices = panelDevices();
      await devices.create({ serverId: to.id, name: 'first-there' }, 'test');
      const { device } = await devices.create({ serverId: from.id, name: 'traveller' }, 'test');
      const moved = await devices.move(device.id, to.id, 'test');
      const prefix = (to.subnet6 ?? '').replace(/::\/64$/, '');
      assert.equal(moved.device.address6, `${prefix}::3`);
      assert.match(
        devices.configText(moved, false),
        new RegExp(`^Address = ${moved.device.address}/32, ${prefix}::3/128$`, 'm'),
      );
    });
  });
}
