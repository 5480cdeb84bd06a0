import type { FastifyBaseLogger } from 'fastify';
import { Counter, Gauge, Histogram, type LabelValues } from 'prom-client';
import type { NodeObserver } from '../agent/metrics.ts';
import type { Clock } from '../domain/clock.ts';
import { DEVICE_STATUSES } from '../domain/devices.ts';
import { SERVER_PROTOCOLS } from '../domain/protocols.ts';
import { SERVER_STATUSES } from '../domain/servers.ts';
import { Calendar } from '../domain/usage.ts';
import {
  DELIVERY_RESULTS,
  type DeliveryResult,
  type FleetCounts,
  NODE_STATUSES,
  type PanelObserver,
  SIGN_IN_BUDGETS,
  type SignInBudget,
} from '../services/metrics.ts';
import type { Db } from '../store/db.ts';
import { FleetCensus } from '../workers/fleet-census.ts';
import type { PanelConfig } from './config.ts';
import { KeptHistogram, type KeptSeries } from './kept-histogram.ts';
import { MetricsEndpoint, NodeMetrics } from './metrics.ts';

/** API answers take milliseconds; POST /servers waits for a deploy, up to a minute. */
const HTTP_BUCKETS_SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** One node's collection: an HTTP call and the batches' transactions (docs/benchmarks.md, usage collection). */
const COLLECT_BUCKETS_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** The answers of one method, route and status. */
interface HttpSeries {
  readonly labels: LabelValues<'method' | 'route' | 'status'>;
  /** Answers not yet added to the counter: a scrape adds them (prom-client's `inc` hashes its labels each call). */
  unscraped: number;
  /** The duration histogram's series of the method and route, which the route's statuses share. */
  readonly timing: KeptSeries<'method' | 'route'>;
}

/** The panel's metrics (`vpn_panel_*`), told by the API, the services and the workers. */
class PanelGauges implements PanelObserver {
  readonly #requests: Counter<'method' | 'route' | 'status'>;
  readonly #requestSeconds: KeptHistogram<'method' | 'route'>;
  readonly #usageBytes: Counter<'direction'>;
  readonly #collectSeconds: Histogram;
  readonly #deliveries: Counter<'result'>;
  readonly #signInRefusals: Counter<'budget'>;
  readonly #devices: Gauge<'status'>;
  readonly #devicesOnline: Gauge;
  readonly #servers: Gauge<'status' | 'protocol'>;
  readonly #nodes: Gauge<'status'>;
  readonly #deliveriesPending: Gauge;
  readonly #mailPending: Gauge;
  /** By method, route template and status; and all of them, for the scrape. */
  readonly #httpSeries = new Map<string, Map<string, Map<number, HttpSeries>>>();
  readonly #allHttpSeries: HttpSeries[] = [];

