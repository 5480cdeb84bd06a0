/**
 * The soak (issue 27 item 4): DURATION minutes (30) of mixed load against a real `vpn-panel serve` started as
 * scripts/start starts it (bench/panel.ts, with MEMORY_ENV), SQLite in a temp DATA_DIR, its node a remote one added
 * with `vpn-panel nodes add` as the README adds one: the node's own Agent in this process on a scripted data plane
 * where every peer moves bytes each second, so each usage round (every 5 s) carries all DEVICES devices.
 * The load, each at a fixed rate whatever the answers take: creates with as many deletes of the oldest devices (the
 * fleet stays at DEVICES), metadata updates, and reads (a walk of the device pages, one device, its usage, a walk of
 * the events, the servers); every create, update and delete is a webhook delivery to bench/webhooks.ts's receiver.
 * Every SAMPLE_S seconds (60) it samples the panel's RSS, the p99 of the requests of that interval, the panel's CPU
 * seconds over it (/proc/PID/stat) and the load average (the machine is shared). The verdict: after a warm-up of the
 * first sixth, each series' median over the last third against its median over the rest of the first half, within
 * 10 %. It prints the table and writes it with the plot (docs/soak.svg) to docs/benchmarks.md.
 * Run: node bench/soak.ts   (DURATION minutes, SAMPLE_S, DEVICES, READS_PER_S, CHURN_PER_S, UPDATES_PER_S may be set;
 * NO_WRITE: print only)
 */
import { execFileSync } from 'node:child_process';
import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import SQLite from 'better-sqlite3';
import { BenchPanel, stop } from './panel.ts';
import {
  MEMORY_ENV,
  load1,
  loadAverage,
  machine,
  median,
  percentile,
  processCpuSeconds,
  procStatusMb,
  writeSection,
} from './report.ts';
import { type Api, apiOf, atRate, idOf, nextCursor, ScriptedNode, type Timed, WebhookReceiver } from './soak-load.ts';
import { type PlotWindows, soakSvg } from './soak-plot.ts';

const DURATION_MIN = Number(process.env.DURATION ?? 30);
const SAMPLE_S = Number(process.env.SAMPLE_S ?? 60);
const DEVICES = Number(process.env.DEVICES ?? 10_000);
const READS_PER_S = Number(process.env.READS_PER_S ?? 20);
const CHURN_PER_S = Number(process.env.CHURN_PER_S ?? 2);
const UPDATES_PER_S = Number(process.env.UPDATES_PER_S ?? 2);
const FILL_CONCURRENCY = 8;
const FLAT_WITHIN = 0.1;
const SECTION = 'Soak: 30 minutes of mixed load (issue 27 item 4)';
const PLOT = fileURLToPath(new URL('../docs/soak.svg', import.meta.url));

interface Sample {
  minute: number;
  rssMb: number;
  p99Ms: number;
  p50Ms: number;
  requests: number;
  failed: number;
  skipped: number;
  cpuS: number;
  benchCpuS: number;
  load1: string;
  delivered: number;
  devices: number;
  events: number;
  deliveryRows: number;
  batches: number;
  dbMb: number;
}

/** Load of the current interval, reset at each sample. */
class Interval {
  times: number[] = [];
  failed = 0;
  skipped = 0;
  record(t: Timed): void {
    this.times.push(t.ms);
    if (!t.ok) this.failed++;
  }
}

/** The table rows the panel's database holds, and its file's size with the WAL, read from a read-only connection. */
function databaseReader(dataDir: string) {
  const file = join(dataDir, 'vpn-panel.db');
  const db = new SQLite(file, { readonly: true, fileMustExist: true });
  const count = (table: string) => db.prepare<[], { n: number }>(`select count(*) as n from ${table}`);
  const tables = { devices: count('devices'), events: count('events'), deliveries: count('webhook_deliveries') };
  const batches = count('usage_batches');
  const size = (f: string) => {
    try {
      return statSync(f).size;
    } catch {
      return 0;
    }
  };
  return {
    read: () => ({
      devices: tables.devices.get()?.n ?? 0,
      events: tables.events.get()?.n ?? 0,
      deliveryRows: tables.deliveries.get()?.n ?? 0,
      batches: batches.get()?.n ?? 0,
      dbMb: (size(file) + size(`${file}-wal`)) / 1024 / 1024,
    }),
    close: () => db.close(),
  };
}

