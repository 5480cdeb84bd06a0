import { renderClientConfig } from '../domain/client-config.ts';
import type { QuotaAction } from '../domain/plans.ts';
import type { Clock } from '../domain/clock.ts';
import { type DeviceStatus, deviceStatus, isOnline, type LimitPeriod, ONLINE_WINDOW_MS } from '../domain/devices.ts';
import type { Obfuscation } from '../domain/protocols.ts';
import type { Usage } from '../domain/usage.ts';
import { type Page, type PageRequest, toPage } from '../domain/paging.ts';
import type { Db, Queryable } from '../store/db.ts';
import type { DeviceRow } from '../store/devices.ts';
import { findNode, findNodeShared, type NodeRow } from '../store/nodes.ts';
import type { ReusedRows } from '../store/query-shapes.ts';
import { findServer, findServerShared, type ServerRow, serverObfuscation, stringArray } from '../store/servers.ts';
import { KeptPages } from './row-views.ts';
import type { UsageService } from './usage.ts';

/** A device as docs/api.md "Devices" shows it, without its config (DeviceBody adds it). */
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
  plan_id: number | null;
  quota_action: QuotaAction;
  throttle_speed: number | null;
  top_up_bytes: number;
  month_usage: Usage;
  created_at: string;
  updated_at: string;
}

/** A device as the API answers it: docs/api.md "Devices" with its current config. */
export type DeviceBody = DeviceView & { config: string };

/** The device together with the server and node it is on: what configs and events need. */
export interface PlacedDevice {
  device: DeviceView;
  row: DeviceRow;
  server: ServerRow;
  node: NodeRow;
}

/** A server row's JSON lists, which a config is made of. */
interface ServerLists {
  dns: string[];
  clientAllowedIps: string[];
  obfuscation: Obfuscation | null;
}

function serverLists(server: ServerRow): ServerLists {
  return {
    dns: stringArray(server.dns),
    clientAllowedIps: stringArray(server.client_allowed_ips),
    obfuscation: serverObfuscation(server),
  };
}

function parseMetadata(text: string | null): Record<string, unknown> | null {
  if (text === null) return null;
  const value: unknown = JSON.parse(text);
  const isRecord = typeof value === 'object' && value !== null && !Array.isArray(value);
  return isRecord ? Object.fromEntries(Object.entries(value)) : null;
}

type Places = Map<number, { server: ServerRow; node: NodeRow }>;

async function placesWith(
  rows: readonly DeviceRow[],
  server: (id: number) => Promise<ServerRow | undefined>,
  node: (id: number) => Promise<NodeRow | undefined>,
): Promise<Places> {
  const places: Places = new Map();
  for (const id of new Set(rows.map((r) => r.server_id))) {
    const serverRow = await server(id);
    const nodeRow = serverRow && (await node(serverRow.node_id));
    if (serverRow && nodeRow) places.set(id, { server: serverRow, node: nodeRow });
  }
  return places;
}

/** The earliest of the future instants among `instantsMs` (null: none), or `untilMs`. */
function nextInstant(nowMs: number, untilMs: number, instantsMs: readonly (number | null)[]): number {
  let next = untilMs;
  for (const instant of instantsMs) if (instant !== null && instant > nowMs && instant < next) next = instant;
  return next;
}

/** A listed device's body and the instants between which it shows what it would if made again. */
interface ListedBody {
  body: DeviceBody;
  fromMs: number;
  untilMs: number;
}

/**
 * How a device row is shown: its view (status, usage), the server and node it is on, its client config.
 * A page of the device list made of reused rows (listDevices) is kept (KeptPages) and so is each of its
 * devices' body: while the rows are reused nothing was committed, so the servers and their configs are as
 * they were; what changes with the time alone (the next month, the expiry, the handshake leaving the online
 * window) bounds how long a body, and the page holding it, is kept.
 */
export class DeviceViews {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #usage: UsageService;
  readonly #pages = new KeptPages<DeviceRow, DeviceBody>();
  readonly #listed = new WeakMap<Readonly<DeviceRow>, ListedBody>();

  constructor(db: Db, clock: Clock, usage: UsageService) {
    this.#db = db;
    this.#clock = clock;
    this.#usage = usage;
  }

