/**
 * Every list route of the API, authenticated, against a bare Fastify route returning the same JSON,
 * measured side by side in one run (each server its own process, the load generator a third).
 * Targets (issue 16): the cheapest authenticated GET serves at least 0.70 of the requests/s of the bare
 * one, every list route at least 0.50 (median of rounds).
 * Run: npm run bench:http   (DURATION_S, SLICE_S, ROUNDS and CONNECTIONS may be set in the environment;
 * ONLY=<text> measures only the paths that contain it, and then writes no figures)
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { freePort } from '../test/support/panel.ts';
import { answers, BenchPanel, stop } from './panel.ts';
import { loadAverage, machine, writeSection } from './report.ts';

/** Seconds of load on each server a round, after WARMUP_S of warm-up on each. */
const DURATION_S = Number(process.env.DURATION_S ?? 10);
const WARMUP_S = 2;
/**
 * The load alternates between the two servers in slices this long, so that load from elsewhere on
 * this shared machine falls on both alike; with a whole round on each in turn, a burst of a few
 * seconds decided which of the two it slowed down.
 */
const SLICE_S = Number(process.env.SLICE_S ?? 1);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
/** Each route is measured this many times; the median ratio is reported. */
const ROUNDS = Number(process.env.ROUNDS ?? 3);

interface Result {
  requestsPerSecond: number;
  /** CPU time of the server's process (all its threads) per request answered. */
  cpuUsPerRequest: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
}

interface Target {
  url: string;
  headers: Record<string, string>;
  pid: number;
}

/**
 * CPU time the process has run so far, in ns, summed over its threads (/proc/PID/task/TID/schedstat, whose
 * first field is exact, where /proc/PID/stat counts 10 ms ticks). Node's threads live as long as it does.
 */
function cpuNs(pid: number): number {
  let total = 0;
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    total += Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]);
  }
  return total;
}

/** A slice of load on `target`: autocannon's figures and the CPU time the server spent meanwhile. */
interface Slice {
  result: autocannon.Result;
  cpuNs: number;
}

async function load(target: Target, seconds: number): Promise<Slice> {
  const before = cpuNs(target.pid);
  const result = await autocannon({
    url: target.url,
    headers: target.headers,
    connections: CONNECTIONS,
    duration: seconds,
  });
  return { result, cpuNs: cpuNs(target.pid) - before };
}

/**
 * The slices of one server in a round: requests/s over all of them, CPU per request, the median p50 and
 * the worst p99. Requests/s falls for both servers when other work shares the machine; CPU time per request
 * much less, so its ratio says what the panel costs even when the machine is busy.
 */
function summary(slices: Slice[]): Result {
  const sum = (f: (r: autocannon.Result) => number) => slices.reduce((total, s) => total + f(s.result), 0);
  const p50s = slices.map((s) => s.result.latency.p50).sort((a, b) => a - b);
  const requests = sum((r) => r.requests.total);
  return {
    requestsPerSecond: requests / sum((r) => r.duration),
    cpuUsPerRequest: slices.reduce((total, s) => total + s.cpuNs, 0) / 1000 / requests,
    p50Ms: p50s[Math.floor(p50s.length / 2)] ?? 0,
    p99Ms: Math.max(...slices.map((s) => s.result.latency.p99)),
    non2xx: sum((r) => r.non2xx),
  };
}

/** One round: warm-up on each server, then SLICE_S slices alternating between them until each had DURATION_S. */
async function round(bare: Target, api: Target): Promise<{ bare: Result; api: Result }> {
  await load(bare, WARMUP_S);
  await load(api, WARMUP_S);
  const bareSlices: Slice[] = [];
  const apiSlices: Slice[] = [];
  for (let i = 0; i < Math.ceil(DURATION_S / SLICE_S); i++) {
    bareSlices.push(await load(bare, SLICE_S));
    apiSlices.push(await load(api, SLICE_S));
  }
  return { bare: summary(bareSlices), api: summary(apiSlices) };
}

/** Devices made on the bench's server, of which GROUP_SIZE in one group; a webhook is told of each. */
const DEVICES = 50;
const GROUP_SIZE = 20;
const GROUP = 'bench-group';

/** A list route: its path, and whether it is one of the cheap ones the 0.70 target is about. */
interface Route {
  path: string;
  cheap: boolean;
}