/** The load's clients: creates with deletes of the oldest, updates, and a rotation of reads; until `running()`. */
function startLoad(api: Api, serverId: number, live: number[], interval: () => Interval, running: () => boolean) {
  let made = 0;
  let devicePage = 0;
  let eventPage = 0;
  let read = 0;
  const pick = () => live[Math.floor(Math.random() * live.length)] ?? 0;
  const skipped = () => interval().skipped++;
  const call = async (method: string, path: string, body?: object) => {
    const answer = await api(method, path, body);
    interval().record(answer.timed);
    return answer;
  };
  const churn = atRate(
    CHURN_PER_S * 2,
    running,
    async () => {
      if (made++ % 2 === 0) {
        const { timed, json } = await call('POST', '/api/v1/devices', { server_id: serverId, name: `soak-${made}` });
        if (timed.ok) live.push(idOf(json));
        return;
      }
      const oldest = live.shift();
      if (oldest !== undefined) await call('DELETE', `/api/v1/devices/${oldest}`);
    },
    skipped,
  );
  const updates = atRate(
    UPDATES_PER_S,
    running,
    async () => {
      await call('PATCH', `/api/v1/devices/${pick()}`, { metadata: { soak: Date.now() } });
    },
    skipped,
  );
  const reads = atRate(
    READS_PER_S,
    running,
    async () => {
      switch (read++ % 5) {
        case 0:
          devicePage = nextCursor((await call('GET', `/api/v1/devices?limit=50&after=${devicePage}`)).json);
          return;
        case 1:
          eventPage = nextCursor((await call('GET', `/api/v1/events?limit=50&after=${eventPage}`)).json);
          return;
        case 2:
          await call('GET', `/api/v1/devices/${pick()}`);
          return;
        case 3:
          await call('GET', `/api/v1/devices/${pick()}/usage`);
          return;
        default:
          await call('GET', '/api/v1/servers');
      }
    },
    skipped,
  );
  return Promise.all([churn, updates, reads]);
}

/** DEVICES devices on the server, FILL_CONCURRENCY creates at a time; their ids, oldest first. */
async function fill(api: Api, serverId: number): Promise<number[]> {
  const ids: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: FILL_CONCURRENCY }, async () => {
      for (let i = next++; i < DEVICES; i = next++) {
        const { timed, json } = await api('POST', '/api/v1/devices', { server_id: serverId, name: `d${i}` });
        if (!timed.ok) throw new Error(`create ${i}: ${timed.status} ${JSON.stringify(json)}`);
        ids.push(idOf(json));
      }
    }),
  );
  console.log(`${DEVICES} devices in ${((performance.now() - started) / 1000).toFixed(0)} s`);
  return ids.sort((a, b) => a - b);
}

/** Minutes of the warm-up and of the two windows compared, for `n` samples (30: 1-5, 6-15 and 21-30). */
function windowsOf(n: number): PlotWindows {
  const warmUp = Math.max(1, Math.round(n / 6));
  return { warmUp, early: [warmUp + 1, Math.round(n / 2)], late: [n - Math.round(n / 3) + 1, n] };
}

interface Verdict {
  name: string;
  early: number;
  late: number;
  change: number;
  flat: boolean;
}

function verdictOf(name: string, values: readonly number[], w: PlotWindows): Verdict {
  const early = median(values.slice(w.early[0] - 1, w.early[1]));
  const late = median(values.slice(w.late[0] - 1, w.late[1]));
  const change = late / early - 1;
  return { name, early, late, change, flat: Math.abs(change) <= FLAT_WITHIN };
}

const f1 = (v: number) => v.toFixed(1);
const int = (v: number) => Math.round(v).toLocaleString('en');

