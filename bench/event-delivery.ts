/**
 * Event to first delivery attempt, at idle: a real `vpn-panel serve` (SQLite in a temp DATA_DIR,
 * dry-run driver, WEBHOOK_ALLOW_PRIVATE=1, a key made with `--no-rate-limit`), one webhook
 * subscribed to `device.created` pointing at a receiver on 127.0.0.1 in this process. DEVICES
 * devices are made one after another; for each, the time from the API's answer to the create until
 * the receiver has its `device.created` delivery (matched by device id in the payload). Both ends
 * are timed with this process's clock. Target (issue 12): p99 under 100 ms.
 *
 * BASE_CLI (optional): the `bin/vpn-panel.js` of another checkout (e.g. the branch's base, exported
 * with `git archive`); then both panels are measured in the same run, the base first, and the
 * section shows both. BASE_LABEL names that row (e.g. the base commit).
 *
 * Run: node bench/event-delivery.ts
 * Environment: DEVICES (200), BASE_CLI (unset), BASE_LABEL ('before'), NO_WRITE (set: print the section, leave
 * docs/benchmarks.md alone).
 * Writes the section "## Event to first webhook delivery attempt".
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { BenchPanel } from './panel.ts';
import { loadAverage, machine, percentile, writeSection } from './report.ts';

const SECTION = 'Event to first webhook delivery attempt';
const TARGET_P99_MS = 100;
const DEVICES = Number(process.env.DEVICES ?? 200);
const CLI = fileURLToPath(new URL('../bin/vpn-panel.js', import.meta.url));

interface Figures {
  label: string;
  median: number;
  p95: number;
  p99: number;
  max: number;
}

/** A receiver that answers 204 at once and resolves the waiter of each device id it hears of. */
function startReceiver(): Promise<{ server: Server; port: number; arrival: (deviceId: number) => Promise<number> }> {
  const arrived = new Map<number, number>();
  const waiters = new Map<number, (atMs: number) => void>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const atMs = performance.now();
      const body: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      if (typeof body === 'object' && body !== null && 'device_id' in body && typeof body.device_id === 'number') {
        const waiter = waiters.get(body.device_id);
        if (waiter) waiter(atMs);
        else arrived.set(body.device_id, atMs);
      }
      res.writeHead(204).end();
    });
  });
  const arrival = (deviceId: number): Promise<number> => {
    const atMs = arrived.get(deviceId);
    if (atMs !== undefined) return Promise.resolve(atMs);
    return new Promise((resolve) => waiters.set(deviceId, resolve));
  };
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const address: AddressInfo | string | null = server.address();
      if (address === null || typeof address === 'string') throw new Error('receiver has no port');
      resolve({ server, port: address.port, arrival });
    });
  });
}

async function measure(label: string, cli: string): Promise<Figures> {
  const env = { WEBHOOK_ALLOW_PRIVATE: '1', WEBHOOK_RETRY_SCHEDULE: undefined };
  const panel = new BenchPanel('event-delivery', env, cli);
  const receiver = await startReceiver();
  try {
    const key = panel.createKey();
    await panel.start();
    const { base } = panel;
    const api = async (path: string, body: object): Promise<{ id: number }> => {
      const response = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const json: unknown = await response.json();
      if (!response.ok) throw new Error(`POST ${path}: ${response.status} ${JSON.stringify(json).slice(0, 300)}`);
      const id = typeof json === 'object' && json !== null && 'id' in json ? json.id : undefined;
      if (typeof id === 'number') return { id };
      throw new Error(`no id in ${JSON.stringify(json).slice(0, 200)}`);
    };
    const server = await api('/api/v1/servers', { name: 'bench', address: '10.200.0.1/16' });
    await api('/api/v1/webhooks', { url: `http://127.0.0.1:${receiver.port}/hook`, events: ['device.created'] });
    const latencies: number[] = [];
    for (let i = 0; i < DEVICES; i++) {
      const device = await api('/api/v1/devices', { server_id: server.id, name: `d${i}` });
      const answeredMs = performance.now();
      const arrivedMs = await receiver.arrival(device.id);
      latencies.push(Math.max(0, arrivedMs - answeredMs));
    }
    latencies.sort((a, b) => a - b);
    return {
      label,
      median: percentile(latencies, 50),
      p95: percentile(latencies, 95),
      p99: percentile(latencies, 99),
      max: latencies.at(-1) ?? Number.NaN,
    };
  } finally {
    await panel.remove();
    receiver.server.close();
  }
}

const ms = (v: number): string => v.toFixed(1);
const loadStart = loadAverage();
const runs: Figures[] = [];
if (process.env.BASE_CLI !== undefined)
  runs.push(await measure(process.env.BASE_LABEL ?? 'before', process.env.BASE_CLI));
runs.push(await measure('this checkout', CLI));
const loadEnd = loadAverage();
const rows = runs.map((f) => `| ${f.label} | ${ms(f.median)} | ${ms(f.p95)} | ${ms(f.p99)} | ${ms(f.max)} |`);
const settings = `DEVICES=${DEVICES}${process.env.BASE_CLI === undefined ? '' : ', BASE_CLI set'}`;
const body = `Command: \`node bench/event-delivery.ts\` (${settings}). Machine: ${machine()}. \
Load average (1/5/15 min) at the start: ${loadStart}; at the end: ${loadEnd}.

\`vpn-panel serve\` as its own process (SQLite in a temp \`DATA_DIR\`, \`NODE_DRIVER=dry-run\`, \
\`WEBHOOK_ALLOW_PRIVATE=1\`, \`LOG_LEVEL=warn\`, poll 500 ms), one webhook subscribed to \`device.created\` \
pointing at a receiver on 127.0.0.1 in the bench process (answers 204 at once). ${DEVICES} devices made one after \
another through the API; each figure is the time from the API's answer to a create until the receiver has that \
device's \`device.created\` delivery. Target: p99 under ${TARGET_P99_MS} ms.

| panel | median (ms) | p95 (ms) | p99 (ms) | max (ms) |
|---|---|---|---|---|
${rows.join('\n')}
`;
console.log(body);
if (process.env.NO_WRITE === undefined) writeSection(SECTION, body);
