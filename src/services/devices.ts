import { type Clock, isoAt, normaliseInstant } from '../domain/clock.ts';
import {
  type DeviceStatus,
  deviceStatus,
  isOnline,
  type LimitPeriod,
  NAME_MAX,
  metadataText,
  nameFromExternalId,
  serverRoom,
} from '../domain/devices.ts';
import { AppError } from '../domain/errors.ts';
import type { EventKind } from '../domain/events.ts';
import { type Page, type PageRequest, toPage } from '../domain/paging.ts';
import { intToIp, parseCidr, parseSubnet, type Subnet } from '../domain/subnets.ts';
import { generateKeyPair, isUsablePublicKey, isValidKey } from '../domain/wireguard-keys.ts';
import type { Usage } from '../domain/usage.ts';
import type { Db, Tx } from '../store/db.ts';
import { isUniqueViolation, violationText } from '../store/constraint-violations.ts';
import type { Store } from '../store/open.ts';
import { AddressAllocator } from './address-allocator.ts';
import {
  countDevicesByServer,
  deleteDevice,
  type DeviceRow,
  findDevice,
  insertDevice,
  listDevices,
  countDevicesOfServer,
  isKeyTaken,
  isNameTaken,
  namesStartingWith,
  updateDevice,
} from '../store/devices.ts';
import { findNode, type NodeRow } from '../store/nodes.ts';
import { findServer, listRunningServers, lockServer, type ServerRow, stringArray } from '../store/servers.ts';
import { peerChange } from './desired-state.ts';
import { deleteDeviceUsage } from '../store/usage.ts';
import type { UsageReportView, UsageService } from './usage.ts';
import { type Change, type ChangePublisher, type CommitHook, change, mergeChanges, type PeerPush } from './changes.ts';
import { deviceEventDraft } from './events.ts';
import { renderClientConfig } from '../domain/client-config.ts';

/** A device as spec §2.1 shows it, without its config (routes add it). */
export interface DeviceView {
  id: number;
  server_id: number;
  name: string;
  external_id: string | null;
  metadata: Record<string, unknown> | null;
  address: string;
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

export interface DeviceCreateInput {
  serverId: number | 'auto';
  country?: string;
  city?: string;
  publicKey?: string;
  name?: string;
  externalId?: string;
  metadata?: object | null;
  enabled?: boolean;
  dataLimit?: number;
  limitPeriod?: LimitPeriod;
  expiresAt?: string | null;
  speedLimit?: number;
}

export type DevicePatch = Partial<Omit<DeviceCreateInput, 'serverId' | 'country' | 'city' | 'publicKey'>>;

/** The device together with the server and node it is on: what configs and events need. */
export interface PlacedDevice {
  device: DeviceView;
  row: DeviceRow;
  server: ServerRow;
  node: NodeRow;
}

/** What creating one device needs, decided before its transaction. */
interface NewDevicePlan {
  input: DeviceCreateInput;
  server: ServerRow;
  node: NodeRow;
  subnet: Subnet;
  keys: { publicKey: string; privateKey: string | null };
  metadata: string | null;
  /** `expires_at` as stored (UTC text), null for never. */
  expiresAt: string | null;
  actor: string;
  onCommit: CommitHook<PlacedDevice> | undefined;
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

/** Room left for a `-N` suffix when a name is made from a long external id. */
const SUFFIX_ROOM = 8;

function parseMetadata(text: string | null): Record<string, unknown> | null {
  if (text === null) return null;
  const value: unknown = JSON.parse(text);
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? Object.fromEntries(Object.entries(value)) : null;
}

export class DeviceService {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #usage: UsageService;
  readonly #changes: ChangePublisher;
  readonly #addresses = new AddressAllocator();

  constructor(store: Store, clock: Clock, usage: UsageService, changes: ChangePublisher) {
    this.#store = store;
    this.#clock = clock;
    this.#usage = usage;
    this.#changes = changes;
  }

  /** Devices of the server were removed elsewhere (a group delete): its addresses are read again. */
  addressesFreed(serverId: number): void {
    this.#addresses.forget(serverId);
  }

  get #db(): Db {
    return this.#store.db;
  }

