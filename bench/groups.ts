/**
 * Groups at scale (issue 16, item 4), through a real `vpn-panel serve` (dry-run driver) on SQLite and on
 * PostgreSQL: one group of 10,000 devices on one server; PATCH /groups/{id} (disable, enable and a speed limit,
 * so every peer leaves or changes on the node), POST .../usage/reset and GET of a page, each timed, while this
 * process asks GET /healthz one request after another; the /healthz times during the changes are set beside
 * those of the same panel idle, measured just before.
 * Targets: PATCH under 1 s, /healthz p99 under 50 ms during it.
 * Run: node bench/groups.ts   (DEVICES, ROUNDS, KINDS (sqlite,postgres) may be set; NO_WRITE: leave docs/benchmarks.md
 * alone; BASELINE=<another checkout>: its panel is measured beside this one's, rounds alternating)
 */
import { join } from 'node:path';
import { Agent as HttpAgent, request } from 'node:http';
import { systemClock } from '../src/domain/clock.ts';
import { openStore } from '../src/store/open.ts';
import { DATABASE_KINDS, type DatabaseKind, createTestDatabase } from '../test/support/databases.ts';
import { deviceValues } from '../test/support/usage-fixtures.ts';
import { BenchPanel } from './panel.ts';
import { loadAverage, machine, median, percentile, processCpuSeconds, writeSection } from './report.ts';

const DEVICES = Number(process.env.DEVICES ?? 10_000);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
/** Another checkout (e.g. of main) whose panel runs beside this one's, rounds alternating. */
const BASELINE = process.env.BASELINE;
const GROUP = 'bench-group';
const PATCH_TARGET_MS = 1_000;
const HEALTHZ_TARGET_MS = 50;

const keepAlive = new HttpAgent({ keepAlive: true, maxSockets: 4 });

