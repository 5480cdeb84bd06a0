/**
 * The parts of bench/soak.ts that make its load: the node it points the panel at (the node's own Agent on a scripted
 * data plane, served over HTTP by the agent's own app), the webhook receiver (bench/webhooks.ts's, driven over its
 * IPC messages), and the API clients, each at a fixed rate, timing every request.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { Agent } from '../src/agent/agent.ts';
import { buildAgentApp } from '../src/agent/http.ts';
import { ScriptedDriver } from '../test/support/scripted-driver.ts';

/** Bytes each peer moves in each second, both ways: every device counts in every usage round. */
const RX_PER_S = 1_000;
const TX_PER_S = 200;

/** A node agent in this process: the Agent of `vpn-panel node` on a data plane whose counters the bench moves. */
export class ScriptedNode {
  readonly token = 'soak-agent-token-0123456789abcdef';
  readonly #driver = new ScriptedDriver();
  readonly #agent = new Agent(this.#driver, 'soak');
  #traffic: NodeJS.Timeout | undefined;
  #stopApp: (() => Promise<void>) | undefined;

  /** Starts the agent (its metering timer) and its HTTP app; returns the URL a panel reaches it at. */
  async start(): Promise<string> {
    const app = await buildAgentApp({ agent: this.#agent, token: this.token, logger: pino({ level: 'silent' }) });
    await app.listen({ port: 0, host: '127.0.0.1' });
    this.#stopApp = () => app.close();
    this.#agent.start((error) => console.error('agent:', error));
    this.#traffic = setInterval(() => this.#move(), 1000);
    const address = app.server.address();
    if (address === null || typeof address === 'string') throw new Error('the agent app has no port');
    return `http://127.0.0.1:${address.port}`;
  }

  /** Peers on the node's interfaces now. */
  get peers(): number {
    let n = 0;
    for (const server of this.#driver.servers.values()) n += server.peers.size;
    return n;
  }

  #move(): void {
    for (const server of this.#driver.servers.values()) {
      for (const peer of server.peers.values()) {
        peer.rx += RX_PER_S;
        peer.tx += TX_PER_S;
      }
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.#traffic);
    await this.#agent.stop();
    await this.#stopApp?.();
  }
}

/** The fields the soak reads of what bench/webhooks.ts's receiver reports (its `Report` message). */
interface ReceiverReport {
  port: number;
  unique: number;
}

function isReceiverReport(m: unknown): m is ReceiverReport {
  return (
    typeof m === 'object' &&
    m !== null &&
    'port' in m &&
    typeof m.port === 'number' &&
    'unique' in m &&
    typeof m.unique === 'number'
  );
}

/**
 * bench/webhooks.ts's receiver process (`node bench/webhooks.ts receiver`), told to answer 204 at once: it counts
 * requests and distinct `webhook-id`s.
 */
export class WebhookReceiver {
  readonly child: ChildProcess;
  #waiting: ((r: ReceiverReport) => void)[] = [];

  constructor() {
    const file = fileURLToPath(new URL('./webhooks.ts', import.meta.url));
    this.child = fork(file, ['receiver'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.child.on('message', (m: unknown) => {
      if (!isReceiverReport(m)) return;
      const waiting = this.#waiting;
      this.#waiting = [];
      for (const resolve of waiting) resolve(m);
    });
  }

  #next(timeoutMs = 30_000): Promise<ReceiverReport> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the receiver did not answer')), timeoutMs);
      this.#waiting.push((r) => {
        clearTimeout(timer);
        resolve(r);
      });
    });
  }

  /** Waits until it listens, switches it to answering at once; returns its port. */
  async ready(): Promise<number> {
    const { port } = await this.#next();
    const answered = this.#next();
    this.child.send({ type: 'mode', mode: 'ok', expect: 0 });
    await answered;
    return port;
  }

  stats(): Promise<ReceiverReport> {
    const reply = this.#next();
    this.child.send({ type: 'stats', mode: 'ok', expect: 0 });
    return reply;
  }
}

/** One request's outcome: its time to the whole body, and whether it answered as expected. */
export interface Timed {
  ms: number;
  ok: boolean;
  status: number;
}

export type Api = (method: string, path: string, body?: object) => Promise<{ timed: Timed; json: unknown }>;

/** Calls of the panel's API with a key, each timed to its whole body; a network error counts as status 0. */
export function apiOf(base: string, key: string): Api {
  return async (method, path, body) => {
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const started = performance.now();
    try {
      const response = await fetch(`${base}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await response.text();
      const ms = performance.now() - started;
      const json: unknown = text === '' ? null : JSON.parse(text);
      return { timed: { ms, ok: response.ok, status: response.status }, json };
    } catch (error) {
      console.error(`${method} ${path}:`, error);
      return { timed: { ms: performance.now() - started, ok: false, status: 0 }, json: null };
    }
  };
}

export function idOf(value: unknown): number {
  if (typeof value === 'object' && value !== null && 'id' in value && typeof value.id === 'number') return value.id;
  throw new Error(`no id in ${JSON.stringify(value).slice(0, 200)}`);
}

/** The last `id` of a page `{data, has_more}`, or 0 when it was the last page (the walk starts over). */
export function nextCursor(page: unknown): number {
  if (typeof page !== 'object' || page === null || !('data' in page) || !('has_more' in page)) return 0;
  const { data } = page;
  if (!page.has_more || !Array.isArray(data)) return 0;
  const last: unknown = data.at(-1);
  return last === undefined ? 0 : idOf(last);
}

/** Requests this many at a time at most; past that a tick is skipped and counted (the panel fell behind). */
const MAX_IN_FLIGHT = 64;

/**
 * Runs `work` `perSecond` times a second, on a fixed schedule (not after the previous one answered), until
 * `running()` is false; resolves when the last call has finished.
 */
export async function atRate(
  perSecond: number,
  running: () => boolean,
  work: () => Promise<void>,
  skipped: () => void,
): Promise<void> {
  const gapMs = 1000 / perSecond;
  const inFlight = new Set<Promise<void>>();
  let next = performance.now();
  while (running()) {
    next += gapMs;
    const wait = next - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    if (inFlight.size >= MAX_IN_FLIGHT) {
      skipped();
      continue;
    }
    const call = work().finally(() => inFlight.delete(call));
    inFlight.add(call);
  }
  await Promise.all(inFlight);
}
