/**
 * The cheapest authenticated GET of the API against a bare Fastify route returning the same JSON,
 * measured side by side in one run (each server its own process, the load generator a third).
 * Target (issue 2): the authenticated route serves at least half the requests/s of the bare one.
 * Run: npm run bench:http   (DURATION_S, SLICE_S, ROUNDS and CONNECTIONS may be set in the environment)
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { freePort } from '../test/support/panel.ts';
import { answers, BenchPanel, stop } from './panel.ts';
import { machine, writeSection } from './report.ts';

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
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
}

interface Target {
  url: string;
  headers: Record<string, string>;
}

const load = (target: Target, seconds: number) =>
  autocannon({ ...target, connections: CONNECTIONS, duration: seconds });

/** The slices of one server in a round: requests/s over all of them, the median p50 and the worst p99. */
function summary(slices: autocannon.Result[]): Result {
  const sum = (f: (r: autocannon.Result) => number) => slices.reduce((total, r) => total + f(r), 0);
  const p50s = slices.map((r) => r.latency.p50).sort((a, b) => a - b);
  return {
    requestsPerSecond: sum((r) => r.requests.total) / sum((r) => r.duration),
    p50Ms: p50s[Math.floor(p50s.length / 2)] ?? 0,
    p99Ms: Math.max(...slices.map((r) => r.latency.p99)),
    non2xx: sum((r) => r.non2xx),
  };
}

/** One round: warm-up on each server, then SLICE_S slices alternating between them until each had DURATION_S. */
async function round(bare: Target, api: Target): Promise<{ bare: Result; api: Result }> {
  await load(bare, WARMUP_S);
  await load(api, WARMUP_S);
  const bareSlices: autocannon.Result[] = [];
  const apiSlices: autocannon.Result[] = [];
  for (let i = 0; i < Math.ceil(DURATION_S / SLICE_S); i++) {
    bareSlices.push(await load(bare, SLICE_S));
    apiSlices.push(await load(api, SLICE_S));
  }
  return { bare: summary(bareSlices), api: summary(apiSlices) };
}

/** Cheap authenticated GETs of the API; the cheapest one is the one the target is about. */
const PATHS = ['/api/v1/servers', '/api/v1/nodes', '/api/v1/events?limit=1', '/api/v1/webhooks'];

const panel = new BenchPanel('http');
let bare: ChildProcess | undefined;
try {
  const key = panel.createKey('servers:read,events:read,webhooks:write');
  await panel.start();
  const panelUrl = panel.base;
  const auth = { authorization: `Bearer ${key}` };
  const bodies: Record<string, string> = {};
  for (const path of PATHS) bodies[path] = await fetch(`${panelUrl}${path}`, { headers: auth }).then((r) => r.text());
  const barePort = await freePort();
  const bareServer = fileURLToPath(new URL('./bare-server.ts', import.meta.url));
  const bareEnv = { ...panel.env, PORT: String(barePort), BODIES: JSON.stringify(bodies) };
  bare = spawn(process.execPath, [bareServer], { env: bareEnv, stdio: 'inherit' });
  const bareUrl = `http://127.0.0.1:${barePort}`;
  await answers(`${bareUrl}/api/v1/servers`, bare);
  const rows: string[] = [];
  let best = 0;
  for (const path of PATHS) {
    const same = await fetch(`${bareUrl}${path}`).then((r) => r.text());
    if (same !== bodies[path]) throw new Error(`the two routes answer differently for ${path}`);
    const ratios: number[] = [];
    const pairs: { bare: Result; api: Result }[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const pair = await round({ url: `${bareUrl}${path}`, headers: {} }, { url: `${panelUrl}${path}`, headers: auth });
      if (pair.api.non2xx > 0)
        throw new Error(`GET ${path} answered ${pair.api.non2xx} non-2xx: the figures would not be of the route`);
      ratios.push(pair.api.requestsPerSecond / pair.bare.requestsPerSecond);
      pairs.push(pair);
    }
    const order = ratios.map((r, i) => [r, i] as const).sort((a, b) => a[0] - b[0]);
    const [medianRatio, medianIndex] = order[Math.floor(order.length / 2)] ?? [0, 0];
    const median = pairs[medianIndex];
    if (!median) throw new Error('no rounds');
    best = Math.max(best, medianRatio);
    rows.push(
      `| \`GET ${path}\` (${(bodies[path] ?? '').length} B) | ${Math.round(median.bare.requestsPerSecond)} | ${Math.round(median.api.requestsPerSecond)} | ${median.api.p50Ms} / ${median.api.p99Ms} | ${ratios.map((r) => r.toFixed(2)).join(', ')} | **${medianRatio.toFixed(2)}** |`,
    );
  }
  const body = `Command: \`npm run bench:http\` (autocannon, ${CONNECTIONS} connections; ${ROUNDS} rounds a route, each ${WARMUP_S} s of warm-up on each server, then ${DURATION_S} s on each in ${SLICE_S} s slices alternating between bare Fastify and the panel; panel on SQLite with the dry-run driver and a fresh database; a key made with \`--no-rate-limit\`). Machine: ${machine()}.

The panel authenticates the key (SHA-256, then a lookup served from memory until another process changes keys), checks the scope, runs the route's query on SQLite (\`GET /nodes\` gives its previous rows again while nothing has been committed, which it checks on every request) and serialises through the response schema; the bare route returns the identical bytes.

| route (answer size) | bare Fastify req/s | vpn-panel req/s | p50 / p99 ms (median slice p50, worst slice p99) | ratio of each round | median ratio |
|---|---|---|---|---|---|
${rows.join('\n')}

The figures of a row are those of its median round; every route answered only 2xx.

Cheapest authenticated GET, median ratio authenticated / bare: **${best.toFixed(2)}** (target ≥ 0.50: ${best >= 0.5 ? 'met' : 'NOT met'}).`;
  writeSection('HTTP: cheapest authenticated GET against bare Fastify', body);
  console.log(body);
} finally {
  await Promise.all([panel.remove(), ...(bare ? [stop(bare)] : [])]);
}
