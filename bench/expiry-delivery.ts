/**
 * A worker's event to its webhook delivery, at idle: a real `vpn-panel serve` (SQLite in a temp DATA_DIR, or a
 * fresh PostgreSQL database, dry-run driver, WEBHOOK_ALLOW_PRIVATE=1, a key made with `--no-rate-limit`), one
 * webhook subscribed to
 * `device.expired` pointing at a receiver on 127.0.0.1 in this process. SAMPLES devices are made with expiries
 * SPACING_MS apart; the panel's expiry watch (a round a second) posts each `device.expired`. For each, the time
 * from the event's `created_at` (the panel's clock inside the expiry's transaction, just before its commit) to
 * the receiver having the delivery (this process's clock; both are the machine's wall clock, to the ms).
 * Target (issue 25 item 1): p90 under 150 ms.
 *
 * BASE_CLI (optional): the `bin/vpn-panel.js` of another checkout (e.g. the branch's base, exported with
 * `git archive`); then both panels are measured in the same run, the base first. BASE_LABEL names that row.
 *
 * Run: node bench/expiry-delivery.ts
 * Environment: SAMPLES (30), SPACING_MS (700), KINDS (`sqlite,postgres`), BASE_CLI (unset), BASE_LABEL ('before'),
 * NO_WRITE (set: print the section, leave docs/benchmarks.md alone).
 * Writes the section "## Worker event to webhook delivery (device.expired)".
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { DATABASE_KINDS, type DatabaseKind, createTestDatabase } from '../test/support/databases.ts';
import { BenchPanel } from './panel.ts';
import { loadAverage, machine, percentile, writeSection } from './report.ts';

const SECTION = 'Worker event to webhook delivery (device.expired)';
const TARGET_P90_MS = 150;
const SAMPLES = Number(process.env.SAMPLES ?? 30);
const SPACING_MS = Number(process.env.SPACING_MS ?? 700);
const KINDS = DATABASE_KINDS.filter((kind) =>
  (process.env.KINDS ?? DATABASE_KINDS.join(',')).split(',').includes(kind),
);
const CLI = fileURLToPath(new URL('../bin/vpn-panel.js', import.meta.url));
/** Time to make the devices before the first expires. */
const LEAD_MS = 5_000;

interface Figures {
  kind: DatabaseKind;
  label: string;
  median: number;
  p90: number;
  p99: number;
  max: number;
}

/** A receiver that answers 204 at once and keeps, for each `device.expired`, the ms from its created_at to now. */
function startReceiver(): Promise<{ server: Server; port: number; latencies: number[] }> {
  const latencies: number[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const arrivedMs = Date.now();
      const body: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      if (typeof body === 'object' && body !== null && 'created_at' in body && typeof body.created_at === 'string') {
        latencies.push(arrivedMs - Date.parse(body.created_at));
      }
      res.writeHead(204).end();
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const address: AddressInfo | string | null = server.address();
      if (address === null || typeof address === 'string') throw new Error('receiver has no port');
      resolve({ server, port: address.port, latencies });
    });
  });
}

async function measure(kind: DatabaseKind, label: string, cli: string): Promise<Figures> {
  const database = await createTestDatabase(kind);
  const env = {
    WEBHOOK_ALLOW_PRIVATE: '1',
    WEBHOOK_RETRY_SCHEDULE: undefined,
    DATABASE_URL: database.env.DATABASE_URL,
  };
  const panel = new BenchPanel('expiry-delivery', env, cli);
  const receiver = await startReceiver();
  try {
    const key = panel.createKey();
    await panel.start();
    const post = async (path: string, body: object): Promise<number> => {
      const response = await fetch(`${panel.base}/api/v1${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const json: unknown = await response.json();
      const id = typeof json === 'object' && json !== null && 'id' in json ? json.id : undefined;
      if (response.ok && typeof id === 'number') return id;
      throw new Error(`POST ${path}: ${response.status} ${JSON.stringify(json).slice(0, 300)}`);
    };
    const serverId = await post('/servers', { name: 'bench', address: '10.200.0.1/16' });
    await post('/webhooks', { url: `http://127.0.0.1:${receiver.port}/hook`, events: ['device.expired'] });
    const firstMs = Date.now() + LEAD_MS;
    for (let i = 0; i < SAMPLES; i++) {
      const expiresAt = new Date(firstMs + i * SPACING_MS).toISOString();
      await post('/devices', { server_id: serverId, name: `d${i}`, expires_at: expiresAt });
    }
    const deadlineMs = firstMs + SAMPLES * SPACING_MS + 30_000;
    while (receiver.latencies.length < SAMPLES) {
      if (Date.now() > deadlineMs) throw new Error(`${receiver.latencies.length} of ${SAMPLES} expiries arrived`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const latencies = receiver.latencies.map((ms) => Math.max(0, ms));
    return {
      kind,
      label,
      median: percentile(latencies, 50),
      p90: percentile(latencies, 90),
      p99: percentile(latencies, 99),
      max: Math.max(...latencies),
    };
  } finally {
    await panel.remove();
    await database.drop();
    receiver.server.close();
  }
}

const loadStart = loadAverage();
const runs: Figures[] = [];
for (const kind of KINDS) {
  if (process.env.BASE_CLI !== undefined)
    runs.push(await measure(kind, process.env.BASE_LABEL ?? 'before', process.env.BASE_CLI));
  runs.push(await measure(kind, 'this checkout', CLI));
}
const loadEnd = loadAverage();
const rows = runs.map((f) => `| ${f.kind} | ${f.label} | ${f.median} | ${f.p90} | ${f.p99} | ${f.max} |`);
const base = process.env.BASE_CLI === undefined ? '' : ', BASE_CLI set';
const settings = `SAMPLES=${SAMPLES}, SPACING_MS=${SPACING_MS}, KINDS=${KINDS.join(',')}${base}`;
const body = `Command: \`node bench/expiry-delivery.ts\` (${settings}). Machine: ${machine()}. \
Load average (1/5/15 min) at the start: ${loadStart}; at the end: ${loadEnd}.

\`vpn-panel serve\` as its own process (SQLite in a temp \`DATA_DIR\`, or a fresh PostgreSQL database, \
\`NODE_DRIVER=dry-run\`, \
\`WEBHOOK_ALLOW_PRIVATE=1\`, \`LOG_LEVEL=warn\`, webhook poll 500 ms), one webhook subscribed to \`device.expired\` \
pointing at a receiver on 127.0.0.1 in the bench process (answers 204 at once). ${SAMPLES} devices made with expiries \
${SPACING_MS} ms apart; the panel's expiry watch (a round a second) posts each \`device.expired\`. Each figure is the \
time from the event's \`created_at\` (the panel's clock in the expiry's transaction, just before its commit) to the \
receiver having the delivery, in whole ms (both clocks are the machine's). Target: p90 under ${TARGET_P90_MS} ms.

| database | panel | median (ms) | p90 (ms) | p99 (ms) | max (ms) |
|---|---|---|---|---|---|
${rows.join('\n')}
`;
console.log(body);
if (process.env.NO_WRITE === undefined) writeSection(SECTION, body);
