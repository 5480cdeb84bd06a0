/**
 * Webhook delivery through a real `vpn-panel serve` (SQLite in a temp DATA_DIR, dry-run driver,
 * WEBHOOK_ALLOW_PRIVATE=1, a key made with `--no-rate-limit`) to a fast local receiver, a second
 * process of this file (`node bench/webhooks.ts receiver`) that answers 204 at once, or holds every
 * request unanswered while it is told to ("hanging"), and counts requests by their `webhook-id`
 * (duplicates: a webhook-id answered 2xx more than once).
 *
 * - Delivery rate: WEBHOOKS webhooks subscribed to `device.updated`; DEVICES devices in GROUPS groups
 *   (made before any webhook exists). While the receiver hangs, one `PATCH /groups/{external_id}` per
 *   group records DEVICES events, hence a backlog of DEVICES × WEBHOOKS pending deliveries, in well
 *   under a second; RATE_BACKLOGS of them in a row (the producer is not what is measured, and it
 *   finishes well inside the sender's 15 s attempt timeout, so no delivery is tried, failed and
 *   parked before the switch). Then the receiver answers 204 and the time from that switch until it
 *   has seen every delivery (and until the database holds none pending) gives deliveries/s; the
 *   panel's CPU comes from /proc/<pid>/stat.
 * - Read latency: `GET /api/v1/devices?limit=50` and `GET /api/v1/events?limit=50`, SEQUENTIAL
 *   requests one at a time and autocannon with 10 connections for LOAD_S s, with nothing pending
 *   (before the first delivery and after the last), with DEVICES × WEBHOOKS pending behind a hanging
 *   receiver, and (sequential only) while the sender drains that backlog.
 * Target (issue): 1,000 deliveries/s to a fast receiver on this 2-core machine.
 *
 * Run: node bench/webhooks.ts   (or npm run bench:webhooks)
 * Environment: DEVICES (2500), WEBHOOKS (4), RATE_BACKLOGS (4), SEQUENTIAL (300), LOAD_S (5), CPU_PROF_DIR (unset: the
 * panel writes a .cpuprofile there when it exits), NO_WRITE (set: print the section, leave
 * docs/benchmarks.md alone).
 * Writes the section "## Webhooks: delivery rate and API latency with 10,000 pending".
 */
import { type ChildProcess, fork } from 'node:child_process';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import SQLite from 'better-sqlite3';
import { BenchPanel, stop } from './panel.ts';
import { load1, loadAverage, machine, percentile, processCpuSeconds, writeSection } from './report.ts';

const SECTION = 'Webhooks: delivery rate and API latency with 10,000 pending';
const TARGET_PER_SECOND = 1_000;
/** Fractions of a backlog at which the receiver reports the time since the switch. */
const MILESTONES = [0.1, 0.5, 0.9, 0.99, 1];

// ---------------------------------------------------------------------------------------------
// Messages between this process and the receiver (one shape each way, every field present)

type ReceiverMode = 'hold' | 'ok';

interface Command {
  type: 'mode' | 'stats';
  mode: ReceiverMode;
  /** With mode ok: report milestones of this many new unique deliveries from now (0: none). */
  expect: number;
}

interface Report {
  type: 'listening' | 'stats' | 'milestone';
  port: number;
  requests: number;
  unique: number;
  duplicates: number;
  held: number;
  /** Milestone: the fraction of `expect` reached, and ms since the switch. */
  fraction: number;
  ms: number;
}

function isCommand(m: unknown): m is Command {
  return (
    typeof m === 'object' &&
    m !== null &&
    'type' in m &&
    (m.type === 'mode' || m.type === 'stats') &&
    'mode' in m &&
    (m.mode === 'hold' || m.mode === 'ok') &&
    'expect' in m &&
    typeof m.expect === 'number'
  );
}