/** One request on a kept-alive connection: status and milliseconds. */
function call(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: unknown,
): Promise<{ status: number; ms: number; text: string }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      `${base}${path}`,
      {
        method,
        agent: keepAlive,
        headers: payload === undefined ? headers : { ...headers, 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started, text }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** CPU time (user and system) of a process so far, in ms. */
function cpuMs(pid: number | undefined): number {
  return pid === undefined ? 0 : processCpuSeconds(pid) * 1000;
}

/** /healthz one after another until `stop` is set; the times of each. */
async function pollHealth(base: string, stop: { done: boolean }): Promise<number[]> {
  const times: number[] = [];
  while (!stop.done) times.push((await call(base, 'GET', '/healthz')).ms);
  return times;
}

/** Runs `work` while /healthz is polled; its time and the /healthz times meanwhile. */
async function underWatch(base: string, work: () => Promise<number>): Promise<{ ms: number; health: number[] }> {
  const stop = { done: false };
  const polling = pollHealth(base, stop);
  const ms = await work();
  stop.done = true;
  return { ms, health: await polling };
}

/** One panel under test: a build (this checkout, or BASELINE's) on its own database, and what its rounds measured. */
interface Subject {
  label: string;
  panel: BenchPanel;
  drop: () => Promise<void>;
  auth: Record<string, string>;
  idle: number[];
  patches: number[];
  patchCpu: number[];
  resets: number[];
  gets: number[];
  during: number[];
}

/** A panel of `cli` (this checkout's when undefined) on a new database holding the group, idle times measured. */
async function prepare(kind: DatabaseKind, label: string, cli: string | undefined): Promise<Subject> {
  const database = await createTestDatabase(kind);
  const panel = new BenchPanel(`groups-${kind}-${label}`, { ...database.env, METRICS_PORT: '0' }, cli);
  const subject: Subject = {
    label,
    panel,
    drop: async () => {
      await panel.remove();
      await database.drop();
    },
    auth: {},
    idle: [],
    patches: [],
    patchCpu: [],
    resets: [],
    gets: [],
    during: [],
  };
  try {
    await panel.start();
    subject.auth = { authorization: `Bearer ${panel.createKey()}` };
    const server = await call(panel.base, 'POST', '/api/v1/servers', subject.auth, {
      name: 'group-server',
      address: '10.60.0.1/18',
      max_devices: DEVICES + 100,
    });
    if (server.status !== 201) throw new Error(`POST /servers: ${server.status} ${server.text}`);
    const serverId = Number((JSON.parse(server.text) as { id: number }).id);
    // The devices are written straight (panel stopped), as the API writes them; the start-up resync puts
    // their peers on the node.
    await panel.stop();
    const store = openStore({ dataDir: database.dataDir, databaseUrl: database.env.DATABASE_URL });
    const now = new Date(systemClock.nowMs()).toISOString();
    for (let start = 0; start < DEVICES; start += 500) {
      const rows = Array.from({ length: Math.min(500, DEVICES - start) }, (_, k) => {
        const i = start + k + 2;
        const address = `10.60.${i >> 8}.${i & 255}`;
        return { ...deviceValues(serverId, { name: `m${i}`, address }, now), external_id: GROUP };
      });
      await store.db.insertInto('devices').values(rows).execute();
    }
    await store.db.updateTable('servers').set({ device_count: DEVICES }).where('id', '=', serverId).execute();
    await store.close();
    await panel.start();
    const idle = await underWatch(panel.base, async () => {
      const started = performance.now();
      while (performance.now() - started < 2_000) await call(panel.base, 'GET', '/api/v1/groups/none', subject.auth);
      return performance.now() - started;
    });
    subject.idle = idle.health;
    return subject;
  } catch (error) {
    await subject.drop();
    throw error;
  }
}

/** One round on a subject: two PATCHes, a usage reset and a GET, /healthz polled during the changes. */
async function round(subject: Subject, n: number): Promise<void> {
  const { panel, auth } = subject;
  const path = `/api/v1/groups/${GROUP}`;
  const timed = async (method: string, route: string, body?: unknown) => {
    const cpuBefore = cpuMs(panel.pid);
    const answer = await call(panel.base, method, route, auth, body);
    if (method === 'PATCH') subject.patchCpu.push(cpuMs(panel.pid) - cpuBefore);
    if (answer.status !== 200) throw new Error(`${method} ${route}: ${answer.status} ${answer.text.slice(0, 300)}`);
    return answer.ms;
  };
  for (const body of [{ enabled: false }, { enabled: true, speed_limit: 1000 + n }]) {
    const run = await underWatch(panel.base, () => timed('PATCH', path, body));
    subject.patches.push(run.ms);
    subject.during.push(...run.health);
  }
  const reset = await underWatch(panel.base, () => timed('POST', `${path}/usage/reset`));
  subject.resets.push(reset.ms);
  subject.during.push(...reset.health);
  subject.gets.push(await timed('GET', `${path}?limit=200`));
}

function tableRow(kind: DatabaseKind, subject: Subject): string {
  const { patches, during } = subject;
  const ms = (v: number) => `${v.toFixed(0)} ms`;
  const p99 = percentile(during, 99);
  const verdict =
    `PATCH ${median(patches) < PATCH_TARGET_MS ? 'meets' : 'misses'} its target, ` +
    `/healthz p99 ${p99 < HEALTHZ_TARGET_MS ? 'meets' : 'misses'} its target`;
  return (
    `| ${kind} | ${subject.label} | ${ms(median(patches))} (${ms(Math.min(...patches))}-${ms(Math.max(...patches))}) ` +
    `| ${ms(median(subject.patchCpu))} | ${ms(median(subject.resets))} | ${ms(median(subject.gets))} ` +
    `| ${percentile(subject.idle, 99).toFixed(1)} ms ` +
    `| ${percentile(during, 50).toFixed(1)} ms | ${p99.toFixed(1)} ms | ${Math.max(...during).toFixed(0)} ms ` +
    `| ${verdict} |`
  );
}

/** The rows of one database: this checkout, and BASELINE's build beside it (rounds alternating) when set. */
async function benchKind(kind: DatabaseKind): Promise<string[]> {
  const builds: [string, string | undefined][] = [['this', undefined]];
  if (BASELINE !== undefined) builds.push(['baseline', join(BASELINE, 'bin', 'vpn-panel.js')]);
  const subjects: Subject[] = [];
  try {
    for (const [label, cli] of builds) subjects.push(await prepare(kind, label, cli));
    for (let n = 0; n < ROUNDS; n++) for (const subject of subjects) await round(subject, n);
    return subjects.map((subject) => tableRow(kind, subject));
  } finally {
    for (const subject of subjects) await subject.drop();
  }
}

const rows: string[] = [];
for (const kind of DATABASE_KINDS.filter((k) => (process.env.KINDS ?? k).includes(k))) {
  for (const row of await benchKind(kind)) {
    console.log(row);
    rows.push(row);
  }
}
keepAlive.destroy();

const body = `
Command: \`${BASELINE === undefined ? '' : `BASELINE=${BASELINE} `}node bench/groups.ts\` (DEVICES=${DEVICES}, \
ROUNDS=${ROUNDS}). ${machine()}

One group of ${DEVICES.toLocaleString('en')} devices on one server of a \`vpn-panel serve\` (dry-run driver).
Each round:
PATCH \`{"enabled": false}\`, PATCH \`{"enabled": true, "speed_limit": …}\` (every peer leaves, then comes back
changed), POST \`/usage/reset\`, GET a page of 200. Meanwhile this process sends GET /healthz one after another;
"idle" is the same for 2 s just before, the panel answering 404s for an unknown group.
A group change is set statements (one per thousand devices) with events, deliveries and activity inserted a
thousand rows a statement of fixed text (raw-sql.ts \`insertRows\`), a thousand devices at a time with the event
loop let go between them (one transaction on PostgreSQL, one per 100 devices on SQLite), then one peer change per
server (src/services/devices.ts, \`#changeGroup\`).

| Database | build | PATCH median (range) | panel CPU/PATCH | reset | GET 200 | healthz p99 idle | p50 | p99 | max | |
|---|---|---|---|---|---|---|---|---|---|---|
${rows.join('\n')}

Targets: PATCH under ${PATCH_TARGET_MS} ms, /healthz p99 under ${HEALTHZ_TARGET_MS} ms during it. Load average at the
end: ${loadAverage()} (other work on the machine stretches every wall time; the panel's CPU time per PATCH is
what the panel itself spent, PostgreSQL's own work not counted).
`;
if (process.env.NO_WRITE === undefined) writeSection('Groups of 10,000 devices (issue 16)', body);
console.log(body);
