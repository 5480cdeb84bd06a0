/**
 * Devices at scale, through the API of a real `vpn-panel serve` (SQLite, dry-run driver, a key made
 * with `--no-rate-limit`; the load generator is this process):
 * - device creations per second, `POST /api/v1/devices` with CONCURRENCY connections, from an empty
 *   panel and again at 100,000 devices;
 * - `GET /api/v1/devices?limit=200&after=…` at 100,000 devices: pages at the start, middle and end of
 *   the id range, unfiltered, with `server_id=` and with `status=active`, one request at a time and
 *   under load (autocannon, 10 connections).
 * The panel is filled through the API for FILL_API_S seconds at most; the remainder is written
 * straight into the SQLite file (panel stopped) with the rows the API would have made.
 * Targets (issue): 500 creates/s on the local node with the dry-run driver; a page of 200 devices
 * under 20 ms at 100,000 devices.
 *
 * Run: node bench/devices.ts
 * Environment: DEVICES (100000), CREATES (5000), CONCURRENCY (16), FILL_API_S (300),
 * PAGE_REQUESTS (300), LOAD_S (10), FULL_CREATES (500), CPU_PROF_DIR (unset: a .cpuprofile of
 * each panel process goes there: creates.cpuprofile, pages.cpuprofile, creates-full.cpuprofile),
 * NO_WRITE (set: print the section, leave docs/benchmarks.md alone).
 * Writes the section "## Devices: creates and pages at 100,000 devices" of docs/benchmarks.md.
 */
import { join } from 'node:path';
import autocannon from 'autocannon';
import SQLite from 'better-sqlite3';
import { intToIp, ipToInt, parseCidr, parseSubnet, size } from '../src/domain/subnets.ts';
import { generateKeyPair } from '../src/domain/wireguard-keys.ts';
import { BenchPanel } from './panel.ts';
import { load1, loadAverage, machine, percentile, writeSection } from './report.ts';

const DEVICES = Number(process.env.DEVICES ?? 100_000);
const CREATES = Number(process.env.CREATES ?? 5_000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 16);
const FILL_API_S = Number(process.env.FILL_API_S ?? 300);
const PAGE_REQUESTS = Number(process.env.PAGE_REQUESTS ?? 300);
const LOAD_S = Number(process.env.LOAD_S ?? 10);
const LOAD_CONNECTIONS = 10;
const FULL_CREATES = Number(process.env.FULL_CREATES ?? 500);
const WARMUP_CREATES = 200;
const FILL_BATCH = 2_500;
const PAGE = 200;
const CREATES_TARGET = 500;
const PAGE_TARGET_MS = 20;
const SECTION = 'Devices: creates and pages at 100,000 devices';
/** Two servers of a /16 each: 65,533 devices apiece. */
const SERVER_ADDRESSES = ['10.200.0.1/16', '10.201.0.1/16'];

const panel = new BenchPanel('devices');
const { dataDir } = panel;
/** The authorization header of a key with every scope, exempt from the rate limit. */
type Auth = Record<string, string>;

// ---------------------------------------------------------------------------------------------
// Creates

interface CreateRun {
  before: number;
  count: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  non201: number;
}

/** `count` creates with CONCURRENCY connections, alternating between the servers. */
async function creates(auth: Auth, serverIds: readonly number[], count: number, before: number): Promise<CreateRun> {
  const started = performance.now();
  const r = await autocannon({
    url: `${panel.base}/api/v1/devices`,
    connections: Math.min(CONCURRENCY, count),
    amount: count,
    timeout: 60,
    requests: serverIds.map((id) => ({
      method: 'POST',
      path: '/api/v1/devices',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ server_id: id }),
    })),
  });
  const seconds = (performance.now() - started) / 1000;
  let non201 = r.errors + r.timeouts;
  for (const [code, stat] of Object.entries(r.statusCodeStats ?? {})) if (code !== '201') non201 += stat.count ?? 0;
  return {
    before,
    count: r.requests.total,
    perSecond: r.requests.total / seconds,
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    non201,
  };
}

async function json(response: Response): Promise<unknown> {
  const body: unknown = await response.json();
  if (!response.ok) throw new Error(`${response.url}: ${response.status} ${JSON.stringify(body)}`);
  return body;
}

