import { renderClientConfig } from '../domain/client-config.ts';
import type { Clock } from '../domain/clock.ts';
import { type DeviceStatus, deviceStatus, isOnline, type LimitPeriod, ONLINE_WINDOW_MS } from '../domain/devices.ts';
import type { Usage } from '../domain/usage.ts';
import type { Db, Queryable } from '../store/db.ts';
import type { DeviceRow } from '../store/devices.ts';
import { findNode, findNodeShared, type NodeRow } from '../store/nodes.ts';
import { findServer, findServerShared, type ServerRow, stringArray } from '../store/servers.ts';
import type { UsageService } from './usage.ts';

/** A device as docs/api.md "Devices" shows it, without its config (routes add it). */
export interface DeviceView {
  id: number;
  server_id: number;
  name: string;
  external_id: string | null;
  metadata: Record<string, unknown> | null;
  address: string;
  address6: string | null;
  public_key: string;
  client_key: boolean;
  enabled: boolean;
  status: DeviceStatus;
  online: boolean;
  last_handshake: string | null;
  data_limit: number;
  limit_period: LimitPeriod;
  period_usage: Usage;
  usage_reset_at: string;
  expires_at: string | null;
  speed_limit: number;
  month_usage: Usage;
  created_at: string;
  updated_at: string;
}

/** The device together with the server and node it is on: what configs and events need. */
export interface PlacedDevice {
  device: DeviceView;
  row: DeviceRow;
  server: ServerRow;
  node: NodeRow;
}

/**
 * A server row's JSON lists, parsed once per row object: a page of devices shares its servers' rows,
 * so 200 configs of one server parse them once, not 200 times.
 */
const parsedLists = new WeakMap<ServerRow, { dns: string[]; clientAllowedIps: string[] }>();

function serverLists(server: ServerRow): { dns: string[]; clientAllowedIps: string[] } {
  let lists = parsedLists.get(server);
  if (lists === undefined) {
    lists = { dns: stringArray(server.dns), clientAllowedIps: stringArray(server.client_allowed_ips) };
    parsedLists.set(server, lists);
  }
  return lists;
}

function parseMetadata(text: string | null): Record<string, unknown> | null {
  if (text === null) return null;
  const value: unknown = JSON.parse(text);
  const isRecord = typeof value === 'object' && value !== null && !Array.isArray(value);
  return isRecord ? Object.fromEntries(Object.entries(value)) : null;
}

async function placesWith(
  rows: readonly DeviceRow[],
  server: (id: number) => Promise<ServerRow | undefined>,
  node: (id: number) => Promise<NodeRow | undefined>,
): Promise<Map<number, { server: ServerRow; node: NodeRow }>> {
  const places = new Map<number, { server: ServerRow; node: NodeRow }>();
  for (const id of new Set(rows.map((r) => r.server_id))) {
    const serverRow = await server(id);
    const nodeRow = serverRow && (await node(serverRow.node_id));
    if (serverRow && nodeRow) places.set(id, { server: serverRow, node: nodeRow });
  }
  return places;
}

/** The server columns a client config is made of. */
const CONFIG_COLUMNS = [
  'public_key',
  'endpoint',
  'listen_port',
  'mtu',
  'dns',
  'client_allowed_ips',
  'persistent_keepalive',
] as const satisfies readonly (keyof ServerRow)[];

function sameConfigColumns(a: ServerRow, b: ServerRow): boolean {
  return a === b || CONFIG_COLUMNS.every((column) => a[column] === b[column]);
}

/** The earliest of the future instants among `instantsMs` (null: none), or `untilMs`. */
function nextInstant(nowMs: number, untilMs: number, instantsMs: readonly (number | null)[]): number {
  let next = untilMs;
  for (const instant of instantsMs) if (instant !== null && instant > nowMs && instant < next) next = instant;
  return next;
}

/**
 * How a device row is shown: its view (status, usage), the server and node it is on, its client config.
 * A view and a config are kept per row object: the list's rows are reused while nothing is committed
 * (see listDevices), so a page shown again computes nothing. A view holds until the first instant that
 * changes it (the next month, the expiry, the handshake leaving the online window); a config while the
 * server's config columns are the same.
 */
export class DeviceViews {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #usage: UsageService;

  constructor(db: Db, clock: Clock, usage: UsageService) {
    this.#db = db;
    this.#clock = clock;
    this.#usage = usage;
  }

  readonly #views = new WeakMap<DeviceRow, { view: DeviceView; fromMs: number; untilMs: number }>();
  readonly #configs = new WeakMap<DeviceRow, { server: ServerRow; text: string }>();