function report(samples: readonly Sample[], loadAtStart: string, fillNote: string): void {
  const w = windowsOf(samples.length);
  const verdicts = [
    verdictOf(
      'panel RSS (MB)',
      samples.map((s) => s.rssMb),
      w,
    ),
    verdictOf(
      'p99 latency (ms)',
      samples.map((s) => s.p99Ms),
      w,
    ),
    verdictOf(
      `panel CPU (s per ${SAMPLE_S} s)`,
      samples.map((s) => s.cpuS),
      w,
    ),
  ];
  const [rss, p99, cpu] = verdicts;
  const plot = soakSvg(
    [
      { title: 'panel RSS', unit: 'MB', values: samples.map((s) => s.rssMb), reference: rss?.early },
      { title: 'p99 request latency', unit: 'ms', values: samples.map((s) => s.p99Ms), reference: p99?.early },
      {
        title: `panel CPU over each ${SAMPLE_S} s`,
        unit: 's',
        values: samples.map((s) => s.cpuS),
        reference: cpu?.early,
      },
      {
        title: 'load average, 1 min (machine shared)',
        unit: '',
        values: samples.map((s) => Number(s.load1)),
        reference: undefined,
      },
    ],
    w,
    `vpn-panel soak: ${samples.length} × ${SAMPLE_S} s, ${int(DEVICES)} devices, ${machine()}`,
  );
  const rows = samples.map(
    (s) =>
      `| ${s.minute} | ${f1(s.rssMb)} | ${f1(s.p99Ms)} | ${f1(s.p50Ms)} | ${int(s.requests)} | ${s.failed} | ` +
      `${s.skipped} | ${f1(s.cpuS)} | ${f1(s.benchCpuS)} | ${s.load1} | ${int(s.delivered)} | ${int(s.devices)} | ` +
      `${int(s.events)} | ${int(s.deliveryRows)} | ${int(s.batches)} | ${f1(s.dbMb)} |`,
  );
  const verdictRows = verdicts.map(
    (v) =>
      `| ${v.name} | ${f1(v.early)} | ${f1(v.late)} | ${(v.change * 100).toFixed(1)} % | ` +
      `**${v.flat ? 'flat' : 'NOT flat'}** |`,
  );
  const settings =
    `DURATION=${DURATION_MIN} SAMPLE_S=${SAMPLE_S} DEVICES=${DEVICES} READS_PER_S=${READS_PER_S} ` +
    `CHURN_PER_S=${CHURN_PER_S} UPDATES_PER_S=${UPDATES_PER_S}`;
  const body = [
    `Command: \`node bench/soak.ts\` (\`${settings}\`). Machine: ${machine()}, shared with other work: the load ` +
      `average is in every row (1/5/15 min at the start: ${loadAtStart}; at the end: ${loadAverage()}).`,
    '',
    '`vpn-panel serve` as `scripts/start` runs it (MEMORY_ENV, SQLite in a temp `DATA_DIR`, `LOG_LEVEL=warn`, ' +
      '`WEBHOOK_ALLOW_PRIVATE=1`), its node added with `vpn-panel nodes add` as the README adds one: the Agent of ' +
      '`vpn-panel node` in the bench process on a scripted data plane where every peer moves 1,200 bytes a second, ' +
      `so each usage round (every 5 s) books all ${int(DEVICES)} devices; the drift check (15 s) and the census run ` +
      `as shipped. ${fillNote} Then, each at a fixed rate whatever the answers take: ${CHURN_PER_S} creates/s with ` +
      `as many deletes of the oldest device (the fleet stays at ${int(DEVICES)}), ${UPDATES_PER_S} metadata ` +
      `updates/s, ${READS_PER_S} reads/s (in turn: a walk of the device pages and of the events, 50 a page, one ` +
      'device, its usage, the servers); one webhook subscribed to `device.created`, `device.updated` and ' +
      "`device.deleted` delivers to bench/webhooks.ts's receiver (204 at once). The bench (load, agent, receiver " +
      'client) shares the 2 cores: its CPU is a column.',
    '',
    `Each row is one ${SAMPLE_S} s interval: the panel's RSS at its end, p99 and p50 of the requests made in it ` +
      '(time to the whole body), requests, failed (non-2xx or no answer), ticks skipped (64 requests in flight), ' +
      "the panel's and the bench's CPU seconds over it, the 1-min load average, webhook deliveries received, " +
      "and the panel's tables and database file (with its WAL) at its end.",
    '',
    `Verdict: minutes 1-${w.warmUp} are the warm-up; each series' median over minutes ${w.late[0]}-${w.late[1]} ` +
      `against its median over minutes ${w.early[0]}-${w.early[1]}, flat when within ${FLAT_WITHIN * 100} %.`,
    '',
    '| series | median, early window | median, last window | change | verdict |',
    '|---|---|---|---|---|',
    ...verdictRows,
    '',
    '![The soak: RSS, p99, CPU and load average each minute](soak.svg)',
    '',
    '| min | RSS MB | p99 ms | p50 ms | requests | failed | skipped | panel CPU s | bench CPU s | load 1 min | ' +
      'deliveries | devices | events | delivery rows | usage batches | db MB |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
  console.log(body);
  if (process.env.NO_WRITE !== undefined) return;
  writeFileSync(PLOT, plot);
  writeSection(SECTION, body);
}

async function main(): Promise<void> {
  const node = new ScriptedNode();
  const receiver = new WebhookReceiver();
  const panel = new BenchPanel('soak', { ...MEMORY_ENV, LOCAL_NODE: 'off', WEBHOOK_ALLOW_PRIVATE: '1' });
  let reader: ReturnType<typeof databaseReader> | undefined;
  const cleanUp = async () => {
    reader?.close();
    await stop(receiver.child);
    await panel.remove();
    await node.stop();
  };
  process.once('SIGINT', () => void cleanUp().finally(() => process.exit(130)));
  try {
    const nodeUrl = await node.start();
    const receiverPort = await receiver.ready();
    const cli = fileURLToPath(new URL('../bin/vpn-panel.js', import.meta.url));
    const add = [
      'nodes',
      'add',
      '--name',
      'soak',
      '--url',
      nodeUrl,
      '--token',
      node.token,
      '--public-host',
      '192.0.2.1',
    ];
    execFileSync(process.execPath, [cli, ...add], { env: panel.env, stdio: 'inherit' });
    const key = panel.createKey();
    await panel.start('soak');
    const pid = panel.pid ?? 0;
    const call = apiOf(panel.base, key);
    const server = await call('POST', '/api/v1/servers', {
      name: 'soak',
      address: '10.200.0.1/16',
      max_devices: 65_533,
    });
    if (!server.timed.ok) throw new Error(`POST /servers: ${server.timed.status} ${JSON.stringify(server.json)}`);
    const serverId = idOf(server.json);
    const fillStarted = performance.now();
    const live = await fill(call, serverId);
    const fillNote =
      `The ${int(DEVICES)} devices are made through the API first (${FILL_CONCURRENCY} at a time, ` +
      `${((performance.now() - fillStarted) / 1000).toFixed(0)} s, not sampled).`;
    const hook = await call('POST', '/api/v1/webhooks', {
      url: `http://127.0.0.1:${receiverPort}/hook`,
      events: ['device.created', 'device.updated', 'device.deleted'],
      description: 'soak',
    });
    if (!hook.timed.ok) throw new Error(`POST /webhooks: ${hook.timed.status} ${JSON.stringify(hook.json)}`);
    reader = databaseReader(panel.dataDir);
    const loadAtStart = loadAverage();
    const endAt = performance.now() + DURATION_MIN * 60_000;
    const running = () => performance.now() < endAt;
    let interval = new Interval();
    const load = startLoad(call, serverId, live, () => interval, running);
    const samples: Sample[] = [];
    let cpu = processCpuSeconds(pid);
    let benchCpu = process.cpuUsage();
    let delivered = (await receiver.stats()).unique;
    for (let minute = 1; samples.length < Math.round((DURATION_MIN * 60) / SAMPLE_S); minute++) {
      await new Promise((resolve) => setTimeout(resolve, SAMPLE_S * 1000));
      const done = interval;
      interval = new Interval();
      const cpuNow = processCpuSeconds(pid);
      const bench = process.cpuUsage(benchCpu);
      benchCpu = process.cpuUsage();
      const received = (await receiver.stats()).unique;
      const sample: Sample = {
        minute,
        rssMb: procStatusMb(pid, 'VmRSS'),
        p99Ms: percentile(done.times, 99),
        p50Ms: percentile(done.times, 50),
        requests: done.times.length,
        failed: done.failed,
        skipped: done.skipped,
        cpuS: cpuNow - cpu,
        benchCpuS: (bench.user + bench.system) / 1e6,
        load1: load1(),
        delivered: received - delivered,
        ...reader.read(),
      };
      cpu = cpuNow;
      delivered = received;
      samples.push(sample);
      console.log(JSON.stringify(sample), `node peers ${node.peers}`);
    }
    await load;
    report(samples, loadAtStart, fillNote);
  } finally {
    await cleanUp();
  }
}

await main();
process.exit(0);
