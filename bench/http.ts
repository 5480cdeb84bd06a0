/**
 * The cheapest authenticated GET of the API against a bare Fastify route returning the same JSON,
 * measured side by side in one run (each server its own process, the load generator a third).
 * Target (issue 2): the authenticated route serves at least half the requests/s of the bare one.
 * Run: npm run bench:http   (DURATION_S and CONNECTIONS may be set in the environment)
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { freePort } from '../test/support/panel.ts';
import { machine, writeSection } from './report.ts';

const DURATION_S = Number(process.env.DURATION_S ?? 10);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
const CLI = fileURLToPath(new URL('../bin/vpn-panel.js', import.meta.url));

async function waitFor(url: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    try {
      await fetch(url);
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  throw new Error(`${url} did not answer`);
}

interface Result {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
}

async function load(url: string, headers: Record<string, string>): Promise<Result> {
  await autocannon({ url, headers, connections: CONNECTIONS, duration: 2 });
  const r = await autocannon({ url, headers, connections: CONNECTIONS, duration: DURATION_S });
  return { requestsPerSecond: r.requests.average, p50Ms: r.latency.p50, p99Ms: r.latency.p99, non2xx: r.non2xx };
}

function stop(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

const dataDir = mkdtempSync(join(tmpdir(), 'vpn-panel-bench-'));
const env = { ...process.env, DATA_DIR: dataDir, NODE_DRIVER: 'dry-run', LOG_LEVEL: 'warn', HOST: '127.0.0.1', PUBLIC_HOST: '192.0.2.1' };
const panelPort = await freePort();
const barePort = await freePort();
const key = execFileSync(process.execPath, [CLI, 'keys', 'create', '--name', 'bench', '--scopes', 'servers:read', '--no-rate-limit'], { env, encoding: 'utf8' })
  .trim()
  .split('\n')
  .at(-1);
if (key === undefined) throw new Error('no key');
const panel = spawn(process.execPath, [CLI, 'serve'], { env: { ...env, PORT: String(panelPort) }, stdio: 'inherit' });
const bare = spawn(process.execPath, [fileURLToPath(new URL('./bare-server.ts', import.meta.url))], { env: { ...env, PORT: String(barePort) }, stdio: 'inherit' });
try {
  await waitFor(`http://127.0.0.1:${panelPort}/healthz`);
  await waitFor(`http://127.0.0.1:${barePort}/api/v1/servers`);
  const path = '/api/v1/servers';
  const same = await Promise.all([
    fetch(`http://127.0.0.1:${panelPort}${path}`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.text()),
    fetch(`http://127.0.0.1:${barePort}${path}`).then((r) => r.text()),
  ]);
  if (same[0] !== same[1]) throw new Error(`the two routes answer differently: ${same[0]} vs ${same[1]}`);
  const bareResult = await load(`http://127.0.0.1:${barePort}${path}`, {});
  const apiResult = await load(`http://127.0.0.1:${panelPort}${path}`, { authorization: `Bearer ${key}` });
  const ratio = apiResult.requestsPerSecond / bareResult.requestsPerSecond;
  const row = (name: string, r: Result) => `| ${name} | ${Math.round(r.requestsPerSecond)} | ${r.p50Ms} | ${r.p99Ms} | ${r.non2xx} |`;
  const body = `Command: \`npm run bench:http\` (autocannon, ${CONNECTIONS} connections, ${DURATION_S} s after 2 s of warm-up; panel on SQLite with the dry-run driver; a key made with \`--no-rate-limit\`). Machine: ${machine()}.

\`GET ${path}\` with an empty list: the panel authenticates the key (SHA-256 + indexed lookup on every request, so revocation is immediate), checks the scope, reads servers and nodes from SQLite and serialises through the response schema; the bare route returns the same JSON.

| route | req/s | p50 ms | p99 ms | non-2xx |
|---|---|---|---|---|
${row('bare Fastify 5', bareResult)}
${row('vpn-panel, authenticated', apiResult)}

Ratio authenticated / bare: **${ratio.toFixed(2)}** (target ≥ 0.50: ${ratio >= 0.5 ? 'met' : 'NOT met'}).`;
  writeSection('HTTP: cheapest authenticated GET against bare Fastify', body);
  console.log(body);
} finally {
  await Promise.all([stop(panel), stop(bare)]);
  rmSync(dataDir, { recursive: true, force: true });
}