function idOf(value: unknown): number {
  if (typeof value === 'object' && value !== null && 'id' in value && typeof value.id === 'number') return value.id;
  throw new Error(`no id in ${JSON.stringify(value)}`);
}

// ---------------------------------------------------------------------------------------------
// Seeding the remainder straight into SQLite (the panel stopped)

interface SeedReport {
  viaApi: number;
  seeded: number;
  seconds: number;
  disabled: number;
  expired: number;
}

/**
 * Adds devices up to `total` with the rows `POST /devices` makes: a key pair made as the panel makes
 * it, the lowest free address of the server's subnet, name `device-<id>`, alternating servers. One in
 * twenty seeded rows is disabled and one in twenty expired, so `status=active` has rows to skip.
 */
function seed(total: number): SeedReport {
  const started = performance.now();
  const db = new SQLite(join(dataDir, 'vpn-panel.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('foreign_keys = ON');
  try {
    const servers = db
      .prepare<[], { id: number; address: string; subnet: string }>(
        'select id, address, subnet from servers order by id',
      )
      .all();
    const viaApi = db.prepare<[], { n: number }>('select count(*) as n from devices').get()?.n ?? 0;
    const maxId = db.prepare<[], { m: number | null }>('select max(id) as m from devices').get()?.m ?? 0;
    const slots = servers.map((s) => {
      const subnet = parseSubnet(s.subnet);
      const used = new Set(
        db
          .prepare<[number], { address: string }>('select address from devices where server_id = ?')
          .all(s.id)
          .map((d) => ipToInt(d.address)),
      );
      used.add(parseCidr(s.address).address);
      return { id: s.id, next: subnet.network + 1, last: subnet.network + size(subnet) - 2, used };
    });
    const insert = db.prepare(
      `insert into devices (id, server_id, name, external_id, metadata, address, public_key, private_key, enabled, data_limit, limit_period,
        usage_reset_at, expires_at, speed_limit, last_handshake, created_at, updated_at)
       values (?, ?, ?, null, null, ?, ?, ?, ?, 0, 'monthly', ?, ?, 0, null, ?, ?)`,
    );
    const now = new Date().toISOString();
    const past = new Date(Date.now() - 86_400_000).toISOString();
    let disabled = 0;
    let expired = 0;
    const remainder = total - viaApi;
    db.transaction(() => {
      for (let i = 0; i < remainder; i++) {
        const slot = slots[i % slots.length];
        if (slot === undefined) throw new Error('no server');
        while (slot.used.has(slot.next)) slot.next++;
        if (slot.next > slot.last) throw new Error(`server ${slot.id} is full`);
        const address = slot.next++;
        const id = maxId + 1 + i;
        const keys = generateKeyPair();
        const isDisabled = i % 20 === 0;
        const isExpired = i % 20 === 10;
        if (isDisabled) disabled++;
        if (isExpired) expired++;
        insert.run(
          id,
          slot.id,
          `device-${id}`,
          intToIp(address),
          keys.publicKey,
          keys.privateKey,
          isDisabled ? 0 : 1,
          now,
          isExpired ? past : null,
          now,
          now,
        );
      }
    })();
    db.pragma('wal_checkpoint(TRUNCATE)');
    return { viaApi, seeded: Math.max(0, remainder), seconds: (performance.now() - started) / 1000, disabled, expired };
  } finally {
    db.close();
  }
}

interface Cursors {
  label: string;
  query: string;
  /** `after` for the first page, one in the middle of the matching rows, and the last full page. */
  after: [start: number, middle: number, end: number];
  matching: number;
}

function cursorsOf(label: string, query: string, ids: readonly number[]): Cursors {
  const middle = ids[Math.floor(ids.length / 2) - 1];
  const end = ids[ids.length - PAGE - 1];
  if (middle === undefined || end === undefined) throw new Error(`too few rows for ${label}`);
  return { label, query, after: [0, middle, end], matching: ids.length };
}

function readCursors(serverId: number): Cursors[] {
  const db = new SQLite(join(dataDir, 'vpn-panel.db'), { readonly: true });
  try {
    const ids = (sql: string, ...args: (string | number)[]) =>
      db
        .prepare<(string | number)[], { id: number }>(sql)
        .all(...args)
        .map((r) => r.id);
    const now = new Date().toISOString();
    return [
      cursorsOf('no filter', '', ids('select id from devices order by id')),
      cursorsOf(
        `server_id=${serverId}`,
        `&server_id=${serverId}`,
        ids('select id from devices where server_id = ? order by id', serverId),
      ),
      cursorsOf(
        'status=active',
        '&status=active',
        ids('select id from devices where enabled = 1 and (expires_at is null or expires_at > ?) order by id', now),
      ),
    ];
  } finally {
    db.close();
  }
}

function deviceCount(): number {
  const db = new SQLite(join(dataDir, 'vpn-panel.db'), { readonly: true });
  try {
    return db.prepare<[], { n: number }>('select count(*) as n from devices').get()?.n ?? 0;
  } finally {
    db.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Pages

interface Latency {
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

function latencyOf(samples: number[]): Latency {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    p50: percentile(sorted, 50),
    p95: percentile(sorted, 95),
    p99: percentile(sorted, 99),
    max: sorted.at(-1) ?? Number.NaN,
  };
}

/** Checks a page: `PAGE` devices with ascending ids above the cursor (and matching the filter). */
function checkPage(text: string, after: number, serverId: number | undefined): void {
  const body: unknown = JSON.parse(text);
  if (typeof body !== 'object' || body === null || !('data' in body) || !Array.isArray(body.data))
    throw new Error(`not a page: ${text.slice(0, 200)}`);
  const data: unknown[] = body.data;
  if (data.length !== PAGE) throw new Error(`a page after ${after} has ${data.length} devices, not ${PAGE}`);
  let previous = after;
  for (const device of data) {
    const id = idOf(device);
    if (id <= previous) throw new Error(`ids out of order after ${after}`);
    previous = id;
    if (
      serverId !== undefined &&
      (typeof device !== 'object' || device === null || !('server_id' in device) || device.server_id !== serverId)
    )
      throw new Error('a device of another server');
  }
}

/** One request at a time; the time to the whole body. */
async function sequential(
  auth: Auth,
  cursors: Cursors,
  position: number,
  serverId: number | undefined,
): Promise<Latency> {
  const after = cursors.after[position] ?? 0;
  const url = `${panel.base}/api/v1/devices?limit=${PAGE}&after=${after}${cursors.query}`;
  const samples: number[] = [];
  for (let i = 0; i < PAGE_REQUESTS + 20; i++) {
    const started = performance.now();
    const response = await fetch(url, { headers: auth });
    const text = await response.text();
    const took = performance.now() - started;
    if (response.status !== 200) throw new Error(`${url}: ${response.status} ${text.slice(0, 200)}`);
    if (i < 20) {
      checkPage(text, after, serverId); // the first 20 are warm-up and checked; all are 200s
      continue;
    }
    samples.push(took);
  }
  return latencyOf(samples);
}

interface LoadRun {
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
}

/** LOAD_CONNECTIONS connections for LOAD_S seconds, each cycling over the start, middle and end pages. */
async function underLoad(auth: Auth, cursors: Cursors): Promise<LoadRun> {
  const r = await autocannon({
    url: `${panel.base}/api/v1/devices`,
    connections: LOAD_CONNECTIONS,
    duration: LOAD_S,
    headers: auth,
    requests: cursors.after.map((after) => ({
      method: 'GET',
      path: `/api/v1/devices?limit=${PAGE}&after=${after}${cursors.query}`,
    })),
  });
  return {
    perSecond: r.requests.average,
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    non2xx: r.non2xx + r.errors + r.timeouts,
  };
}

// ---------------------------------------------------------------------------------------------
// The run

const ms = (v: number) => (v < 10 ? v.toFixed(2) : v.toFixed(1));
const loadAtStart = loadAverage();
const phaseLoad: string[] = [];
try {
  const auth = { authorization: `Bearer ${panel.createKey()}` };
  await panel.start('creates');
  // Servers with room for 65,533 devices each.
  const serverIds: number[] = [];
  for (const [i, address] of SERVER_ADDRESSES.entries()) {
    const body = JSON.stringify({ name: `bench-${i + 1}`, address });
    serverIds.push(
      idOf(
        await json(
          await fetch(`${panel.base}/api/v1/servers`, {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json' },
            body,
          }),
        ),
      ),
    );
  }
  const [firstServer] = serverIds;
  if (firstServer === undefined) throw new Error('no server');

  // Creates from an empty panel, then more through the API while the time budget lasts.
  console.log(`creates: ${WARMUP_CREATES} warm-up, then ${CREATES} measured (load ${load1()})`);
  phaseLoad.push(`creates from empty: ${load1()}`);
  const warm = await creates(auth, serverIds, WARMUP_CREATES, 0);
  if (warm.non201 > 0) throw new Error(`${warm.non201} warm-up creates failed`);
  const fillStarted = performance.now();
  const firstFill = Math.min(CREATES, DEVICES - WARMUP_CREATES);
  const fill: CreateRun[] = [await creates(auth, serverIds, firstFill, WARMUP_CREATES)];
  let made = WARMUP_CREATES + (fill[0]?.count ?? 0);
  console.log(fill[0]);
  for (;;) {
    const last = fill.at(-1);
    const remaining = DEVICES - made;
    if (last === undefined || remaining <= 0) break;
    const batch = Math.min(FILL_BATCH, remaining);
    const elapsed = (performance.now() - fillStarted) / 1000;
    if (elapsed + batch / last.perSecond > FILL_API_S) break;
    const run = await creates(auth, serverIds, batch, made);
    fill.push(run);
    made += run.count;
    console.log(run, `load ${load1()}`);
  }
  const fillSeconds = (performance.now() - fillStarted) / 1000;
  const apiFailures = warm.non201 + fill.reduce((n, r) => n + r.non201, 0);
  await panel.stop();

  const seeded = seed(DEVICES);
  console.log('seeded', seeded);
  const total = deviceCount();
  if (total !== DEVICES) throw new Error(`${total} devices, expected ${DEVICES} (${apiFailures} API creates failed)`);
  const cursors = readCursors(firstServer);

  // Pages at 100,000 devices (a new panel process: its startup resync loads every peer).
  const restartStarted = performance.now();
  await panel.start('pages');
  const restartSeconds = (performance.now() - restartStarted) / 1000;
  phaseLoad.push(`pages: ${load1()}`);
  console.log(`pages (load ${load1()})`);
  const positions = ['start', 'middle', 'end'];
  const pageRows: string[] = [];
  const worst: { p99: number; where: string } = { p99: 0, where: '' };
  const loads: { cursors: Cursors; run: LoadRun }[] = [];
  for (const c of cursors) {
    for (const [position, name] of positions.entries()) {
      const l = await sequential(auth, c, position, c.query.startsWith('&server_id') ? firstServer : undefined);
      if (l.p99 > worst.p99) Object.assign(worst, { p99: l.p99, where: `${c.label}, ${name}` });
      pageRows.push(
        `| ${c.label} | ${name} (after=${c.after[position]}) | ${ms(l.p50)} | ${ms(l.p95)} | ${ms(l.p99)} | ${ms(l.max)} |`,
      );
      console.log(pageRows.at(-1));
    }
  }
  for (const c of cursors) {
    const run = await underLoad(auth, c);
    loads.push({ cursors: c, run });
    console.log(c.label, run);
  }
  await panel.stop();

  // Creates at 100,000 devices, in a third process.
  await panel.start('creates-full');
  phaseLoad.push(`creates at ${DEVICES.toLocaleString('en')}: ${load1()}`);
  console.log(`creates at ${DEVICES} (load ${load1()})`);
  const warmFull = await creates(auth, serverIds, 100, DEVICES);
  if (warmFull.non201 > 0) throw new Error(`${warmFull.non201} warm-up creates at ${DEVICES} failed`);
  const full = await creates(auth, serverIds, FULL_CREATES, DEVICES + warmFull.count);
  console.log(full);
  await panel.stop();
  const loadAtEnd = loadAverage();

  // The section.
  const first = fill[0];
  if (first === undefined) throw new Error('no create run');
  const viaApi = seeded.viaApi;
  const createRow = (label: string, r: CreateRun) =>
    `| ${label} | ${r.before.toLocaleString('en')} | ${r.count} | **${Math.round(r.perSecond)}** | ${r.p50Ms} | ${r.p99Ms} | ${r.non201} |`;
  const fillRows = fill.slice(1).map((r) => createRow('filling', r));
  const createsMet = first.perSecond >= CREATES_TARGET && first.non201 === 0;
  const fullMet = full.perSecond >= CREATES_TARGET && full.non201 === 0;
  const pagesMet = worst.p99 < PAGE_TARGET_MS;
  const pctActive = ((cursors[2]?.matching ?? 0) / DEVICES) * 100;
  const body = `Command: \`node bench/devices.ts\` (settings: \`DEVICES=${DEVICES} CREATES=${CREATES} CONCURRENCY=${CONCURRENCY} FILL_API_S=${FILL_API_S} PAGE_REQUESTS=${PAGE_REQUESTS} LOAD_S=${LOAD_S}\`). Machine: ${machine()}. Load average (1/5/15 min) at the start: ${loadAtStart}; at the end: ${loadAtEnd}; 1-min at each phase: ${phaseLoad.join(', ')}.

\`vpn-panel serve\` as its own process (SQLite in a temp \`DATA_DIR\`, \`NODE_DRIVER=dry-run\`, \`LOG_LEVEL=warn\`, a key made with \`--no-rate-limit\`), autocannon in the bench process on the same 2 cores. Two servers made through the API with \`address\` 10.200.0.1/16 and 10.201.0.1/16 (65,533 devices each); creates alternate between them (\`{"server_id": N}\`: the panel makes the key pair, picks the lowest free address, names the device, records the event, and puts the peer on the node before answering).

**Creates** (\`POST /api/v1/devices\`, ${CONCURRENCY} connections, after ${WARMUP_CREATES} warm-up creates; latency in whole ms as autocannon records it):

| run | devices before | creates | creates/s | p50 ms | p99 ms | non-201 |
|---|---|---|---|---|---|---|
${createRow('from empty', first)}
${fillRows.join('\n')}${fillRows.length > 0 ? '\n' : ''}${createRow(`at ${DEVICES.toLocaleString('en')} (new process)`, full)}

**Fill:** ${viaApi.toLocaleString('en')} devices were made through the API in ${fillSeconds.toFixed(0)} s (budget ${FILL_API_S} s, non-201: ${apiFailures}); the other ${seeded.seeded.toLocaleString('en')} were written straight into the SQLite file with the panel stopped (${seeded.seconds.toFixed(1)} s): key pairs made as the panel makes them, the lowest free addresses of each server's subnet, names \`device-<id>\`, alternating servers, so the unique (server, name/address/public_key) indexes hold. Of the seeded rows ${seeded.disabled.toLocaleString('en')} are disabled and ${seeded.expired.toLocaleString('en')} expired (${pctActive.toFixed(1)} % of all devices are active); seeded rows have no \`device.created\` event. The panel was then restarted (${restartSeconds.toFixed(1)} s to answer /healthz, its startup resync loading all peers into the dry-run node); pages and the creates at ${DEVICES.toLocaleString('en')} ran in fresh processes.

**Pages at ${DEVICES.toLocaleString('en')} devices**, \`GET /api/v1/devices?limit=${PAGE}&after=<cursor>[&filter]\`, one request at a time, ${PAGE_REQUESTS} requests per row after 20 checked warm-up requests (time to the whole body; each answer carries ${PAGE} devices with their configs):

| filter | page | p50 ms | p95 ms | p99 ms | max ms |
|---|---|---|---|---|---|
${pageRows.join('\n')}

Under load (autocannon, ${LOAD_CONNECTIONS} connections, ${LOAD_S} s, each connection cycling over the start, middle and end pages):

| filter | pages/s | p50 ms | p99 ms | non-2xx |
|---|---|---|---|---|
${loads.map(({ cursors: c, run }) => `| ${c.label} | ${Math.round(run.perSecond)} | ${run.p50Ms} | ${run.p99Ms} | ${run.non2xx} |`).join('\n')}

Targets:
- 500 creates/s on the local node with the dry-run driver: from an empty panel **${Math.round(first.perSecond)}/s — ${createsMet ? 'met' : 'NOT met'}**; at ${DEVICES.toLocaleString('en')} devices **${Math.round(full.perSecond)}/s — ${fullMet ? 'met' : 'NOT met'}**.
- A page of 200 devices under 20 ms at ${DEVICES.toLocaleString('en')} devices (one request at a time, p99 of every row above): worst p99 **${ms(worst.p99)} ms** (${worst.where}) — **${pagesMet ? 'met' : 'NOT met'}**.`;
  if (process.env.NO_WRITE === undefined) writeSection(SECTION, body);
  console.log(body);
} finally {
  await panel.remove();
}
