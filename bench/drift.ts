/**
 * The drift check at 100,000 devices over 10 servers of one node, on SQLite and PostgreSQL: one round
 * of DriftRepair (node and database match, so nothing is sent) against an in-process agent with the
 * dry-run driver holding the same state. Reported: wall and CPU time of the round, and apart the
 * agent's answer (GET /v1/digest: digests and the dry-run host check) and the bytes that answer takes
 * on the wire. Each round is run three times; the median is shown.
 * Run: node bench/drift.ts   (DEVICES, SERVERS may be set in the environment)
 */
import { collectAll } from '../src/domain/async-iterables.ts';
import { pino } from 'pino';
import { Agent } from '../src/agent/agent.ts';
import { LocalNodeConnection } from '../src/agent/connection.ts';
import { DryRunDriver } from '../src/agent/dry-run-driver.ts';
import { systemClock } from '../src/domain/clock.ts';
import { Calendar } from '../src/domain/usage.ts';
import { openMigratedStore } from '../src/main/store.ts';
import { desiredStateOfNode } from '../src/services/desired-state.ts';
import { quietPublisher } from '../src/services/changes.ts';
import { NodeConnections } from '../src/services/nodes.ts';
import { UsageService } from '../src/services/usage.ts';
import { DriftRepair } from '../src/workers/drift-repair.ts';
import { createTestDatabase, DATABASE_KINDS } from '../test/support/databases.ts';
import { seedFleet, seedNode } from '../test/support/usage-fixtures.ts';
import { machine, median, timed, writeSection } from './report.ts';

const DEVICES = Number(process.env.DEVICES ?? 100_000);
const SERVERS = Number(process.env.SERVERS ?? 10);
const RUNS = 3;

const rows: string[] = [];
for (const kind of DATABASE_KINDS) {
  const database = await createTestDatabase(kind);
  const storeConfig = { dataDir: database.dataDir, databaseUrl: database.env.DATABASE_URL, panelSecret: undefined };
  const store = await openMigratedStore(storeConfig);
  try {
    const now = new Date().toISOString();
    const node = await seedNode(store.db, 'bench', now);
    await seedFleet(store.db, node, { devices: DEVICES, servers: SERVERS }, now, (values, i) => ({
      ...values,
      data_limit: 10_000_000_000,
      limit_period: 'monthly',
      speed_limit: i % 10 === 0 ? 5000 : 0,
    }));
    const usage = new UsageService(store.db, systemClock, new Calendar('UTC'));
    const agent = new Agent(new DryRunDriver(), 'bench');
    const report = await agent.resync(await collectAll(desiredStateOfNode(store.db, node.id, usage)));
    if (report.failures.length > 0) throw new Error(report.failures.join('; '));
    const connection = new LocalNodeConnection(agent);
    const connections = new NodeConnections(connection);
    const log = pino({ level: 'silent' });
    const worker = new DriftRepair(store.db, connections, quietPublisher(store.db, systemClock), usage, log, {
      intervalMs: 15_000,
    });
    const rounds: { wallMs: number; cpuMs: number }[] = [];
    const answers: { wallMs: number; cpuMs: number }[] = [];
    for (let run = 0; run < RUNS; run++) {
      rounds.push(await timed(() => worker.checkAll()));
      answers.push(await timed(() => connection.digest()));
    }
    const repairs = store.db.selectFrom('activity').select('id').where('action', '=', 'server.drift_repaired');
    const repaired = await repairs.execute();
    if (repaired.length > 0) throw new Error('a matching node read as drift');
    const bytes = Buffer.byteLength(JSON.stringify(await connection.digest()));
    const ms = (values: number[]) => `${median(values).toFixed(0)} ms`;
    const [roundWall, roundCpu] = [ms(rounds.map((r) => r.wallMs)), ms(rounds.map((r) => r.cpuMs))];
    const cells = [kind, roundWall, roundCpu, ms(answers.map((r) => r.wallMs)), `${bytes} B`];
    rows.push(`| ${cells.join(' | ')} |`);
    console.log(rows.at(-1));
  } finally {
    await store.close();
    await database.drop();
  }
}

writeSection(
  'Drift check at 100,000 devices',
  `\`node bench/drift.ts\` (${machine()}): one round of the drift repair worker over one node with
${DEVICES.toLocaleString('en')} devices on ${SERVERS} servers (every tenth speed-limited), node and database
matching, so nothing but the digests is exchanged. The node is an in-process agent with the dry-run driver, so
"agent's answer" is the digests and the in-memory host check; on a wireguard host the check adds a \`wg show
dump\`, two \`ip\` and two \`nft list tables\` per server and the shaper's five reads where a peer is limited. Median
of ${RUNS} runs.

| database | round (wall) | round (CPU, both sides in one process) | agent's answer (wall) | answer on the wire |
|---|---|---|---|---|
${rows.join('\n')}

A round reads every device row of the node and hashes it (one SHA-256 per server); at the default 15 s interval that
is about the figure above every 15 s. Only a server whose digest differs gets its full desired state sent. The rows
are read without their private keys (\`listPeerRowsOfServer\`), so no sealed key is opened. The machine is shared with
other work: wall times vary with its load (a run under a load average of 15 took 2.7 s on SQLite), CPU times less.`,
);
