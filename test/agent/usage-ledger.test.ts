/**
 * The usage ledger end to end on a scripted counter source: a driver whose peer counters the test
 * moves, with a ground-truth tally of every byte. Between collections the script makes counter
 * resets (an interface made anew, a peer removed and added again), kills the agent (a new Agent
 * from the same journal file, as after SIGKILL: what was not saved is gone), duplicates, reorders
 * and loses reports, and stops the panel for a while. The panel side is the real UsageService on
 * SQLite and PostgreSQL. Recorded totals must equal the ground truth exactly and never decrease.
 */
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Agent } from '../../src/agent/agent.ts';
import type { DesiredServer, UsageAck, UsageReport } from '../../src/agent/protocol.ts';
import { JournalFile, MemoryJournal, UsageLedger } from '../../src/agent/usage-ledger.ts';
import { ManualClock } from '../../src/domain/clock.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { quietPublisher } from '../../src/services/changes.ts';
import { UsageService } from '../../src/services/usage.ts';
import { listDayBuckets, listMonthBuckets } from '../../src/store/usage.ts';
import { listDevicesOfServer } from '../../src/store/devices.ts';
import { DATABASE_KINDS } from '../support/databases.ts';
import { ScriptedDriver } from '../support/scripted-driver.ts';
import { deviceValues, migratedStoreForSuite, seedNode, seedServer } from '../support/usage-fixtures.ts';

const SERVERS = 2;
const DEVICES_PER_SERVER = 6;
const ROUNDS = 300;