  view(row: DeviceRow): DeviceView {
    return this.#viewAt(row, this.#clock.nowMs());
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
      plan_id: row.plan_id,
      quota_action: row.quota_action,
      throttle_speed: row.throttle_speed,
      top_up_bytes: this.#usage.topUp(row),
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

  /**
   * A page of the device list made of reused rows, leaving out a row whose server was deleted since it was read:
   * kept, with each body, while the rows are reused and until the first instant that changes a body.
   */
  async listedPage(rows: ReusedRows<DeviceRow>, request: PageRequest): Promise<Page<DeviceBody>> {
    const nowMs = this.#clock.nowMs();
    const kept = this.#pages.kept(rows, request, nowMs);
    if (kept !== undefined) return kept;
    const { data, has_more } = toPage(rows.rows, request);
    const places = await this.#placesOf(data);
    const lists = new Map<ServerRow, ServerLists>();
    let fromMs = Number.NEGATIVE_INFINITY;
    let untilMs = Number.POSITIVE_INFINITY;
    const bodies: DeviceBody[] = [];
    for (const row of data) {
      const place = places.get(row.server_id);
      if (place === undefined) continue;
      let listed = this.#listed.get(row);
      if (listed === undefined || nowMs < listed.fromMs || listed.untilMs <= nowMs) {
        const placed = { device: this.#viewAt(row, nowMs), row, ...place };
        listed = { body: this.#bodyWith(placed, lists), fromMs: nowMs, untilMs: this.#viewUntilMs(row, nowMs) };
        this.#listed.set(row, listed);
      }
      fromMs = Math.max(fromMs, listed.fromMs);
      untilMs = Math.min(untilMs, listed.untilMs);
      bodies.push(listed.body);
    }
    return this.#pages.keep(rows, request, { data: bodies, has_more }, fromMs, untilMs);
  }

  /** A page of rows read anew (a search): each body made now. */
  async freshPage(rows: readonly DeviceRow[], request: PageRequest): Promise<Page<DeviceBody>> {
    const { data, has_more } = toPage(rows, request);
    const places = await this.#placesOf(data);
    const lists = new Map<ServerRow, ServerLists>();
    const nowMs = this.#clock.nowMs();
    const bodies = data.flatMap((row) => {
      const place = places.get(row.server_id);
      return place ? [this.#bodyWith({ device: this.#viewAt(row, nowMs), row, ...place }, lists)] : [];
    });
    return { data: bodies, has_more };
  }

  /** The first instant after `nowMs` that changes the row's view: the next month, the expiry, the online window. */
  #viewUntilMs(row: DeviceRow, nowMs: number): number {
    return nextInstant(nowMs, this.#usage.calendar.nextMonthStartMs(nowMs), [
      row.expires_at === null ? null : Date.parse(row.expires_at),
      row.last_handshake === null ? null : Date.parse(row.last_handshake) + ONLINE_WINDOW_MS,
    ]);
  }

  /** The server and node of each server the rows are on, each read once, shared rows outside a transaction. */
  #placesOf(rows: readonly DeviceRow[]): Promise<Places> {
    return placesWith(
      rows,
      (id) => findServerShared(this.#db, id),
      (id) => findNodeShared(this.#db, id),
    );
  }

  /** `#placesOf` read through `db` (a transaction that holds the only SQLite connection). */
  placesIn(db: Queryable, rows: readonly DeviceRow[]): Promise<Places> {
    return placesWith(
      rows,
      (id) => findServer(db, id),
      (id) => findNode(db, id),
    );
  }

  /** A row whose server or node is missing is an internal error: devices refer to their server. */
  #placed(row: DeviceRow, places: Places): PlacedDevice {
    const place = places.get(row.server_id);
    if (!place) throw new Error(`device ${row.id} refers to a missing server or node`);
    return { device: this.view(row), row, ...place };
  }

  /** The device's body: its view with its config as it is now (after a move too). */
  body(placed: PlacedDevice): DeviceBody {
    return this.#bodyWith(placed, new Map());
  }

  /** `body`, the server's lists parsed once per server row in `lists` (a page's devices share a few servers). */
  #bodyWith(placed: PlacedDevice, lists: Map<ServerRow, ServerLists>): DeviceBody {
    let parsed = lists.get(placed.server);
    if (parsed === undefined) {
      parsed = serverLists(placed.server);
      lists.set(placed.server, parsed);
    }
    return { ...placed.device, config: this.#render(placed, false, parsed) };
  }

  /** The wg-quick config of the device as it is now (after a move too). */
  configText(placed: PlacedDevice, killSwitch: boolean): string {
    return this.#render(placed, killSwitch, serverLists(placed.server));
  }

  #render(placed: PlacedDevice, killSwitch: boolean, lists: ServerLists): string {
    const { row, server } = placed;
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
        obfuscation: lists.obfuscation,
      },
      { killSwitch },
    );
  }
}
