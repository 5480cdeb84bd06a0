import { once } from 'node:events';
import type { FastifyBaseLogger } from 'fastify';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { APPLY_KINDS, type ApplyKind, CUTOFF_REASONS, type CutoffReason, type NodeObserver } from '../agent/metrics.ts';
import { messageOf } from '../domain/errors.ts';
import type { MetricsListenerConfig } from './config.ts';
import { type SampledMetric, scrapeText } from './kept-histogram.ts';

/** A scrape is one small request: anything slower is a client holding the socket. */
const SCRAPE_TIMEOUT_MS = 10_000;

/** Driver and queue operations take milliseconds; a server of thousands of peers, seconds (docs/benchmarks.md). */
const APPLY_BUCKETS_SECONDS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * A process's metrics: its registry, which holds prom-client's process and event-loop metrics besides the
 * process's own, and the listener that serves it as `GET /metrics` (Prometheus text format) on its own
 * address, apart from the API. The listener never keeps the process alive by itself.
 */
export class MetricsEndpoint {
  readonly registry = new Registry();
  /** Metrics kept apart from the registry (KeptHistogram), written after its own. */
  readonly #sampled: SampledMetric[] = [];
  readonly #config: MetricsListenerConfig;
  readonly #server: Server;

  constructor(config: MetricsListenerConfig) {
    this.#config = config;
    collectDefaultMetrics({ register: this.registry });
    this.#server = createServer(
      { requestTimeout: SCRAPE_TIMEOUT_MS, headersTimeout: SCRAPE_TIMEOUT_MS },
      (request, response) => {
        this.#answer(request, response).catch((error: unknown) => {
          response.writeHead(500, { 'content-type': 'text/plain' }).end(`${messageOf(error)}\n`);
        });
      },
    );
  }

  /** Adds a metric that gives its own samples (KeptHistogram) to every scrape. */
  addSampled(metric: SampledMetric): void {
    this.#sampled.push(metric);
  }

  /** What a scrape gets: every metric in the text exposition format. */
  scrape(): Promise<string> {
    return scrapeText(this.registry, this.#sampled);
  }

  /** Listens and logs where; a port taken fails naming the variables that choose another. */
  async listen(log: FastifyBaseLogger): Promise<void> {
    const { host, port } = this.#config;
    this.#server.listen(port, host);
    try {
      await once(this.#server, 'listening');
    } catch (error) {
      throw new Error(
        `metrics listener on ${host}:${port} (METRICS_HOST, METRICS_PORT; 0 turns it off): ${messageOf(error)}`,
      );
    }
    this.#server.unref();
    log.info({ url: `http://${host.includes(':') ? `[${host}]` : host}:${port}/metrics` }, 'metrics listening');
  }

  async close(): Promise<void> {
    if (!this.#server.listening) return;
    const closed = once(this.#server, 'close');
    this.#server.close();
    this.#server.closeAllConnections();
    await closed;
  }

  async #answer(request: IncomingMessage, response: ServerResponse): Promise<void> {
    if ((request.url ?? '').split('?')[0] !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('only /metrics is here\n');
      return;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('GET /metrics\n');
      return;
    }
    const text = await this.scrape();
    response.writeHead(200, { 'content-type': this.registry.contentType });
    response.end(request.method === 'HEAD' ? undefined : text);
  }
}

/** The node agent's metrics (`vpn_node_*`), told by its Agent; `serve` shows those of its embedded node. */
export class NodeMetrics implements NodeObserver {
  readonly #peers: Gauge<'server'>;
  readonly #peerChanges: Counter;
  readonly #cutoffs: Counter<'reason'>;
  readonly #rxBytes: Counter;
  readonly #txBytes: Counter;
  readonly #apply: Histogram<'kind'>;
  readonly #unacknowledged: Gauge;

  constructor(registry: Registry) {
    const registers = [registry];
    this.#peers = new Gauge({
      name: 'vpn_node_peers',
      help: "Peers on each server's interface (devices not cut off), by server id.",
      labelNames: ['server'],
      registers,
    });
    this.#peerChanges = new Counter({
      name: 'vpn_node_peer_changes_total',
      help: 'Peers added, changed or removed by changes from the panel, one per peer.',
      registers,
    });
    this.#cutoffs = new Counter({
      name: 'vpn_node_cutoffs_total',
      help: 'Peers the node took off their interface itself: device expired, or its data allowance used.',
      labelNames: ['reason'],
      registers,
    });
    this.#rxBytes = new Counter({
      name: 'vpn_node_rx_bytes_total',
      help: 'Bytes the devices received (downloads), as metered from the interface counters.',
      registers,
    });
    this.#txBytes = new Counter({
      name: 'vpn_node_tx_bytes_total',
      help: 'Bytes the devices sent (uploads), as metered from the interface counters.',
      registers,
    });
    this.#apply = new Histogram({
      name: 'vpn_node_apply_duration_seconds',
      help: "Time to apply desired state to the host: a server's whole state, or a change of some peers.",
      labelNames: ['kind'],
      buckets: APPLY_BUCKETS_SECONDS,
      registers,
    });
    this.#unacknowledged = new Gauge({
      name: 'vpn_node_journal_batches_unacknowledged',
      help: 'Usage batches sealed for the panel that it has not acknowledged yet (kept in the journal until then).',
      registers,
    });
    for (const reason of CUTOFF_REASONS) this.#cutoffs.inc({ reason }, 0);
    for (const kind of APPLY_KINDS) this.#apply.zero({ kind });
  }

  serverPeers(serverId: number, peers: number | undefined): void {
    if (peers === undefined) this.#peers.remove({ server: String(serverId) });
    else this.#peers.set({ server: String(serverId) }, peers);
  }

  peersChanged(count: number): void {
    this.#peerChanges.inc(count);
  }

  cutOff(reason: CutoffReason): void {
    this.#cutoffs.inc({ reason });
  }

  metered(rxBytes: number, txBytes: number): void {
    this.#rxBytes.inc(rxBytes);
    this.#txBytes.inc(txBytes);
  }

  applied(kind: ApplyKind, seconds: number): void {
    this.#apply.observe({ kind }, seconds);
  }

  unacknowledgedBatches(count: number): void {
    this.#unacknowledged.set(count);
  }
}