function isReport(m: unknown): m is Report {
  if (
    typeof m !== 'object' ||
    m === null ||
    !('type' in m) ||
    !(m.type === 'listening' || m.type === 'stats' || m.type === 'milestone')
  )
    return false;
  return (
    'port' in m &&
    typeof m.port === 'number' &&
    'requests' in m &&
    typeof m.requests === 'number' &&
    'unique' in m &&
    typeof m.unique === 'number' &&
    'duplicates' in m &&
    typeof m.duplicates === 'number' &&
    'held' in m &&
    typeof m.held === 'number' &&
    'fraction' in m &&
    typeof m.fraction === 'number' &&
    'ms' in m &&
    typeof m.ms === 'number'
  );
}

// ---------------------------------------------------------------------------------------------
// The receiver (child process)

function runReceiver(): void {
  const send = process.send?.bind(process);
  if (send === undefined) throw new Error('the receiver runs as a child of the bench (IPC)');
  let mode: ReceiverMode = 'hold';
  let requests = 0;
  let duplicates = 0;
  let port = 0;
  const answered = new Set<string>();
  const held = new Set<{ id: string; res: ServerResponse }>();
  let watch: { base: number; expect: number; startedAt: number; next: number } | undefined;

  const report = (type: Report['type'], fraction = 0, ms = 0): void => {
    const r: Report = { type, port, requests, unique: answered.size, duplicates, held: held.size, fraction, ms };
    send(r);
  };
  const checkMilestones = (): void => {
    while (watch !== undefined) {
      const fraction = MILESTONES[watch.next];
      if (fraction === undefined) {
        watch = undefined;
        return;
      }
      if (answered.size - watch.base < Math.ceil(fraction * watch.expect)) return;
      report('milestone', fraction, performance.now() - watch.startedAt);
      watch.next++;
    }
  };
  const accept = (id: string, res: ServerResponse): void => {
    if (answered.has(id)) duplicates++;
    else answered.add(id);
    res.writeHead(204).end();
    checkMilestones();
  };

  const server = createServer({ keepAliveTimeout: 120_000, headersTimeout: 120_000, requestTimeout: 0 }, (req, res) => {
    requests++;
    const header = req.headers['webhook-id'];
    const id = typeof header === 'string' ? header : '';
    req.resume();
    if (mode === 'ok') return accept(id, res);
    const entry = { id, res };
    held.add(entry);
    res.once('close', () => held.delete(entry));
  });
  process.on('message', (m: unknown) => {
    if (!isCommand(m)) return;
    if (m.type === 'stats') return report('stats');
    mode = m.mode;
    watch =
      m.mode === 'ok' && m.expect > 0
        ? { base: answered.size, expect: m.expect, startedAt: performance.now(), next: 0 }
        : undefined;
    if (m.mode === 'ok') {
      for (const entry of [...held]) {
        held.delete(entry);
        if (!entry.res.destroyed) accept(entry.id, entry.res);
      }
    }
    report('stats');
  });
  process.on('disconnect', () => process.exit(0));
  server.listen(0, '127.0.0.1', () => {
    const address: AddressInfo | string | null = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    port = address.port;
    report('listening');
  });
}

// ---------------------------------------------------------------------------------------------
// The bench (parent process)

class Receiver {
  readonly child: ChildProcess;
  readonly milestones: Report[] = [];
  #waiters: { type: Report['type']; fraction: number; resolve: (r: Report) => void }[] = [];