for (const kind of DATABASE_KINDS) {
  describe(`usage ledger against ground truth (${kind})`, () => {
    const suite = migratedStoreForSuite(kind);

    it(
      'counts every byte once through resets, agent kills, ' +
        'duplicated, reordered and lost reports and a stopped panel',
      async () => {
        const clock = new ManualClock(Date.parse('2026-11-21T08:00:00Z'));
        const usage = new UsageService(suite.store.db, clock, new Calendar('Europe/Berlin'));
        const now = new Date(clock.nowMs()).toISOString();
        const node = await seedNode(suite.store.db, 'scripted', now);
        const desired: DesiredServer[] = [];
        for (let s = 1; s <= SERVERS; s++) {
          const server = await seedServer(
            suite.store.db,
            node,
            { name: `s${s}`, listenPort: 51820 + s, subnet: `10.${s}.0.0/24`, capacity: 253 },
            now,
          );
          for (let d = 0; d < DEVICES_PER_SERVER; d++) {
            await suite.store.db
              .insertInto('devices')
              .values(deviceValues(server.id, { name: `d${d}`, address: `10.${s}.0.${d + 2}` }, now))
              .execute();
          }
          desired.push({
            server: {
              serverId: server.id,
              privateKey: server.private_key,
              listenPort: server.listen_port,
              address: server.address,
              mtu: 1420,
            },
            peers: [],
          });
        }
        const desiredNow = async (): Promise<DesiredServer[]> =>
          Promise.all(
            desired.map(async (d) => ({
              ...d,
              peers: (await listDevicesOfServer(suite.store.db, d.server.serverId)).map((row) => usage.peerOf(row)),
            })),
          );

        const driver = new ScriptedDriver();
        const journal = join(suite.database.dataDir, 'journal.json');
        const newAgent = () => new Agent(driver, 'test', { ledger: new UsageLedger(new JournalFile(journal)), clock });
        let agent = newAgent();
        await agent.resync(await desiredNow());

        const truth = new Map<number, { rx: number; tx: number }>();
        const recorded = async () => {
          const sums = new Map<number, { rx: number; tx: number }>();
          for (const device of await suite.store.db.selectFrom('devices').selectAll().execute()) {
            for (const day of await listDayBuckets(suite.store.db, device, '1970-01-01')) {
              const s = sums.get(device.id) ?? { rx: 0, tx: 0 };
              sums.set(device.id, { rx: s.rx + day.rx_bytes, tx: s.tx + day.tx_bytes });
            }
          }
          return sums;
        };
        let ack: UsageAck | null = null;
        let panelStoppedUntil = 0;
        let previous = new Map<number, { rx: number; tx: number }>();
        const stats = { kills: 0, recreates: 0, readds: 0, duplicates: 0, reorders: 0, lost: 0, stopped: 0 };
        const ingest = async (report: UsageReport) => {
          const stored = await usage.ingest(node, report, quietPublisher(suite.store.db, clock));
          if (stored) ack = stored;
        };

        for (let round = 0; round < ROUNDS; round++) {
          // Traffic on the interface: the device downloads what the server sends (tx) and uploads what it
          // receives (rx).
          const devices = await suite.store.db
            .selectFrom('devices')
            .select(['id', 'server_id', 'public_key', 'enabled'])
            .execute();
          for (const device of devices) {
            const counters = driver.servers.get(device.server_id)?.peers.get(device.public_key);
            if (!counters) continue;
            const up = randomInt(5000);
            const down = randomInt(20000);
            counters.rx += up;
            counters.tx += down;
            const t = truth.get(device.id) ?? { rx: 0, tx: 0 };
            truth.set(device.id, { rx: t.rx + down, tx: t.tx + up });
          }
          clock.advance(randomInt(1000, 120_000));
          await agent.meterAll();

          const dice = randomInt(100);
          if (dice < 6) {
            // SIGKILL: the agent's memory is gone; the interfaces and the journal file stay.
            agent = newAgent();
            await agent.resync(await desiredNow());
            stats.kills++;
          } else if (dice < 10) {
            driver.recreate(randomInt(1, SERVERS + 1));
            stats.recreates++;
          } else if (dice < 14) {
            // A device disabled and enabled again: its peer leaves (its counters booked first) and comes back at 0.
            const device = devices[randomInt(devices.length)];
            if (device) {
              const server = desired.find((d) => d.server.serverId === device.server_id);
              await agent.changePeers(device.server_id, { upsert: [], remove: [device.public_key] });
              const row = (await listDevicesOfServer(suite.store.db, device.server_id)).find((r) => r.id === device.id);
              if (server && row) await agent.changePeers(device.server_id, { upsert: [usage.peerOf(row)], remove: [] });
              stats.readds++;
            }
          }

          if (clock.nowMs() < panelStoppedUntil) continue;
          if (randomInt(100) < 3) {
            panelStoppedUntil = clock.nowMs() + randomInt(600_000, 3_600_000);
            stats.stopped++;
            continue;
          }
          const report = agent.collectUsage(ack);
          const fate = randomInt(100);
          if (fate < 8) {
            stats.lost++;
            continue;
          }
          if (fate < 16) {
            await ingest(report);
            await ingest(report);
            stats.duplicates++;
          } else if (fate < 24) {
            await ingest({ ...report, batches: [...report.batches].reverse() });
            stats.reorders++;
          } else {
            await ingest(report);
          }
          const now = await recorded();
          for (const [id, sums] of previous) {
            const later = now.get(id) ?? { rx: 0, tx: 0 };
            assert.ok(
              later.rx >= sums.rx && later.tx >= sums.tx,
              `device ${id}'s recorded usage went down in round ${round}`,
            );
          }
          previous = now;
        }

        await agent.meterAll();
        await ingest(agent.collectUsage(ack));
        await ingest(agent.collectUsage(ack));
        const final = await recorded();
        assert.deepEqual(
          [...final].sort(([a], [b]) => a - b),
          [...truth].sort(([a], [b]) => a - b),
          `recorded usage equals the ground truth (${JSON.stringify(stats)})`,
        );
        let monthRx = 0;
        for (const deviceId of truth.keys()) {
          const row = await suite.store.db
            .selectFrom('devices')
            .selectAll()
            .where('id', '=', deviceId)
            .executeTakeFirstOrThrow();
          for (const month of await listMonthBuckets(suite.store.db, row, '1970-01-01')) monthRx += month.rx_bytes;
        }
        const totalRx = [...truth.values()].reduce((n, t) => n + t.rx, 0);
        assert.equal(monthRx, totalRx, 'the months of the usage report hold the same bytes');
        assert.ok(
          stats.kills > 0 && stats.recreates > 0 && stats.duplicates > 0 && stats.lost > 0,
          JSON.stringify(stats),
        );
      },
    );
  });
}

