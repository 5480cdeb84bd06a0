import { collectAll } from '../src/domain/async-iterables.ts';
/**
 * Flat creates (issue 16, item 3): device creates per second on an empty panel and on one holding 100,000
 * devices, side by side in one run, on SQLite and PostgreSQL. Each panel is a DeviceService as `serve` wires
 * it (its own store, a dry-run agent holding every peer), in this process; rounds alternate between the two
 * panels (which goes first too), CONCURRENCY creates at a time, half with `server_id: auto` and half on a
 * named server. The ratio full/empty is taken per round, and its median is reported.
 * Target: creates/s at 100,000 devices at least 0.8 of creates/s on an empty panel.
 * Run: node bench/flat-creates.ts   (DEVICES, ROUNDS, CREATES_PER_ROUND, CONCURRENCY may be set)
 */
import { Agent } from '../src/agent/agent.ts';
import { LocalNodeConnection } from '../src/agent/connection.ts';
import { DryRunDriver } from '../src/agent/dry-run-driver.ts';
import { systemClock } from '../src/domain/clock.ts';
import { Calendar } from '../src/domain/usage.ts';
import { ChangePublisher } from '../src/services/changes.ts';
import { desiredStateOfNode } from '../src/services/desired-state.ts';
import { DeviceService } from '../src/services/devices.ts';
import { NodeConnections } from '../src/services/nodes.ts';
import { UsageService } from '../src/services/usage.ts';
import { DATABASE_KINDS, type DatabaseKind } from '../test/support/databases.ts';
import { openTestStore, type TestStore } from '../test/support/stores.ts';
import { seedFleet, seedNode } from '../test/support/usage-fixtures.ts';
import { machine, median, writeSection } from './report.ts';

const DEVICES = Number(process.env.DEVICES ?? 100_000);
const ROUNDS = Number(process.env.ROUNDS ?? 7);
const CREATES_PER_ROUND = Number(process.env.CREATES_PER_ROUND ?? 300);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 8);
/** Creates before measuring: compile the code paths, read each server's addresses once. */
const WARM_UP = 100;
/** Two servers of a /16 each (65,533 addresses), room for every seeded device and the creates. */
const SERVERS = 2;
const ROOM = 65_000;
const TARGET = 0.8;

interface BenchPanel {
  opened: TestStore;
  devices: DeviceService;
  serverIds: number[];
}

/** A panel on a new database of `kind` holding `devices` devices, its node's agent holding their peers. */
async function openPanel(kind: DatabaseKind, devices: number): Promise<BenchPanel> {
  const opened = await openTestStore(kind, { sealed: true });
  const db = opened.store.db;
  const now = new Date().toISOString();
  const node = await seedNode(db, 'bench', now);
  // seedFleet puts at least one device on each server; the empty panel deletes them again.
  await seedFleet(db, node, { devices: Math.max(devices, SERVERS), servers: SERVERS }, now);
  if (devices === 0) {
    await db.deleteFrom('devices').execute();
    await db.updateTable('servers').set({ device_count: 0 }).execute();
  }
  // seedFleet gives each server a /15 (10.2n.0.0) and its devices the low addresses of it: a /16 holds them.
  const servers = await db.selectFrom('servers').select(['id', 'subnet']).orderBy('id').execute();
  for (const { id, subnet } of servers) {
    const network = subnet.replace(/\/15$/, '');
    const address = `${network.replace(/\.0$/, '.1')}/16`;
    await db
      .updateTable('servers')
      .set({ subnet: `${network}/16`, address, capacity: ROOM })
      .where('id', '=', id)
      .execute();
  }
  const serverIds = servers.map((s) => s.id);
  const usage = new UsageService(db, systemClock, new Calendar('UTC'));
  const agent = new Agent(new DryRunDriver(), 'bench');
  await agent.resync(await collectAll(desiredStateOfNode(db, node.id, usage)));
  const changes = new ChangePublisher(db, systemClock, new NodeConnections(new LocalNodeConnection(agent)), {
    nudgeWebhooks: () => undefined,
  });
  return { opened, devices: new DeviceService(opened.store, systemClock, usage, changes), serverIds };
}

/** `count` creates, CONCURRENCY at a time; creates per second. */
async function creates(panel: BenchPanel, count: number): Promise<number> {
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < count; i = next++) {
      const serverId = i % 2 === 0 ? 'auto' : (panel.serverIds[i % panel.serverIds.length] ?? 1);
      await panel.devices.create({ serverId }, 'bench');
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return count / ((performance.now() - started) / 1000);
}

const rows: string[] = [];
const verdicts: string[] = [];
for (const kind of DATABASE_KINDS) {
  const empty = await openPanel(kind, 0);
  const full = await openPanel(kind, DEVICES);
  try {
    await creates(empty, WARM_UP);
    await creates(full, WARM_UP);
    const emptyRates: number[] = [];
    const fullRates: number[] = [];
    const ratios: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      let emptyRate: number;
      let fullRate: number;
      if (round % 2 === 0) {
        emptyRate = await creates(empty, CREATES_PER_ROUND);
        fullRate = await creates(full, CREATES_PER_ROUND);
      } else {
        fullRate = await creates(full, CREATES_PER_ROUND);
        emptyRate = await creates(empty, CREATES_PER_ROUND);
      }
      emptyRates.push(emptyRate);
      fullRates.push(fullRate);
      ratios.push(fullRate / emptyRate);
    }
    const ratio = median(ratios);
    const line =
      `| ${kind} | ${median(emptyRates).toFixed(0)} | ${median(fullRates).toFixed(0)} | ${ratio.toFixed(2)} ` +
      `| ${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)} |`;
    rows.push(line);
    verdicts.push(`${kind}: ${ratio >= TARGET ? 'meets' : 'misses'} the target (${ratio.toFixed(2)} >= ${TARGET})`);
    console.log(line);
  } finally {
    await empty.opened.close();
    await full.opened.close();
  }
}

const body = `
Command: \`node bench/flat-creates.ts\` (DEVICES=${DEVICES}, ROUNDS=${ROUNDS}, CREATES_PER_ROUND=${CREATES_PER_ROUND},
CONCURRENCY=${CONCURRENCY}). ${machine()}

Device creates through \`DeviceService.create\` as \`serve\` wires it (events, activity, limit mark, the peer put
on a dry-run agent before commit), in process, on an empty panel and on one holding ${DEVICES.toLocaleString('en')}
devices over ${SERVERS} servers, rounds alternating between the two; half the creates use \`server_id: auto\`.
The servers' \`device_count\` (migration 018) answers placement and the capacity check, and the address allocator
starts its search at the lowest address not known taken, so neither reads every device of a server.

| Database | creates/s, empty | creates/s, ${DEVICES.toLocaleString('en')} devices | ratio (median) | ratio range |
|---|---|---|---|---|
${rows.join('\n')}

Target: ratio >= ${TARGET}. ${verdicts.join('; ')}.
`;
writeSection('Flat creates at 100,000 devices (issue 16)', body);
console.log(body);