  constructor(file: string) {
    this.child = fork(file, ['receiver'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.child.on('message', (m: unknown) => {
      if (!isReport(m)) return;
      if (m.type === 'milestone') this.milestones.push(m);
      const waiter = this.#waiters.find(
        (w) => w.type === m.type && (m.type !== 'milestone' || w.fraction <= m.fraction),
      );
      if (waiter === undefined) return;
      this.#waiters = this.#waiters.filter((w) => w !== waiter);
      waiter.resolve(m);
    });
  }

  #next(type: Report['type'], fraction: number, timeoutMs: number): Promise<Report> {
    if (type === 'milestone') {
      const seen = this.milestones.find((m) => m.fraction >= fraction);
      if (seen !== undefined) return Promise.resolve(seen);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w.resolve !== done);
        reject(
          new Error(`the receiver sent no ${type} ${type === 'milestone' ? fraction : ''} within ${timeoutMs} ms`),
        );
      }, timeoutMs);
      const done = (r: Report): void => {
        clearTimeout(timer);
        resolve(r);
      };
      this.#waiters.push({ type, fraction, resolve: done });
    });
  }

  listening(): Promise<Report> {
    return this.#next('listening', 0, 30_000);
  }

  stats(): Promise<Report> {
    const reply = this.#next('stats', 0, 30_000);
    this.#send({ type: 'stats', mode: 'ok', expect: 0 });
    return reply;
  }

  /** Switches the mode; with `ok`, answers every held request and reports milestones of `expect` new deliveries. */
  setMode(mode: ReceiverMode, expect = 0): Promise<Report> {
    this.milestones.length = 0;
    const reply = this.#next('stats', 0, 30_000);
    this.#send({ type: 'mode', mode, expect });
    return reply;
  }

  milestone(fraction: number, timeoutMs: number): Promise<Report> {
    return this.#next('milestone', fraction, timeoutMs);
  }

  #send(command: Command): void {
    this.child.send(command);
  }
}

interface Latency {
  p50: number;
  p95: number;
  p99: number;
  max: number;
  n: number;
}

interface LoadRun {
  perSecond: number;
  p50: number;
  p90: number;
  p99: number;
  non2xx: number;
}

interface Phase {
  label: string;
  load1: string;
  sequential: Map<string, Latency>;
  loaded: Map<string, LoadRun>;
}

interface Counts {
  pending: number;
  delivered: number;
  failed: number;
  /** Pending deliveries an attempt was already made on (a hanging receiver's timeouts). */
  tried: number;
}

interface Cpu {
  panelS: number;
  receiverS: number;
  benchS: number;
}

interface Drain {
  expect: number;
  /** ms since the switch at each milestone fraction. */
  milestones: Map<number, number>;
  /** ms from the switch until the database held no pending delivery (undefined: not measured). */
  recordedMs: number | undefined;
  cpu: Cpu | undefined;
  before: Counts;
  /** Requests the receiver held unanswered at the switch. */
  held: number;
  stats: Report;
}