/**
 * Fills the panel with what every list has something of: a server, DEVICES devices (GROUP_SIZE of them
 * in GROUP), their events, and a webhook with one delivery per device, delivered to `hookUrl`. Returns
 * the routes to measure.
 */
async function seed(base: string, key: string, hookUrl: string): Promise<Route[]> {
  const call = async (method: string, path: string, body: unknown) => {
    const response = await fetch(`${base}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
    return (await response.json()) as { id: number };
  };
  const webhook = await call('POST', '/webhooks', { url: hookUrl, events: ['device.created'] });
  const server = await call('POST', '/servers', { name: 'bench' });
  for (let i = 0; i < DEVICES; i++) {
    const externalId = i < GROUP_SIZE ? GROUP : `bench-${i}`;
    await call('POST', '/devices', { server_id: server.id, external_id: externalId });
  }
  return [
    { path: '/api/v1/servers', cheap: true },
    { path: '/api/v1/nodes', cheap: true },
    { path: '/api/v1/events?limit=1', cheap: true },
    { path: '/api/v1/webhooks', cheap: true },
    { path: '/api/v1/events', cheap: false },
    { path: `/api/v1/devices?server_id=${server.id}`, cheap: false },
    { path: `/api/v1/groups/${GROUP}`, cheap: false },
    { path: `/api/v1/webhooks/${webhook.id}/deliveries`, cheap: false },
  ];
}

/** Waits until the webhook's deliveries are all delivered, so the list no longer changes under the load. */
async function delivered(url: string, headers: Record<string, string>): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const page = (await fetch(url, { headers }).then((r) => r.json())) as { data: { state: string }[] };
    if (page.data.length === DEVICES && page.data.every((d) => d.state === 'delivered')) return;
    if (Date.now() > deadline) throw new Error('the webhook deliveries were not all delivered within 60 s');
    await new Promise((r) => setTimeout(r, 100));
  }
}

const only = process.env.ONLY;
const hooks = createServer((request, response) => {
  request.resume();
  request.on('end', () => response.writeHead(204).end());
});
const panel = new BenchPanel('http', { WEBHOOK_ALLOW_PRIVATE: 'true' });
let bare: ChildProcess | undefined;
try {
  const hookPort = await freePort();
  await new Promise<void>((resolve) => hooks.listen(hookPort, '127.0.0.1', resolve));
  const admin = panel.createKey('all', 'bench-seed');
  const key = panel.createKey('servers:read,devices:read,events:read,webhooks:write');
  await panel.start();
  const panelUrl = panel.base;
  const auth = { authorization: `Bearer ${key}` };
  const routes = (await seed(panelUrl, admin, `http://127.0.0.1:${hookPort}/hook`)).filter(
    (route) => only === undefined || route.path.includes(only),
  );
  const deliveries = routes.find((route) => route.path.endsWith('/deliveries'));
  if (deliveries) await delivered(`${panelUrl}${deliveries.path}`, auth);
  const bodies: Record<string, string> = {};
  for (const { path } of routes)
    bodies[path] = await fetch(`${panelUrl}${path}`, { headers: auth }).then((r) => r.text());
  const barePort = await freePort();
  const bareServer = fileURLToPath(new URL('./bare-server.ts', import.meta.url));
  const bareEnv = { ...panel.env, PORT: String(barePort), BODIES: JSON.stringify(bodies) };
  bare = spawn(process.execPath, [bareServer], { env: bareEnv, stdio: 'inherit' });
  const bareUrl = `http://127.0.0.1:${barePort}`;
  await answers(`${bareUrl}${routes[0]?.path ?? '/'}`, bare);
  const panelPid = panel.pid;
  const barePid = bare.pid;
  if (panelPid === undefined || barePid === undefined) throw new Error('a server has no pid');
  const bareTarget = (path: string): Target => ({ url: `${bareUrl}${path}`, headers: {}, pid: barePid });
  const panelTarget = (path: string): Target => ({ url: `${panelUrl}${path}`, headers: auth, pid: panelPid });
  const loadAtStart = loadAverage();
  const rows: string[] = [];
  let cheapest = 0;
  let worstList = Number.POSITIVE_INFINITY;
  for (const { path, cheap } of routes) {
    const same = await fetch(`${bareUrl}${path}`).then((r) => r.text());
    if (same !== bodies[path]) throw new Error(`the two routes answer differently for ${path}`);
    const ratios: number[] = [];
    const cpuRatios: number[] = [];
    const pairs: { bare: Result; api: Result }[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const pair = await round(bareTarget(path), panelTarget(path));
      if (pair.api.non2xx > 0)
        throw new Error(`GET ${path} answered ${pair.api.non2xx} non-2xx: the figures would not be of the route`);
      ratios.push(pair.api.requestsPerSecond / pair.bare.requestsPerSecond);
      cpuRatios.push(pair.bare.cpuUsPerRequest / pair.api.cpuUsPerRequest);
      pairs.push(pair);
    }
    const order = ratios.map((r, i) => [r, i] as const).sort((a, b) => a[0] - b[0]);
    const [medianRatio, medianIndex] = order[Math.floor(order.length / 2)] ?? [0, 0];
    const median = pairs[medianIndex];
    if (!median) throw new Error('no rounds');
    if (cheap) cheapest = Math.max(cheapest, medianRatio);
    worstList = Math.min(worstList, medianRatio);
    const cpuMedian = [...cpuRatios].sort((a, b) => a - b)[Math.floor(cpuRatios.length / 2)] ?? 0;
    const row =
      `| \`GET ${path}\` (${(bodies[path] ?? '').length} B) | ${Math.round(median.bare.requestsPerSecond)} | ` +
      `${Math.round(median.api.requestsPerSecond)} | ${median.api.p50Ms} / ${median.api.p99Ms} | ` +
      `${ratios.map((r) => r.toFixed(2)).join(', ')} | **${medianRatio.toFixed(2)}** | ` +
      `${median.bare.cpuUsPerRequest.toFixed(1)} / ${median.api.cpuUsPerRequest.toFixed(1)} | ` +
      `${cpuMedian.toFixed(2)} |`;
    console.log(row);
    rows.push(row);
  }
  const met = (ok: boolean) => (ok ? 'met' : 'NOT met');
  const body = [
    `Command: \`npm run bench:http\` (autocannon, ${CONNECTIONS} connections; ${ROUNDS} rounds a route, ` +
      `each ${WARMUP_S} s of warm-up on each server, then ${DURATION_S} s on each in ${SLICE_S} s slices ` +
      'alternating between bare Fastify and the panel; panel on SQLite with the dry-run driver and a sealed ' +
      `database holding one server, ${DEVICES} devices (${GROUP_SIZE} in one group), their events and a ` +
      `webhook with one delivery each; a key made with \`--no-rate-limit\`). Machine: ${machine()}. ` +
      `Load average (1 / 5 / 15 min) at the first route: ${loadAtStart}; after the last: ${loadAverage()}.`,
    '',
    'The panel authenticates the key (SHA-256, then a lookup served from memory until another process changes ' +
      "keys), checks the scope, runs the route's queries on SQLite and serialises through the response " +
      'schema; the bare route returns the identical bytes.',
    '',
    '| route (answer size) | bare Fastify req/s | vpn-panel req/s | p50 / p99 ms (median slice p50, ' +
      'worst slice p99) | ratio of each round | median ratio | CPU µs a request, bare / panel | CPU ratio |',
    '|---|---|---|---|---|---|---|---|',
    rows.join('\n'),
    '',
    'The figures of a row are those of its median round; every route answered only 2xx. The CPU columns are ' +
      "each process's CPU time (all threads) over the requests it answered in its slices; the CPU ratio, bare " +
      'over panel (median of rounds), is what the req/s ratio tends to when each server has a core of its own: ' +
      'it moves far less than the req/s ratio when other work shares the machine.',
    '',
    `Cheapest authenticated GET, median ratio authenticated / bare: **${cheapest.toFixed(2)}** ` +
      `(target ≥ 0.70: ${met(cheapest >= 0.7)}). Every list route: lowest median ratio ` +
      `**${worstList.toFixed(2)}** (target ≥ 0.50: ${met(worstList >= 0.5)}).`,
  ].join('\n');
  if (only === undefined) writeSection('HTTP: every list route against bare Fastify (issue 16)', body);
  console.log(body);
} finally {
  hooks.close();
  await Promise.all([panel.remove(), ...(bare ? [stop(bare)] : [])]);
}