  view(row: DeviceRow): DeviceView {
    const nowMs = this.#clock.nowMs();
    const lastHandshakeMs = row.last_handshake === null ? null : Date.parse(row.last_handshake);
    return {
      id: row.id,
      server_id: row.server_id,
      name: row.name,
      external_id: row.external_id,
      metadata: parseMetadata(row.metadata),
      address: row.address,
      public_key: row.public_key,
      client_key: row.private_key === null,
      enabled: row.enabled === 1,
      status: deviceStatus(
        { enabled: row.enabled === 1, expiresAtMs: row.expires_at === null ? null : Date.parse(row.expires_at), limitReached: this.#usage.isLimitReached(row) },
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

  async #place(row: DeviceRow): Promise<PlacedDevice> {
    const server = await findServer(this.#db, row.server_id);
    const node = server && (await findNode(this.#db, server.node_id));
    if (!server || !node) throw new Error(`device ${row.id} refers to a missing server or node`);
    return { device: this.view(row), row, server, node };
  }

  async get(id: number): Promise<PlacedDevice> {
    const row = await findDevice(this.#db, id);
    if (!row) throw new AppError('not_found', `device ${id} not found`);
    return this.#place(row);
  }

  async list(filter: { serverId?: number; externalId?: string; status?: DeviceStatus }, page: PageRequest): Promise<Page<PlacedDevice>> {
    const rows = toPage(await listDevices(this.#db, { ...filter, nowIso: isoAt(this.#clock.nowMs()), currentMonth: this.#usage.currentMonth() }, page), page);
    const servers = new Map<number, { server: ServerRow; node: NodeRow }>();
    for (const id of new Set(rows.data.map((r) => r.server_id))) {
      const server = await findServer(this.#db, id);
      const node = server && (await findNode(this.#db, server.node_id));
      if (server && node) servers.set(id, { server, node });
    }
    return {
      data: rows.data.flatMap((row) => {
        const place = servers.get(row.server_id);
        return place ? [{ device: this.view(row), row, ...place }] : [];
      }),
      has_more: rows.has_more,
    };
  }

  /** Spec §2.4 for the device. */
  async usageReport(id: number): Promise<UsageReportView> {
    const row = await findDevice(this.#db, id);
    if (!row) throw new AppError('not_found', `device ${id} not found`);
    return this.#usage.report(row);
  }

  /** The wg-quick config of the device as it is now (after a move too). */
  configText(placed: PlacedDevice, killSwitch: boolean): string {
    const { row, server } = placed;
    const lists = serverLists(server);
    return renderClientConfig(
      {
        privateKey: row.private_key,
        address: row.address,
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

  /** `server_id: auto`: the running server with the fewest devices that still has room, in the place asked for. */
  async #pickServer(country: string | undefined, city: string | undefined, exclude?: number): Promise<ServerRow> {
    const [servers, counts] = await Promise.all([listRunningServers(this.#db), countDevicesByServer(this.#db)]);
    const candidates = servers.filter(
      (s) =>
        s.id !== exclude &&
        (country === undefined || s.country === country.toUpperCase()) &&
        (city === undefined || s.city.toLowerCase() === city.toLowerCase()) &&
        (counts.get(s.id) ?? 0) < serverRoom(s.capacity, parseSubnet(s.subnet)),
    );
    candidates.sort((a, b) => (counts.get(a.id) ?? 0) - (counts.get(b.id) ?? 0) || a.id - b.id);
    const [best] = candidates;
    if (!best) throw new AppError('no_server_available', 'no running server with room matches; add a server or widen country/city');
    return best;
  }

  async #serverFor(input: DeviceCreateInput): Promise<ServerRow> {
    if (input.serverId === 'auto') return this.#pickServer(input.country, input.city);
    if (input.country !== undefined || input.city !== undefined) {
      throw new AppError('validation_failed', 'country and city go only with server_id "auto"', {
        ...(input.country !== undefined ? { country: 'only with server_id auto' } : {}),
        ...(input.city !== undefined ? { city: 'only with server_id auto' } : {}),
      });
    }
    const server = await findServer(this.#db, input.serverId);
    if (!server || server.status === 'deploying') throw new AppError('validation_failed', `server ${input.serverId} does not exist`, { server_id: 'no such server' });
    return server;
  }

  /**
   * Creates a device: the address is the lowest free one of its server, taken while the server's
   * row is locked, and the peer is on the node before the transaction commits; if the node cannot
   * take it, nothing is saved (deploy_failed).
   */
  async create(input: DeviceCreateInput, actor: string, onCommit?: CommitHook<PlacedDevice>): Promise<PlacedDevice> {
    const metadata = input.metadata === undefined ? null : metadataText(input.metadata);
    const expiresAt = normaliseInstant(input.expiresAt ?? null, 'expires_at');
    if (input.publicKey !== undefined && !isValidKey(input.publicKey)) {
      throw new AppError('validation_failed', 'public_key must be a WireGuard public key: 32 bytes in base64 (44 characters)', { public_key: 'not a WireGuard key' });
    }
    if (input.publicKey !== undefined && !isUsablePublicKey(input.publicKey)) {
      const why = 'public_key is a point of small order (such as all zeros): no WireGuard handshake succeeds with it';
      throw new AppError('validation_failed', why, {
        public_key: 'a low-order point, not a real public key',
      });
    }
    const server = await this.#serverFor(input);
    const node = await findNode(this.#db, server.node_id);
    if (!node) throw new Error(`server ${server.id} refers to missing node ${server.node_id}`);
    const keys = input.publicKey === undefined ? generateKeyPair() : { publicKey: input.publicKey, privateKey: null };
    const subnet = parseSubnet(server.subnet);
    // Another panel may take the same address at the same moment (the unique index says so): the
    // bitmap is read again and the create tried again.
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#insertDevice({ input, server, node, subnet, keys, metadata, expiresAt, actor, onCommit });
      } catch (error) {
        this.#addresses.forget(server.id);
        if (!isUniqueViolation(error)) throw error;
        const violated = violationText(error);
        if (/address/.test(violated) && attempt < 3) continue;
        if (/public_key|server_key/.test(violated)) throw new AppError('validation_failed', 'public_key is used by another device on this server', { public_key: 'in use on this server' });
        throw new AppError('name_taken', `a device named ${input.name ?? ''} is on this server already`, { name: 'taken on this server' });
      }
    }
  }

  async #insertDevice(plan: NewDevicePlan): Promise<PlacedDevice> {
    const { input, server, node, subnet, keys, metadata, expiresAt, actor, onCommit } = plan;
    const now = isoAt(this.#clock.nowMs());
    return this.#changes.commit(async (tx) => {
      const address = await this.#claimSlot(tx, server, subnet, { name: input.name, publicKey: keys.publicKey });
      // Candidates are the external id cut to leave room for a -N suffix: every one starts with this.
      const names = input.name === undefined && input.externalId !== undefined ? await namesStartingWith(tx, server.id, input.externalId.slice(0, NAME_MAX - SUFFIX_ROOM)) : new Set<string>();
      let row = await insertDevice(tx, {
        server_id: server.id,
        name: input.name ?? (input.externalId !== undefined ? nameFromExternalId(input.externalId, names) : `new-${keys.publicKey}`),
        external_id: input.externalId ?? null,
        metadata,
        address: intToIp(address),
        public_key: keys.publicKey,
        private_key: keys.privateKey,
        enabled: (input.enabled ?? true) ? 1 : 0,
        data_limit: input.dataLimit ?? 0,
        limit_period: input.limitPeriod ?? 'monthly',
        usage_reset_at: now,
        expires_at: expiresAt,
        expiry_due_at: expiresAt,
        speed_limit: input.speedLimit ?? 0,
        last_handshake: null,
        created_at: now,
        updated_at: now,
      });
      this.#addresses.taken(server.id, subnet, address);
      if (input.name === undefined && input.externalId === undefined) {
        row = await updateDevice(tx, row.id, { name: nameFromExternalId(`device-${row.id}`, await namesStartingWith(tx, server.id, `device-${row.id}`)) });
      }
      const summary = `device ${row.name} created on server ${server.name}`;
      const created = deviceEventDraft('device.created', row, server, node, actor, summary);
      const settled = await this.#usage.settleLimit(tx, row, actor);
      row = settled.row;
      const result: PlacedDevice = { device: this.view(row), row, server, node };
      const own = change({
        activity: [
          { resource: 'device', resourceId: row.id, verb: 'created', summary, actor, before: null, after: row },
        ],
        // The peer is on the node before the row commits: a node that cannot take it saves nothing.
        deploy: this.#peers(node, server.id, undefined, row),
      });
      return { result, change: mergeChanges([change({ events: [created] }), settled.change, own]) };
    }, onCommit);
  }

  /**
   * Takes a place on the server for a device, under the server's lock: room within capacity, a
   * free name and key, and the lowest free address (returned).
   */
  async #claimSlot(tx: Tx, server: ServerRow, subnet: Subnet, device: { name: string | undefined; publicKey: string }): Promise<number> {
    await lockServer(tx, server.id, this.#store.dialect);
    if ((await countDevicesOfServer(tx, server.id)) >= serverRoom(server.capacity, subnet)) throw new AppError('server_full', `server ${server.name} is full (${server.capacity} devices)`);
    if (device.name !== undefined && (await isNameTaken(tx, server.id, device.name))) {
      throw new AppError('name_taken', `a device named ${device.name} is on server ${server.name} already`, { name: 'taken on this server' });
    }
    if (await isKeyTaken(tx, server.id, device.publicKey)) {
      throw new AppError('validation_failed', `the public key is used by another device on server ${server.name}`, { public_key: 'in use on this server' });
    }
    const address = await this.#addresses.lowestFree(tx, server.id, subnet, parseCidr(server.address).address);
    if (address === undefined) throw new AppError('server_full', `server ${server.name} has no free address left`);
    return address;
  }

  /**
   * Changes a device. The change is saved first; the node gets it before the answer, or the
   * caller hears apply_failed with the change saved (the node's next resync converges it).
   */
  async update(id: number, patch: DevicePatch, actor: string): Promise<PlacedDevice> {
    const before = await this.get(id);
    try {
      return await this.#changes.commit(async (tx) => {
        const detail = (changed: DeviceRow, kind: string) => `device ${changed.name}: ${kind}`;
        const updated = await this.updateIn(tx, before, patch, actor, detail);
        return { result: { ...before, row: updated.row, device: this.view(updated.row) }, change: updated.change };
      });
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      throw new AppError('name_taken', `a device named ${patch.name ?? ''} is on this server already`, { name: 'taken on this server' });
    }
  }

  /**
   * One device's change inside a transaction, with its limit mark, returning what changed (events,
   * activity, the peer its node needs after commit): a group changes all of its devices in one.
   * `detail` words an event of the kind (`updated`, `enabled`…).
   */
  async updateIn(
    tx: Tx,
    before: PlacedDevice,
    patch: DevicePatch,
    actor: string,
    detail: (row: DeviceRow, kind: string) => string,
  ): Promise<{ row: DeviceRow; change: Change }> {
    const expiresAt = patch.expiresAt === undefined ? undefined : normaliseInstant(patch.expiresAt, 'expires_at');
    const changed = await updateDevice(tx, before.row.id, {
      name: patch.name,
      external_id: patch.externalId,
      metadata: patch.metadata === undefined ? undefined : metadataText(patch.metadata),
      enabled: patch.enabled === undefined ? undefined : patch.enabled ? 1 : 0,
      data_limit: patch.dataLimit,
      limit_period: patch.limitPeriod,
      expires_at: expiresAt,
      // A new expiry is due for its own device.expired.
      expiry_due_at: expiresAt === undefined || expiresAt === before.row.expires_at ? undefined : expiresAt,
      speed_limit: patch.speedLimit,
      updated_at: isoAt(this.#clock.nowMs()),
    });
    const kinds: EventKind[] = ['device.updated'];
    if (before.row.enabled !== changed.enabled) kinds.push(changed.enabled === 1 ? 'device.enabled' : 'device.disabled');
    const events = kinds.map((kind) => {
      const words = detail(changed, kind.slice('device.'.length));
      return deviceEventDraft(kind, changed, before.server, before.node, actor, words);
    });
    const { row: settled, change: limit } = await this.#usage.settleLimit(tx, changed, actor);
    const own = change({
      activity: [{
        resource: 'device', resourceId: settled.id, verb: 'updated', summary: detail(settled, 'updated'), actor,
        before: before.row, after: settled,
      }],
      apply: this.#peers(before.node, before.server.id, before.row, settled),
    });
    return { row: settled, change: mergeChanges([change({ events }), limit, own]) };
  }

  /**
   * Restarts the count toward the data limit from now (spec §4.2); the history stays. The node gets
   * the whole allowance back at once, so a device cut off at its limit may connect again.
   */
  async resetUsage(id: number, actor: string, onCommit?: CommitHook<PlacedDevice>): Promise<PlacedDevice> {
    const before = await this.get(id);
    return this.#changes.commit(async (tx) => {
      const reset = await this.resetUsageIn(tx, before, actor, `usage of device ${before.row.name} reset`);
      return { result: { ...before, row: reset.row, device: this.view(reset.row) }, change: reset.change };
    }, onCommit);
  }

  /** The reset of one device inside a transaction, returning what changed (a group resets all its devices in one). */
  async resetUsageIn(
    tx: Tx,
    placed: PlacedDevice,
    actor: string,
    detail: string,
  ): Promise<{ row: DeviceRow; change: Change }> {
    const row = await updateDevice(tx, placed.row.id, { usage_reset_at: isoAt(this.#clock.nowMs()), period_rx: 0, period_tx: 0, limit_reached_at: null });
    return {
      row,
      change: change({
        events: [deviceEventDraft('device.usage_reset', row, placed.server, placed.node, actor, detail)],
        activity: [{
          resource: 'device', resourceId: row.id, verb: 'usage_reset', summary: detail, actor,
          before: placed.row, after: row,
        }],
        apply: this.#peers(placed.node, placed.server.id, placed.row, row),
      }),
    };
  }

  /** The peer change a device's node needs after `before` became `after`, if any. */
  #peers(node: NodeRow, serverId: number, before: DeviceRow | undefined, after: DeviceRow): PeerPush[] {
    const peers = peerChange(before, after, this.#usage);
    return peers ? [{ node, serverId, change: peers }] : [];
  }

  /** Places rows already read (a group's devices) on their servers and nodes. */
  async placeAll(rows: readonly DeviceRow[]): Promise<PlacedDevice[]> {
    return Promise.all(rows.map((row) => this.#place(row)));
  }

  /**
   * Moves a device to another server (spec §4.2): same id, keys, name, limits and usage history; a
   * new address there. The peer joins the new server before the move commits, then leaves the old
   * one (a node that misses the removal drops it at its next resync).
   */
  async move(id: number, target: number | 'auto', actor: string, onCommit?: CommitHook<PlacedDevice>): Promise<PlacedDevice> {
    const before = await this.get(id);
    const server = target === 'auto' ? await this.#pickServer(undefined, undefined, before.server.id) : await findServer(this.#db, target);
    if (!server || server.status === 'deploying') throw new AppError('validation_failed', `server ${String(target)} does not exist`, { server_id: 'no such server' });
    if (server.id === before.server.id) throw new AppError('validation_failed', `device ${id} is on server ${server.id} already`, { server_id: 'the current server' });
    const node = await findNode(this.#db, server.node_id);
    if (!node) throw new Error(`server ${server.id} refers to missing node ${server.node_id}`);
    const subnet = parseSubnet(server.subnet);
    const moved = await this.#changes.commit(async (tx) => {
      const address = await this.#claimSlot(tx, server, subnet, { name: before.row.name, publicKey: before.row.public_key });
      const row = await updateDevice(tx, id, { server_id: server.id, address: intToIp(address), updated_at: isoAt(this.#clock.nowMs()) });
      this.#addresses.taken(server.id, subnet, address);
      const summary = `device ${row.name} moved from server ${before.server.name} to ${server.name}`;
      const result: PlacedDevice = { device: this.view(row), row, server, node };
      return {
        result,
        change: change({
          events: [deviceEventDraft('device.moved', row, server, node, actor, summary)],
          activity: [{
            resource: 'device', resourceId: id, verb: 'moved', summary, actor, before: before.row, after: row,
          }],
          deploy: this.#peers(node, server.id, undefined, row),
          // A node that misses this removal drops the peer at its next resync.
          remove: [{
            node: before.node, serverId: before.server.id, change: { upsert: [], remove: [before.row.public_key] },
          }],
        }),
      };
    }, onCommit).catch((error: unknown) => {
      this.#addresses.forget(server.id);
      throw error;
    });
    this.#addresses.forget(before.server.id);
    return moved;
  }

  async delete(id: number, actor: string): Promise<void> {
    const placed = await this.get(id);
    const { row, server } = placed;
    const words = {
      detail: `device ${row.name} deleted`,
      summary: `device ${row.name} deleted from server ${server.name}`,
    };
    await this.#changes.commit(async (tx) => ({
      result: undefined,
      change: await this.deleteIn(tx, placed, actor, words),
    }));
    this.#addresses.forget(server.id);
  }

  /**
   * One device's delete inside a transaction (a group deletes all of its devices in one), returning
   * what changed: `detail` words its event, `summary` its activity row. Its peer leaves the node
   * after commit, best effort: a node that misses the removal drops the peer at its next resync.
   */
  async deleteIn(
    tx: Tx,
    placed: PlacedDevice,
    actor: string,
    words: { detail: string; summary: string },
  ): Promise<Change> {
    const { row, server, node } = placed;
    await deleteDevice(tx, row.id);
    await deleteDeviceUsage(tx, [row.id]);
    return change({
      events: [deviceEventDraft('device.deleted', row, server, node, actor, words.detail)],
      activity: [{
        resource: 'device', resourceId: row.id, verb: 'deleted', summary: words.summary, actor,
        before: row, after: null,
      }],
      remove: [{ node, serverId: server.id, change: { upsert: [], remove: [row.public_key], deleted: true } }],
    });
  }
}