async function main(): Promise<void> {
  const DEVICES = Number(process.env.DEVICES ?? 2_500);
  const WEBHOOKS = Number(process.env.WEBHOOKS ?? 4);
  /** Backlogs made before the switch of the delivery-rate run: RATE_BACKLOGS × DEVICES × WEBHOOKS deliveries. */
  const RATE_BACKLOGS = Number(process.env.RATE_BACKLOGS ?? 4);
  const GROUPS = 10;
  const SEQUENTIAL = Number(process.env.SEQUENTIAL ?? 300);
  const LOAD_S = Number(process.env.LOAD_S ?? 5);
  const LOAD_CONNECTIONS = 10;
  const CREATE_CONNECTIONS = 8;
  const WARMUP = 20;
  const BACKLOG = DEVICES * WEBHOOKS;
  const ENDPOINTS = ['/api/v1/devices?limit=50', '/api/v1/events?limit=50'];
  const SELF = fileURLToPath(import.meta.url);

  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const ms = (v: number): string => (v < 10 ? v.toFixed(2) : v.toFixed(1));
  const int = (v: number): string => Math.round(v).toLocaleString('en');

  const panel = new BenchPanel('webhooks', { WEBHOOK_ALLOW_PRIVATE: '1', WEBHOOK_RETRY_SCHEDULE: undefined });
  const { dataDir } = panel;
  let receiver: Receiver | undefined;
  let db: SQLite.Database | undefined;

  const cleanUp = async (): Promise<void> => {
    db?.close();
    db = undefined;
    // The receiver first: attempts held by it then fail at once and the panel stops without waiting.
    if (receiver !== undefined) await stop(receiver.child);
    await panel.remove();
  };
  process.once('SIGINT', () => {
    cleanUp().finally(() => process.exit(130));
  });

  try {
    const auth = { authorization: `Bearer ${panel.createKey()}` };

    receiver = new Receiver(SELF);
    const { port: receiverPort } = await receiver.listening();
    const receiverPid = receiver.child.pid;

    await panel.start('webhooks-panel');
    const { base } = panel;
    db = new SQLite(join(dataDir, 'vpn-panel.db'), { readonly: true, fileMustExist: true });
    const countStatement = db.prepare<[], { pending: number; delivered: number; failed: number; tried: number }>(
      `select coalesce(sum(state = 'pending'), 0) as pending, coalesce(sum(state = 'delivered'), 0) as delivered,
              coalesce(sum(state = 'failed'), 0) as failed,
              coalesce(sum(state = 'pending' and attempts > 0), 0) as tried
       from webhook_deliveries`,
    );
    const pendingStatement = db.prepare<[], { n: number }>(
      `select count(*) as n from webhook_deliveries where state = 'pending'`,
    );
    const counts = (): Counts => countStatement.get() ?? { pending: 0, delivered: 0, failed: 0, tried: 0 };
    const pendingNow = (): number => pendingStatement.get()?.n ?? 0;

    const api = async (method: string, path: string, body?: object): Promise<unknown> => {
      const init: RequestInit = {
        method,
        headers: body === undefined ? auth : { ...auth, 'content-type': 'application/json' },
      };
      if (body !== undefined) init.body = JSON.stringify(body);
      const response = await fetch(`${base}${path}`, init);
      const json: unknown = await response.json();
      if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(json).slice(0, 300)}`);
      return json;
    };
    const idOf = (value: unknown): number => {
      if (typeof value === 'object' && value !== null && 'id' in value && typeof value.id === 'number') return value.id;
      throw new Error(`no id in ${JSON.stringify(value).slice(0, 200)}`);
    };
    const cpuSeconds = (pid: number | undefined): number => (pid === undefined ? Number.NaN : processCpuSeconds(pid));
    const cpuNow = (): Cpu => {
      const own = process.cpuUsage();
      const benchS = (own.user + own.system) / 1e6;
      return { panelS: cpuSeconds(panel.pid), receiverS: cpuSeconds(receiverPid), benchS };
    };
    const cpuSince = (start: Cpu): Cpu => {
      const now = cpuNow();
      return {
        panelS: now.panelS - start.panelS,
        receiverS: now.receiverS - start.receiverS,
        benchS: now.benchS - start.benchS,
      };
    };

    // ---- Data: one server, DEVICES devices in GROUPS groups, made before any webhook exists.
    const serverId = idOf(
      await api('POST', '/api/v1/servers', { name: 'bench', address: '10.200.0.1/16', max_devices: 65_533 }),
    );
    const createStarted = performance.now();
    let nextDevice = 0;
    await Promise.all(
      Array.from({ length: CREATE_CONNECTIONS }, async () => {
        for (let i = nextDevice++; i < DEVICES; i = nextDevice++) {
          await api('POST', '/api/v1/devices', { server_id: serverId, name: `d${i}`, external_id: `g${i % GROUPS}` });
        }
      }),
    );
    const createSeconds = (performance.now() - createStarted) / 1000;
    console.log(`${DEVICES} devices in ${createSeconds.toFixed(1)} s (load ${load1()})`);

    const webhookIds: number[] = [];
    for (let w = 1; w <= WEBHOOKS; w++) {
      webhookIds.push(
        idOf(
          await api('POST', '/api/v1/webhooks', {
            url: `http://127.0.0.1:${receiverPort}/hook/${w}`,
            events: ['device.updated'],
            description: `bench ${w}`,
          }),
        ),
      );
    }

    // ---- Latency
    const latencyOf = (samples: readonly number[]): Latency => {
      const sorted = [...samples].sort((a, b) => a - b);
      return {
        p50: percentile(sorted, 50),
        p95: percentile(sorted, 95),
        p99: percentile(sorted, 99),
        max: sorted.at(-1) ?? Number.NaN,
        n: sorted.length,
      };
    };
    const timedGet = async (path: string): Promise<number> => {
      const started = performance.now();
      const response = await fetch(`${base}${path}`, { headers: auth });
      const text = await response.text();
      const took = performance.now() - started;
      if (response.status !== 200) throw new Error(`GET ${path}: ${response.status} ${text.slice(0, 200)}`);
      return took;
    };
    const sequential = async (path: string): Promise<Latency> => {
      const samples: number[] = [];
      for (let i = 0; i < WARMUP + SEQUENTIAL; i++) {
        const took = await timedGet(path);
        if (i >= WARMUP) samples.push(took);
      }
      return latencyOf(samples);
    };
    const underLoad = async (path: string): Promise<LoadRun> => {
      const r = await autocannon({
        url: `${base}${path}`,
        connections: LOAD_CONNECTIONS,
        duration: LOAD_S,
        headers: auth,
      });
      return {
        perSecond: r.requests.average,
        p50: r.latency.p50,
        p90: r.latency.p90,
        p99: r.latency.p99,
        non2xx: r.non2xx + r.errors + r.timeouts,
      };
    };
    const measure = async (label: string): Promise<Phase> => {
      const phase: Phase = { label, load1: load1(), sequential: new Map(), loaded: new Map() };
      for (const path of ENDPOINTS) phase.sequential.set(path, await sequential(path));
      for (const path of ENDPOINTS) phase.loaded.set(path, await underLoad(path));
      console.log(label, phase.sequential, phase.loaded, `load ${phase.load1}`);
      return phase;
    };

    // ---- Backlogs
    let round = 0;
    /**
     * `times` × one PATCH per group while the receiver hangs: `times` × DEVICES device.updated events,
     * `times` × BACKLOG deliveries.
     */
    const produce = async (times: number): Promise<{ seconds: number; deliveries: number }> => {
      const before = counts().pending;
      const started = performance.now();
      for (let t = 0; t < times; t++) {
        round++;
        for (let g = 0; g < GROUPS; g++) await api('PATCH', `/api/v1/groups/g${g}`, { metadata: { round } });
      }
      const seconds = (performance.now() - started) / 1000;
      const after = counts();
      const deliveries = after.pending - before;
      if (deliveries < times * BACKLOG)
        throw new Error(`expected ${times * BACKLOG} new pending deliveries, found ${deliveries}`);
      console.log(`${deliveries} deliveries produced in ${seconds.toFixed(2)} s`, after);
      return { seconds, deliveries };
    };
    const waitRecorded = async (timeoutMs: number): Promise<boolean> => {
      const until = performance.now() + timeoutMs;
      while (performance.now() < until) {
        if (pendingNow() === 0) return true;
        await sleep(10);
      }
      return false;
    };
    /** Switches the receiver to 204 and times the backlog out; `onSwitch` starts what runs alongside. */
    const drain = async (
      expect: number,
      timeoutMs: number,
      measureCpu: boolean,
      onSwitch?: () => void,
    ): Promise<Drain> => {
      if (receiver === undefined) throw new Error('no receiver');
      const before = counts();
      const { held } = await receiver.stats();
      const cpuStart = cpuNow();
      const switchedAt = performance.now();
      // CLOCK_MONOTONIC µs, the clock of a .cpuprofile's timestamps: the window to look at in a profile.
      const monoStart = process.hrtime.bigint() / 1000n;
      await receiver.setMode('ok', expect);
      onSwitch?.();
      const last = await receiver.milestone(1, timeoutMs);
      console.log(`drain window (CLOCK_MONOTONIC µs): ${monoStart} ${process.hrtime.bigint() / 1000n}`);
      const cpu = measureCpu ? cpuSince(cpuStart) : undefined;
      const recorded = (await waitRecorded(timeoutMs)) ? performance.now() - switchedAt : undefined;
      const milestones = new Map(receiver.milestones.map((m) => [m.fraction, m.ms]));
      milestones.set(1, last.ms);
      const stats = await receiver.stats();
      console.log(`drained ${expect}`, milestones, `recorded ${recorded?.toFixed(0)} ms`, cpu, stats);
      return { expect, milestones, recordedMs: recorded, cpu, before, held, stats };
    };

    const loadAtStart = loadAverage();
    // Phase 0: nothing pending, webhooks in place.
    const idleBefore = await measure('nothing pending (before)');

    // Round 1: the delivery rate.
    const produced1 = await produce(RATE_BACKLOGS);
    await sleep(500);
    const rate = await drain(produced1.deliveries, 180_000, true);

    // Round 2: latency with the backlog pending behind a hanging receiver.
    await receiver.setMode('hold');
    const produced2 = await produce(1);
    await sleep(2_000);
    const pendingAtStart = counts();
    const pending = await measure(`${int(BACKLOG)} pending (receiver hanging)`);
    const pendingAtEnd = counts();

    // Round 2 drained while reads run one at a time, alternating between the endpoints, until 99 % is delivered.
    let reading = true;
    const drainSamples = new Map<string, number[]>(ENDPOINTS.map((p) => [p, []]));
    let reader: Promise<void> = Promise.resolve();
    const drainLoad1 = load1();
    const drained2 = await drain(pendingAtEnd.pending, 180_000, false, () => {
      receiver?.milestone(0.99, 180_000).then(
        () => (reading = false),
        () => (reading = false),
      );
      reader = (async () => {
        for (let i = 0; reading; i++) {
          const path = ENDPOINTS[i % ENDPOINTS.length] ?? '/';
          const took = await timedGet(path);
          drainSamples.get(path)?.push(took);
        }
      })();
    });
    reading = false;
    await reader;
    const during: Phase = { label: 'during the drain', load1: drainLoad1, sequential: new Map(), loaded: new Map() };
    for (const [path, samples] of drainSamples) during.sequential.set(path, latencyOf(samples));
    console.log('during the drain', during.sequential);

    // Phase 3: nothing pending, everything delivered.
    const finalCounts = counts();
    const idleAfter = await measure('nothing pending (after)');
    const finalStats = await receiver.stats();
    const loadAtEnd = loadAverage();

    // ---- The section
    const full = rate.milestones.get(1) ?? Number.NaN;
    const perSecond = rate.expect / (full / 1000);
    const t10 = rate.milestones.get(0.1) ?? Number.NaN;
    const t90 = rate.milestones.get(0.9) ?? Number.NaN;
    const steady = (0.8 * rate.expect) / ((t90 - t10) / 1000);
    const recordedPerSecond = rate.recordedMs === undefined ? Number.NaN : rate.expect / (rate.recordedMs / 1000);
    const met = perSecond >= TARGET_PER_SECOND && rate.stats.duplicates === 0;
    const cpu = rate.cpu;
    const wallS = full / 1000;
    const cpuRow = (name: string, s: number | undefined) =>
      s === undefined
        ? ''
        : `| ${name} | ${s.toFixed(2)} s | ${((s / wallS) * 100).toFixed(0)} % | ` +
          `${((s / rate.expect) * 1e6).toFixed(0)} µs |`;
    const milestoneCells = (d: Drain) => MILESTONES.map((f) => ms(d.milestones.get(f) ?? Number.NaN)).join(' | ');
    const drain2Full = drained2.milestones.get(1) ?? Number.NaN;
    const drain2Rate = drained2.expect / (drain2Full / 1000);
    const drain2Rate99 = (0.99 * drained2.expect) / ((drained2.milestones.get(0.99) ?? Number.NaN) / 1000);

    const phases = [idleBefore, pending, during, idleAfter];
    const seqCell = (p: Phase, path: string) => {
      const l = p.sequential.get(path);
      return l === undefined ? '–' : `${ms(l.p50)} / ${ms(l.p95)} / ${ms(l.p99)}`;
    };
    const loadCell = (p: Phase, path: string) => {
      const r = p.loaded.get(path);
      return r === undefined
        ? '–'
        : `${int(r.perSecond)} · ${r.p50} / ${r.p90} / ${r.p99}${r.non2xx > 0 ? ` (${r.non2xx} non-2xx)` : ''}`;
    };
    const latencyRows = ENDPOINTS.flatMap((path) => [
      `| \`GET ${path}\` | one at a time: p50 / p95 / p99 ms | ${phases.map((p) => seqCell(p, path)).join(' | ')} |`,
      `| \`GET ${path}\` | ${LOAD_CONNECTIONS} connections, ${LOAD_S} s: ` +
        `req/s · p50 / p90 / p99 ms | ${phases.map((p) => loadCell(p, path)).join(' | ')} |`,
    ]);
    const worstPendingP99 = Math.max(...ENDPOINTS.map((p) => pending.sequential.get(p)?.p99 ?? Number.NaN));
    const worstIdleP99 = Math.max(
      ...ENDPOINTS.map((p) =>
        Math.max(idleBefore.sequential.get(p)?.p99 ?? Number.NaN, idleAfter.sequential.get(p)?.p99 ?? Number.NaN),
      ),
    );
    const samplesDuring = [...during.sequential.values()].reduce((n, l) => n + l.n, 0);

    const body = [
      `Command: \`node bench/webhooks.ts\` (defaults: \`DEVICES=${DEVICES} WEBHOOKS=${WEBHOOKS} ` +
        `RATE_BACKLOGS=${RATE_BACKLOGS} SEQUENTIAL=${SEQUENTIAL} LOAD_S=${LOAD_S}\`). Machine: ${machine()}. ` +
        `Load average (1/5/15 min) at the start: ${loadAtStart}; at the end: ${loadAtEnd}; ` +
        `1-min at each phase: ${phases.map((p) => `${p.label}: ${p.load1}`).join(', ')}.`,
      '',
      '`vpn-panel serve` as its own process (SQLite in a temp `DATA_DIR`, ' +
        '`NODE_DRIVER=dry-run`, `WEBHOOK_ALLOW_PRIVATE=1`, `LOG_LEVEL=warn`, ' +
        'the production retry schedule, sender concurrency 64 with at most 16 per webhook, poll 500 ms), ' +
        'a key made with `--no-rate-limit`. The receiver is a second Node process on 127.0.0.1 (`node:http`, ' +
        'keep-alive): it answers 204 at once, or holds every request unanswered while told to ("hanging"), ' +
        'and counts requests and distinct `webhook-id`s. The bench process (requests, ' +
        'autocannon) shares the same 2 cores.',
      '',
      `Setup: one server, ${int(DEVICES)} devices in ${GROUPS} groups (\`external_id\` g0…g${GROUPS - 1}, ` +
        `made through the API in ${createSeconds.toFixed(1)} s before any webhook existed), ` +
        `${WEBHOOKS} webhooks (\`/hook/1…${WEBHOOKS}\` of the receiver) subscribed to \`device.updated\`. ` +
        'A backlog is one `PATCH /api/v1/groups/{external_id}` `{"metadata":{"round":N}}` per group while the ' +
        `receiver hangs: ${int(DEVICES)} \`device.updated\` events, ` +
        `each fanned out in its transaction to ${WEBHOOKS} outbox rows, ` +
        `**${int(BACKLOG)} pending deliveries** in ${produced2.seconds.toFixed(1)} s. ` +
        `The delivery-rate run makes ${RATE_BACKLOGS} such backlogs in a row before the switch ` +
        `(${int(produced1.deliveries)} deliveries in ${produced1.seconds.toFixed(1)} s), ` +
        'so that the drain lasts long enough to time. Group PATCHes rather than device creates so that the producer ' +
        `is quick and done well inside the sender's 15 s attempt timeout: ` +
        `the sender's 64 slots hang on the receiver and the rest of the backlog stays untried and due. ` +
        '(A receiver answering 503 would not do: the sender tries every delivery at once, again after 5 s, ' +
        'then parks it for 5 min, so nothing would be due when the receiver came back.)',
      '',
      `**Delivery rate.** The receiver switches from hanging to 204 (the ${rate.held} requests it held are ` +
        `answered first); times since the switch until it has received the given share of the ${int(rate.expect)} ` +
        'deliveries:',
      '',
      '| 10 % | 50 % | 90 % | 99 % | 100 % | all recorded `delivered` in the database |',
      '|---|---|---|---|---|---|',
      `| ${milestoneCells(rate)} ms | ` +
        `${rate.recordedMs === undefined ? 'not within 180 s' : `${ms(rate.recordedMs)} ms`} |`,
      '',
      `**${int(perSecond)} deliveries/s** from the switch to the last delivery received (${int(steady)}/s between ` +
        `10 % and 90 %; ${int(recordedPerSecond)}/s until the database shows none pending). ` +
        `Requests received ${int(rate.stats.requests)} in all, distinct webhook-ids ${int(rate.stats.unique)}, ` +
        `**duplicates ${rate.stats.duplicates}**; no delivery failed (${rate.before.tried} of the backlog had been ` +
        'tried before the switch).',
      '',
      `CPU during the drain (switch to last delivery, ${wallS.toFixed(2)} s wall; /proc/<pid>/stat utime+stime):`,
      '',
      '| process | CPU | share of one core | per delivery |',
      '|---|---|---|---|',
      cpuRow('panel (`vpn-panel serve`)', cpu?.panelS),
      cpuRow('receiver', cpu?.receiverS),
      cpuRow('bench (waiting, then polling SQLite)', cpu?.benchS),
      '',
      `Target: 1,000 deliveries/s to a fast receiver: **${met ? 'met' : 'NOT met'}** (${int(perSecond)}/s, ` +
        `${rate.stats.duplicates} duplicates).`,
      '',
      '**API read latency.** `GET /api/v1/devices?limit=50` (50 devices with their configs) ' +
        `and \`GET /api/v1/events?limit=50\`, each ${SEQUENTIAL} requests one at a time after ${WARMUP} warm-up ` +
        `(time to the whole body, ms), then autocannon ${LOAD_CONNECTIONS} connections for ${LOAD_S} s ` +
        '(whole ms as autocannon records them). ' +
        `Columns: nothing pending before the first delivery (${int(DEVICES)} events, no delivery yet); ` +
        `**${int(pendingAtStart.pending)} pending** behind the hanging receiver ` +
        `(${int(pendingAtEnd.pending)} at the end of the measurement; the sender holds 64 attempts open and makes ` +
        'no other, each held attempt times out after 15 s and its slot takes the next delivery, ' +
        `so ${pendingAtEnd.tried} of them had been tried by then); while that backlog drains (one request at a time ` +
        `alternating between the two, ${int(samplesDuring)} requests from the switch to 99 % delivered; ` +
        `the drain took ${ms(drain2Full)} ms, ${int(drain2Rate)}/s, ${int(drain2Rate99)}/s to 99 %); ` +
        `nothing pending after all ${int(finalCounts.delivered)} deliveries were delivered.`,
      '',
      `| request | measure | nothing pending (before) | ${int(BACKLOG)} pending, ` +
        'receiver hanging | during the drain | nothing pending (after) |',
      '|---|---|---|---|---|---|',
      latencyRows.join('\n'),
      '',
      `Worst sequential p99: ${ms(worstPendingP99)} ms with ${int(BACKLOG)} pending ` +
        `against ${ms(worstIdleP99)} ms with nothing pending. At the end: ${int(finalCounts.delivered)} delivered, ` +
        `${finalCounts.failed} failed, ${finalCounts.pending} pending; the receiver saw ${int(finalStats.requests)} ` +
        `requests, ${int(finalStats.unique)} distinct webhook-ids, ${finalStats.duplicates} duplicates.`,
    ].join('\n');
    console.log(body);
    if (process.env.NO_WRITE === undefined) writeSection(SECTION, body);
  } finally {
    await cleanUp();
  }
}

if (process.argv[2] === 'receiver') runReceiver();
else await main();