  constructor(endpoint: MetricsEndpoint) {
    const registers = [endpoint.registry];
    this.#requests = new Counter({
      name: 'vpn_panel_http_requests_total',
      help: 'API answers by method, route template (`unmatched` for a URL no route has) and status code.',
      labelNames: ['method', 'route', 'status'],
      registers,
      collect: () => {
        for (const series of this.#allHttpSeries) {
          if (series.unscraped === 0) continue;
          this.#requests.inc(series.labels, series.unscraped);
          series.unscraped = 0;
        }
      },
    });
    this.#requestSeconds = new KeptHistogram({
      name: 'vpn_panel_http_request_duration_seconds',
      help: 'Time from a request to its answer, by method and route template.',
      buckets: HTTP_BUCKETS_SECONDS,
    });
    endpoint.addSampled(this.#requestSeconds);
    this.#usageBytes = new Counter({
      name: 'vpn_panel_usage_bytes_total',
      help: "Usage stored from the nodes' reports, each batch once; rx: bytes the devices received, tx: sent.",
      labelNames: ['direction'],
      registers,
    });
    this.#collectSeconds = new Histogram({
      name: 'vpn_panel_usage_collect_duration_seconds',
      help: "Time to collect one node's usage and store it.",
      buckets: COLLECT_BUCKETS_SECONDS,
      registers,
    });
    this.#deliveries = new Counter({
      name: 'vpn_panel_webhook_deliveries_total',
      help:
        'Webhook delivery attempts by result: delivered; ' +
        'retry (failed, another attempt scheduled); failed (given up).',
      labelNames: ['result'],
      registers,
    });
    this.#signInRefusals = new Counter({
      name: 'vpn_panel_console_sign_in_refusals_total',
      help:
        'Console sign-ins refused (429) before their password was checked, by the budget spent: address, ' +
        'network (IPv6 /48), name_address, name_device, name (from anywhere), hash_queue (too many waiting).',
      labelNames: ['budget'],
      registers,
    });
    this.#devices = new Gauge({
      name: 'vpn_panel_devices',
      help: 'Devices by status, as the API shows it (recounted every METRICS_REFRESH_INTERVAL).',
      labelNames: ['status'],
      registers,
    });
    this.#devicesOnline = new Gauge({
      name: 'vpn_panel_devices_online',
      help: 'Devices with a handshake in the last 3 minutes.',
      registers,
    });
    this.#servers = new Gauge({
      name: 'vpn_panel_servers',
      help: 'Servers by protocol and status, as the API shows it (node_offline: its node misses heartbeats).',
      labelNames: ['status', 'protocol'],
      registers,
    });
    this.#nodes = new Gauge({ name: 'vpn_panel_nodes', help: 'Nodes by status.', labelNames: ['status'], registers });
    this.#deliveriesPending = new Gauge({
      name: 'vpn_panel_webhook_deliveries_pending',
      help: 'Webhook deliveries not yet delivered or given up.',
      registers,
    });
    this.#mailPending = new Gauge({
      name: 'vpn_panel_mail_pending',
      help: 'Notification mails not yet sent or given up.',
      registers,
    });
    for (const direction of ['rx', 'tx']) this.#usageBytes.inc({ direction }, 0);
    for (const result of DELIVERY_RESULTS) this.#deliveries.inc({ result }, 0);
    for (const budget of SIGN_IN_BUDGETS) this.#signInRefusals.inc({ budget }, 0);
  }

  httpRequest(method: string, route: string, statusCode: number, seconds: number): void {
    const series = this.#httpSeriesOf(method, route, statusCode);
    series.unscraped++;
    series.timing.observe(seconds);
  }

  /** Made once per method, route and status: answers are many, their series few. */
  #httpSeriesOf(method: string, route: string, statusCode: number): HttpSeries {
    let routes = this.#httpSeries.get(method);
    if (routes === undefined) {
      routes = new Map();
      this.#httpSeries.set(method, routes);
    }
    let statuses = routes.get(route);
    if (statuses === undefined) {
      statuses = new Map();
      routes.set(route, statuses);
    }
    let series = statuses.get(statusCode);
    if (series === undefined) {
      const labels = { method, route, status: String(statusCode) };
      const timing = statuses.values().next().value?.timing ?? this.#requestSeconds.series({ method, route });
      series = { labels, unscraped: 0, timing };
      statuses.set(statusCode, series);
      this.#allHttpSeries.push(series);
    }
    return series;
  }

  usageStored(rxBytes: number, txBytes: number): void {
    this.#usageBytes.inc({ direction: 'rx' }, rxBytes);
    this.#usageBytes.inc({ direction: 'tx' }, txBytes);
  }

  usageCollected(seconds: number): void {
    this.#collectSeconds.observe(seconds);
  }

  webhookDelivery(result: DeliveryResult): void {
    this.#deliveries.inc({ result });
  }

  signInRefused(budget: SignInBudget): void {
    this.#signInRefusals.inc({ budget });
  }

  fleetCounted(counts: FleetCounts): void {
    for (const status of DEVICE_STATUSES) this.#devices.set({ status }, counts.devices.get(status) ?? 0);
    this.#devicesOnline.set(counts.devicesOnline);
    for (const protocol of SERVER_PROTOCOLS) {
      const ofProtocol = counts.servers.get(protocol);
      for (const status of SERVER_STATUSES) this.#servers.set({ status, protocol }, ofProtocol?.get(status) ?? 0);
    }
    for (const status of NODE_STATUSES) this.#nodes.set({ status }, counts.nodes.get(status) ?? 0);
    this.#deliveriesPending.set(counts.webhookDeliveriesPending);
    this.#mailPending.set(counts.mailPending);
  }
}

/** A panel's metrics: what its parts tell them, the fleet census, and the listener. */
export interface PanelMetrics {
  readonly observer: PanelObserver;
  /** For the embedded node's agent; its `vpn_node_*` metrics are on the panel's listener. */
  readonly node: NodeObserver | undefined;
  /** What `GET /metrics` answers. */
  scrape(): Promise<string>;
  /** Counts the fleet now (the census does every METRICS_REFRESH_INTERVAL once started). */
  recount(): Promise<void>;
  /** Listens, counts the fleet, and recounts it every interval from then on. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** The panel's metrics, or none with METRICS_PORT=0 (then nothing counts or listens). */
export function panelMetrics(
  config: PanelConfig,
  db: Db,
  clock: Clock,
  log: FastifyBaseLogger,
): PanelMetrics | undefined {
  if (config.metrics === undefined) return undefined;
  const endpoint = new MetricsEndpoint(config.metrics);
  const observer = new PanelGauges(endpoint);
  const census = new FleetCensus(db, clock, new Calendar(config.timezone), observer, log, config.metricsRefreshMs);
  return {
    observer,
    node: config.localNode ? new NodeMetrics(endpoint.registry) : undefined,
    scrape: () => endpoint.scrape(),
    recount: () => census.runOnce(),
    async start() {
      await endpoint.listen(log);
      await census.start();
    },
    async stop() {
      await census.stop();
      await endpoint.close();
    },
  };
}
