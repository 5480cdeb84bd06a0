import { type Clock, isoAt } from '../domain/clock.ts';
import { type DeviceStatus, ONLINE_WINDOW_MS } from '../domain/devices.ts';
import type { ServerProtocol } from '../domain/protocols.ts';
import { effectiveServerStatus, type ServerStatus } from '../domain/servers.ts';
import type { Calendar } from '../domain/usage.ts';
import type { Db } from '../store/db.ts';
import { countDevices } from '../store/devices.ts';
import { countNodesByStatus, type NodeRow } from '../store/nodes.ts';
import { countPending } from '../store/outbox.ts';
import { countServersByStatus } from '../store/servers.ts';

export const NODE_STATUSES: readonly NodeRow['status'][] = ['online', 'offline'];

/**
 * What an attempt made of a delivery: `delivered`; `retry`, it failed and another attempt is scheduled; `failed`,
 * given up (the schedule ran out, 410 Gone, or its webhook was disabled, which fails it without an attempt).
 */
export type DeliveryResult = 'delivered' | 'retry' | 'failed';
export const DELIVERY_RESULTS: readonly DeliveryResult[] = ['delivered', 'retry', 'failed'];

/**
 * The console sign-in budgets a refusal names: per client `address` (IPv6: its /64), per IPv6 `network`
 * (/48), per user name and address (`name_address`) or name and known browser (`name_device`), per user name
 * from anywhere (`name`), and the password-hash queue (`hash_queue`), which refuses when too many wait.
 */
export type SignInBudget = 'address' | 'network' | 'name_address' | 'name_device' | 'name' | 'hash_queue';
export const SIGN_IN_BUDGETS: readonly SignInBudget[] = [
  'address',
  'network',
  'name_address',
  'name_device',
  'name',
  'hash_queue',
];

/** The fleet as the API shows it, counted from the database (a status no row has is absent). */
export interface FleetCounts {
  devices: ReadonlyMap<DeviceStatus, number>;
  devicesOnline: number;
  /** Servers by protocol, then by the status the API shows. */
  servers: ReadonlyMap<ServerProtocol, ReadonlyMap<ServerStatus, number>>;
  nodes: ReadonlyMap<NodeRow['status'], number>;
  webhookDeliveriesPending: number;
  mailPending: number;
}

/**
 * What a panel tells its metrics as it works (src/main/panel-metrics.ts keeps them for Prometheus).
 * Bytes are from the device's side, as the API counts them: rx is what the device received.
 */
export interface PanelObserver {
  /** One API answer: its route's template (`/api/v1/devices/:id`; `unmatched` when none matched), status and time. */
  httpRequest(method: string, route: string, statusCode: number, seconds: number): void;
  /** Usage a node reported, stored now (each batch once). */
  usageStored(rxBytes: number, txBytes: number): void;
  /** One node's usage collected and stored, and how long it took. */
  usageCollected(seconds: number): void;
  /** One delivery attempt's result, or a delivery failed without one. */
  webhookDelivery(result: DeliveryResult): void;
  /** The fleet as FleetCensus last counted it. */
  fleetCounted(counts: FleetCounts): void;
  /** A console sign-in refused before its password was checked: which budget was spent. */
  signInRefused(budget: SignInBudget): void;
}

/** For a panel without a metrics listener, and the services and workers tests build. */
export const UNOBSERVED_PANEL: PanelObserver = {
  httpRequest: () => {},
  usageStored: () => {},
  usageCollected: () => {},
  webhookDelivery: () => {},
  fleetCounted: () => {},
  signInRefused: () => {},
};

/**
 * Counts devices by status and online, servers by the status the API shows (node_offline included), nodes,
 * and the pending webhook deliveries and mails: one grouped pass over the devices, the rest on small tables
 * or indexes.
 */
export async function countFleet(db: Db, clock: Clock, calendar: Calendar): Promise<FleetCounts> {
  const nowMs = clock.nowMs();
  const at = {
    nowIso: isoAt(nowMs),
    currentMonth: calendar.month(nowMs),
    onlineSinceIso: isoAt(nowMs - ONLINE_WINDOW_MS),
  };
  const [devices, serverRows, nodes, webhookDeliveriesPending, mailPending] = await Promise.all([
    countDevices(db, at),
    countServersByStatus(db),
    countNodesByStatus(db),
    countPending(db, 'webhook_deliveries'),
    countPending(db, 'mail_outbox'),
  ]);
  const servers = new Map<ServerProtocol, Map<ServerStatus, number>>();
  for (const row of serverRows) {
    const status = effectiveServerStatus(row.status, row.node_status === 'online');
    const ofProtocol = servers.get(row.protocol) ?? new Map<ServerStatus, number>();
    ofProtocol.set(status, (ofProtocol.get(status) ?? 0) + row.servers);
    servers.set(row.protocol, ofProtocol);
  }
  return {
    devices: devices.byStatus,
    devicesOnline: devices.online,
    servers,
    nodes,
    webhookDeliveriesPending,
    mailPending,
  };
}