  view(row: DeviceRow): DeviceView {
    const nowMs = this.#clock.nowMs();
    const kept = this.#views.get(row);
    if (kept !== undefined && kept.fromMs <= nowMs && nowMs < kept.untilMs) return kept.view;
    const view = this.#viewAt(row, nowMs);
    const untilMs = nextInstant(nowMs, this.#usage.calendar.nextMonthStartMs(nowMs), [
      row.expires_at === null ? null : Date.parse(row.expires_at),
      row.last_handshake === null ? null : Date.parse(row.last_handshake) + ONLINE_WINDOW_MS,
    ]);
    this.#views.set(row, { view, fromMs: nowMs, untilMs });
    return view;
  }

  #viewAt(row: DeviceRow, nowMs: number): DeviceView {
    const lastHandshakeMs = row.last_handshake === null ? null : Date.parse(row.last_handshake);
    return {
      id: row.id,
      server_id: row.server_id,
      name: row.name,
      external_id: row.external_id,
      metadata: parseMetadata(row.metadata),
      address: row.address,
      address6: row.address6,
      public_key: row.public_key,
      client_key: row.private_key === null,
      enabled: row.enabled === 1,
      status: deviceStatus(
        {
          enabled: row.enabled === 1,
          expiresAtMs: row.expires_at === null ? null : Date.parse(row.expires_at),
          limitReached: this.#usage.isLimitReached(row),
        },
        nowMs,
      ),
      online: isOnline(lastHandshakeMs, nowMs),
      last_handshake: row.last_handshake,
      data_limit: row.data_limit,
      limit_period: row.limit_period,
      period_usage: this.#usage.periodUsage(row),
      usage_reset_at: this.#usage.periodStart(row),
      expires_at: row.expires_at,
      speed_limit: row.speed_limit,
      month_usage: this.#usage.monthUsage(row),
      created_at: row.created_at,
      updated_at: row.updated_at,
    };
  }

  /** The device after its row changed, on the same server. */
  changed(placed: PlacedDevice, row: DeviceRow): PlacedDevice {
    return { ...placed, row, device: this.view(row) };
  }

  async place(row: DeviceRow): Promise<PlacedDevice> {
    return this.#placed(row, await this.#placesOf([row]));
  }

  async placeAll(rows: readonly DeviceRow[]): Promise<PlacedDevice[]> {
    const places = await this.#placesOf(rows);
    return rows.map((row) => this.#placed(row, places));
  }

  /** A page of rows on their servers and nodes, leaving out a row whose server was deleted since it was read. */
  async placePage(rows: readonly DeviceRow[]): Promise<PlacedDevice[]> {
    const places = await this.#placesOf(rows);
    return rows.flatMap((row) => {
      const place = places.get(row.server_id);
      return place ? [{ device: this.view(row), row, ...place }] : [];
    });
  }

  /** The server and node of each server the rows are on, each read once, shared rows outside a transaction. */
  #placesOf(rows: readonly DeviceRow[]): Promise<Map<number, { server: ServerRow; node: NodeRow }>> {
    return placesWith(
      rows,
      (id) => findServerShared(this.#db, id),
      (id) => findNodeShared(this.#db, id),
    );
  }

  /** `#placesOf` read through `db` (a transaction that holds the only SQLite connection). */
  placesIn(db: Queryable, rows: readonly DeviceRow[]): Promise<Map<number, { server: ServerRow; node: NodeRow }>> {
    return placesWith(
      rows,
      (id) => findServer(db, id),
      (id) => findNode(db, id),
    );
  }

  /** A row whose server or node is missing is an internal error: devices refer to their server. */
  #placed(row: DeviceRow, places: ReadonlyMap<number, { server: ServerRow; node: NodeRow }>): PlacedDevice {
    const place = places.get(row.server_id);
    if (!place) throw new Error(`device ${row.id} refers to a missing server or node`);
    return { device: this.view(row), row, ...place };
  }

  /** The wg-quick config of the device as it is now (after a move too). */
  configText(placed: PlacedDevice, killSwitch: boolean): string {
    if (killSwitch) return this.#render(placed, true);
    const kept = this.#configs.get(placed.row);
    if (kept !== undefined && sameConfigColumns(kept.server, placed.server)) return kept.text;
    const text = this.#render(placed, false);
    this.#configs.set(placed.row, { server: placed.server, text });
    return text;
  }

  #render(placed: PlacedDevice, killSwitch: boolean): string {
    const { row, server } = placed;
    const lists = serverLists(server);
    return renderClientConfig(
      {
        privateKey: row.private_key,
        address: row.address,
        address6: row.address6,
        dns: lists.dns,
        mtu: server.mtu,
        serverPublicKey: server.public_key,
        clientAllowedIps: lists.clientAllowedIps,
        endpoint: server.endpoint,
        listenPort: server.listen_port,
        persistentKeepalive: server.persistent_keepalive,
      },
      { killSwitch },
    );
  }
}