describe('baselines of a server', () => {
  const devices = new Map([
    ['A', 1],
    ['B', 2],
  ]);
  const read = (ledger: UsageLedger, instance: string, peers: [string, number, number][]) =>
    ledger.record(
      7,
      {
        instance,
        peers: peers.map(([publicKey, rxBytes, txBytes]) => ({ publicKey, rxBytes, txBytes, lastHandshakeMs: 0 })),
      },
      (key) => devices.get(key),
      Date.parse('2026-11-24T12:00:00Z'),
    );

  it('count each byte once, lose a peer missing from a reading, and start again on a new interface', () => {
    const ledger = new UsageLedger(new MemoryJournal());
    assert.deepEqual(
      read(ledger, 'a', [
        ['A', 100, 50],
        ['B', 10, 20],
      ]),
      { rxBytes: 70, txBytes: 110 },
    );
    assert.deepEqual(
      read(ledger, 'a', [
        ['A', 100, 50],
        ['B', 10, 20],
      ]),
      { rxBytes: 0, txBytes: 0 },
      'no change',
    );
    assert.deepEqual(read(ledger, 'a', [['A', 150, 50]]), { rxBytes: 0, txBytes: 50 }, 'B left the interface');
    // B is back with counters that passed its old ones: without a baseline they count from 0.
    assert.deepEqual(
      read(ledger, 'a', [
        ['A', 150, 50],
        ['B', 30, 20],
      ]),
      { rxBytes: 20, txBytes: 30 },
    );
    assert.equal(ledger.meter(2), 30 + 50);
    assert.deepEqual(read(ledger, 'b', [['A', 5, 0]]), { rxBytes: 0, txBytes: 5 }, 'another interface: from 0');
    assert.equal(ledger.meter(1), 150 + 50 + 5);
  });

  it('keep none for a peer that has counted nothing, which still counts from 0 once it does', () => {
    const journal = new MemoryJournal();
    const ledger = new UsageLedger(journal);
    assert.deepEqual(
      read(ledger, 'a', [
        ['A', 0, 0],
        ['B', 10, 20],
      ]),
      { rxBytes: 20, txBytes: 10 },
    );
    ledger.flush();
    assert.deepEqual(journal.load()?.baselines, { 7: { instance: 'a', peers: { B: [2, 10, 20] } } });
    assert.deepEqual(
      read(ledger, 'a', [
        ['A', 30, 0],
        ['B', 10, 20],
      ]),
      { rxBytes: 0, txBytes: 30 },
    );
    assert.equal(ledger.meter(1), 30);
  });

  it("report a handshake without bytes, and ask no peer's device while it has neither", () => {
    const ledger = new UsageLedger(new MemoryJournal());
    const asked: string[] = [];
    const deviceOf = (key: string) => {
      asked.push(key);
      return devices.get(key);
    };
    const nowMs = Date.parse('2026-11-24T12:00:00Z');
    const peers = [
      { publicKey: 'A', rxBytes: 0, txBytes: 0, lastHandshakeMs: 0 },
      { publicKey: 'B', rxBytes: 0, txBytes: 0, lastHandshakeMs: nowMs - 5_000 },
    ];
    assert.deepEqual(ledger.record(7, { instance: 'a', peers }, deviceOf, nowMs), { rxBytes: 0, txBytes: 0 });
    assert.deepEqual(asked, ['B']);
    assert.deepEqual(ledger.collect(null).handshakes, [{ deviceId: 2, lastHandshakeMs: nowMs - 5_000 }]);
  });
});
