import { type Clock, isoAt, normaliseInstant } from '../domain/clock.ts';
import { type DeviceStatus, NAME_MAX, metadataText, nameFromExternalId, serverRoom } from '../domain/devices.ts';
import {
  deviceMovedMeanwhile,
  deviceNameTaken,
  deviceNotFound,
  deviceOnServerAlready,
  noLimitToTopUp,
  noSuchPlan,
  noSuchServer,
  publicKeyInUse,
  serverFull,
} from '../domain/error-cases.ts';
import { AppError } from '../domain/errors.ts';
import type { Page, PageRequest } from '../domain/paging.ts';
import { type PlacementRequest, pickServer } from '../domain/placement.ts';
import { checkRenewal, deviceLimitsFrom, nextThrottleSpeed, type RenewalTerms } from '../domain/plans.ts';
import { effectiveServerStatus } from '../domain/servers.ts';
import { parseSubnet } from '../domain/subnets.ts';
import { generateKeyPair, isUsablePublicKey, isValidKey } from '../domain/wireguard-keys.ts';
import type { Db, Tx } from '../store/db.ts';
import { isUniqueViolation, violationText } from '../store/constraint-violations.ts';
import type { Store } from '../store/open.ts';
import {
  type DeviceRow,
  findDevice,
  insertDevice,
  isKeyTaken,
  isNameTaken,
  listDevices,
  moveDevice,
  namesStartingWith,
  searchDevices,
  updateDevice,
} from '../store/devices.ts';
import { findNode, listNodes, type NodeRow } from '../store/nodes.ts';
import { findPlan, planValues } from '../store/plans.ts';
import { findServer, listRunningServers, lockServers, type ServerRow } from '../store/servers.ts';
import { AddressAllocator, type DeviceAddresses } from './address-allocator.ts';
import { type ChangePublisher, type CommitHook, change, mergeChanges } from './changes.ts';
import { DeviceChanges, type DevicePatch, type Placement } from './device-changes.ts';
import { DeviceGroups } from './device-groups.ts';
import { claimGroupSlot } from './device-slots.ts';
import { type DeviceBody, DeviceViews, type PlacedDevice } from './device-views.ts';
import { deviceEventDraft } from './events.ts';
import type { UsageReportView, UsageService } from './usage.ts';

export interface DeviceCreateInput extends DevicePatch {
  serverId: number | 'auto';
  country?: string;
  city?: string;
  publicKey?: string;
  /** The plan whose values the device takes where the input gives none (docs/api.md "Plans"). */
  planId?: number;
  /** Set from a plan whose clock starts at the first handshake: the expiry is that many days after it. */
  handshakeExpiryDays?: number;
}

/** A renewal as the API asks it: a plan by id (docs/api.md "Renewal"). */
export type RenewalRequest = Omit<RenewalTerms, 'plan'> & { planId?: number };

/** What creating one device needs, decided before its transaction. */
interface NewDevicePlan {
  input: DeviceCreateInput;
  server: ServerRow;
  node: NodeRow;
  keys: { publicKey: string; privateKey: string | null };
  metadata: string | null;
  /** `expires_at` as stored (UTC text), null for never. */
  expiresAt: string | null;
  actor: string;
  onCommit: CommitHook<PlacedDevice> | undefined;
  /** Read the server's addresses anew rather than trust what this process knows (a retry after a conflict). */
  fresh: boolean;
}

/** The quota action and throttle speed a PATCH leaves the device with, or nothing when it gives neither. */
function quotaPatch(row: DeviceRow, patch: DevicePatch): Pick<DevicePatch, 'quotaAction' | 'throttleSpeed'> {
  if (patch.quotaAction === undefined && patch.throttleSpeed === undefined) return {};
  return nextThrottleSpeed({ quotaAction: row.quota_action, throttleSpeed: row.throttle_speed }, patch);
}

/** Room left for a `-N` suffix when a name is made from a long external id. */
const SUFFIX_ROOM = 8;

/**
 * The device use cases of docs/api.md "Devices" (create, read, update, usage reset, move, delete); `groups`
 * makes the same changes to every device of a group (docs/api.md "Groups").
 */
export class DeviceService {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #usage: UsageService;
  readonly #changes: ChangePublisher;
  readonly #views: DeviceViews;
  readonly #deviceChanges: DeviceChanges;
  readonly #addresses = new AddressAllocator();
  /** The same changes for every device of a group, which `GroupService` runs (docs/api.md "Groups"). */
  readonly groups: DeviceGroups;

  constructor(store: Store, clock: Clock, usage: UsageService, changes: ChangePublisher) {
    this.#store = store;
    this.#clock = clock;
    this.#usage = usage;
    this.#changes = changes;
    this.#views = new DeviceViews(store.db, clock, usage);
    this.#deviceChanges = new DeviceChanges(clock, usage, store.dialect);
    this.groups = new DeviceGroups(store, usage, changes, this.#views, this.#deviceChanges, this.#addresses);
  }

  get #db(): Db {
    return this.#store.db;
  }

  async get(id: number): Promise<PlacedDevice> {
    const row = await findDevice(this.#db, id);
    if (!row) throw deviceNotFound(id);
    return this.#views.place(row);
  }

  /** A page of devices with their configs: without a search or status, of reused rows (and kept). */
  async list(
    filter: { serverId?: number; externalId?: string; search?: string; status?: DeviceStatus },
    page: PageRequest,
  ): Promise<Page<DeviceBody>> {
    if (filter.search === undefined && filter.status === undefined) {
      return this.#views.listedPage(await listDevices(this.#db, filter, page), page);
    }
    const at = { nowIso: isoAt(this.#clock.nowMs()), currentMonth: this.#usage.currentMonth() };
    return this.#views.freshPage(await searchDevices(this.#db, { ...filter, ...at }, page), page);
  }

  /** The device's docs/api.md "Usage report". */
  async usageReport(id: number): Promise<UsageReportView> {
    const row = await findDevice(this.#db, id);
    if (!row) throw deviceNotFound(id);
    return this.#usage.report(row);
  }

  /** The wg-quick config of the device as it is now (after a move too). */
  configText(placed: PlacedDevice, killSwitch: boolean): string {
    return this.#views.configText(placed, killSwitch);
  }

  /** The device as the API answers it: with its config as it is now. */
  body(placed: PlacedDevice): DeviceBody {
    return this.#views.body(placed);
  }

  /**
   * `server_id: auto`: the server `pickServer` chooses among the running ones, by the status the API
   * shows (a server of an offline node is `node_offline`, so never chosen).
   */
  async #pickServer(request: PlacementRequest): Promise<ServerRow> {
    const [servers, nodes] = await Promise.all([listRunningServers(this.#db), listNodes(this.#db)]);
    const online = new Set(nodes.filter((node) => node.status === 'online').map((node) => node.id));
    return pickServer(
      servers.filter((server) => effectiveServerStatus(server.status, online.has(server.node_id)) === 'running'),
      request,
    );
  }

  async #serverFor(input: DeviceCreateInput): Promise<ServerRow> {
    if (input.serverId === 'auto') return this.#pickServer({ country: input.country, city: input.city });
    if (input.country !== undefined || input.city !== undefined) {
      throw new AppError('validation_failed', 'country and city go only with server_id "auto"', {
        ...(input.country !== undefined ? { country: 'only with server_id auto' } : {}),
        ...(input.city !== undefined ? { city: 'only with server_id auto' } : {}),
      });
    }
    const server = await findServer(this.#db, input.serverId);
    if (!server || server.status === 'deploying') throw noSuchServer(input.serverId);
    return server;
  }

  /**
   * Creates a device: the address is the lowest free one of its server, taken while the server's
   * row is locked, and the peer is on the node before the transaction commits; if the node cannot
   * take it, nothing is saved (deploy_failed).
   */
  async create(given: DeviceCreateInput, actor: string, onCommit?: CommitHook<PlacedDevice>): Promise<PlacedDevice> {
    const input = await this.#withPlan(given);
    const metadata = input.metadata === undefined ? null : metadataText(input.metadata);
    const expiresAt = normaliseInstant(input.expiresAt ?? null, 'expires_at');
    if (input.publicKey !== undefined && !isValidKey(input.publicKey)) {
      throw new AppError(
        'validation_failed',
        'public_key must be a WireGuard public key: 32 bytes in base64 (44 characters)',
        { public_key: 'not a WireGuard key' },
      );
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
    // Another panel may have taken an address this one still thinks free (the unique index says so): the
    // create is tried again, reading the server's addresses anew under its lock, which no other create holds.
    for (let attempt = 1; ; attempt++) {
      try {
        const fresh = attempt > 1;
        return await this.#insertDevice({ input, server, node, keys, metadata, expiresAt, actor, onCommit, fresh });
      } catch (error) {
        this.#addresses.forget(server.id);
        if (!isUniqueViolation(error)) throw error;
        const violated = violationText(error);
        if (/address/.test(violated) && attempt < 3) continue;
        if (/public_key|server_key/.test(violated)) throw publicKeyInUse();
        throw deviceNameTaken(input.name ?? '');
      }
    }
  }

  /** The input with its plan's values where it gives none, the quota action and throttle speed checked as a pair. */
  async #withPlan(input: DeviceCreateInput): Promise<DeviceCreateInput> {
    if (input.planId === undefined) return { ...input, ...deviceLimitsFrom(undefined, input, this.#clock.nowMs()) };
    const plan = await findPlan(this.#db, input.planId);
    if (!plan) throw noSuchPlan(input.planId);
    return { ...input, ...deviceLimitsFrom(planValues(plan), input, this.#clock.nowMs()) };
  }

  async #insertDevice(plan: NewDevicePlan): Promise<PlacedDevice> {
    const { input, server, node, keys, metadata, expiresAt, actor, onCommit, fresh } = plan;
    const now = isoAt(this.#clock.nowMs());
    return this.#changes.commit(async (tx) => {
      const counts = await lockServers(tx, [server.id], this.#store.dialect);
      if (input.externalId !== undefined) {
        await claimGroupSlot(tx, this.#store.dialect, input.externalId, input.planId ?? null);
      }
      const device = { name: input.name, publicKey: keys.publicKey };
      const addresses = await this.#claimSlot(tx, server, counts, device, fresh);
      // Candidates are the external id cut to leave room for a -N suffix: every one starts with this.
      const names =
        input.name === undefined && input.externalId !== undefined
          ? await namesStartingWith(tx, server.id, input.externalId.slice(0, NAME_MAX - SUFFIX_ROOM))
          : new Set<string>();
      let row = await insertDevice(tx, {
        server_id: server.id,
        name:
          input.name ??
          (input.externalId !== undefined ? nameFromExternalId(input.externalId, names) : `new-${keys.publicKey}`),
        external_id: input.externalId ?? null,
        metadata,
        ...addresses,
        public_key: keys.publicKey,
        private_key: keys.privateKey,
        enabled: (input.enabled ?? true) ? 1 : 0,
        data_limit: input.dataLimit ?? 0,
        limit_period: input.limitPeriod ?? 'monthly',
        usage_reset_at: now,
        expires_at: expiresAt,
        expiry_due_at: expiresAt,
        speed_limit: input.speedLimit ?? 0,
        plan_id: input.planId ?? null,
        quota_action: input.quotaAction ?? 'cut',
        throttle_speed: input.throttleSpeed ?? null,
        handshake_expiry_days: input.handshakeExpiryDays ?? null,
        last_handshake: null,
        created_at: now,
        updated_at: now,
      });
      this.#addresses.taken(server, addresses);
      if (input.name === undefined && input.externalId === undefined) {
        row = await updateDevice(tx, row.id, {
          name: nameFromExternalId(`device-${row.id}`, await namesStartingWith(tx, server.id, `device-${row.id}`)),
        });
      }
      const summary = `device ${row.name} created on server ${server.name}`;
      const created = deviceEventDraft('device.created', row, server, node, actor, summary);
      const settled = await this.#usage.settleLimit(tx, row, actor);
      row = settled.row;
      const result: PlacedDevice = { device: this.#views.view(row), row, server, node };
      const own = change({
        activity: [
          { resource: 'device', resourceId: row.id, verb: 'created', summary, actor, before: null, after: row },
        ],
        // The peer is on the node before the row commits: a node that cannot take it saves nothing.
        deploy: this.#deviceChanges.peers(node, server.id, undefined, row),
      });
      return { result, change: mergeChanges([change({ events: [created] }), settled.change, own]) };
    }, onCommit);
  }

  /**
   * Takes a place on the server for a device, under the server's lock (`counts`: what lockServers gave): room
   * within capacity, a free name and key, and the lowest free addresses (returned), read anew from the
   * database when `fresh`.
   */
  async #claimSlot(
    tx: Tx,
    server: ServerRow,
    counts: ReadonlyMap<number, number>,
    device: { name: string | undefined; publicKey: string },
    fresh: boolean,
  ): Promise<DeviceAddresses> {
    const devicesOn = counts.get(server.id);
    if (devicesOn === undefined) throw noSuchServer(server.id);
    if (devicesOn >= serverRoom(server.capacity, parseSubnet(server.subnet)))
      throw serverFull(server.name, server.capacity);
    if (device.name !== undefined && (await isNameTaken(tx, server.id, device.name))) {
      throw deviceNameTaken(device.name, server.name);
    }
    if (await isKeyTaken(tx, server.id, device.publicKey)) throw publicKeyInUse(server.name);
    if (fresh) this.#addresses.forget(server.id);
    return this.#addresses.claim(tx, server);
  }

  /**
   * Changes a device. The change is saved first; the node gets it before the answer, or the
   * caller hears apply_failed with the change saved (the node's next resync converges it).
   */
  async update(id: number, given: DevicePatch, actor: string): Promise<PlacedDevice> {
    const before = await this.get(id);
    const detail = (changed: DeviceRow, kind: string) => `device ${changed.name}: ${kind}`;
    const patch = { ...given, ...quotaPatch(before.row, given) };
    try {
      return await this.#changes.commit(async (tx) => {
        // Into another group: a slot there, the device's plan counted (docs/decisions.md "Device slots").
        if (patch.externalId !== undefined && patch.externalId !== before.row.external_id) {
          await claimGroupSlot(tx, this.#store.dialect, patch.externalId, before.row.plan_id);
        }
        const updated = await this.#deviceChanges.update(tx, before, patch, actor, detail);
        return { result: this.#views.changed(before, updated.row), change: updated.change };
      });
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      throw deviceNameTaken(patch.name ?? '');
    }
  }

  /**
   * Restarts the count toward the data limit from now; the history stays
   * (docs/api.md "Changing, moving and deleting").
   */
  async resetUsage(id: number, actor: string, onCommit?: CommitHook<PlacedDevice>): Promise<PlacedDevice> {
    const before = await this.get(id);
    return this.#changes.commit(async (tx) => {
      const reset = await this.#deviceChanges.resetUsage(tx, before, actor, `usage of device ${before.row.name} reset`);
      return { result: this.#views.changed(before, reset.row), change: reset.change };
    }, onCommit);
  }

  /** Adds bytes to the allowance of the device's current period (docs/api.md "Top-up"). */
  async topUp(id: number, bytes: number, actor: string, onCommit?: CommitHook<PlacedDevice>): Promise<PlacedDevice> {
    const before = await this.get(id);
    if (before.row.data_limit <= 0) throw noLimitToTopUp(id);
    return this.#changes.commit(async (tx) => {
      const { row, change: added } = await this.#deviceChanges.topUp(tx, before, bytes, actor);
      return { result: this.#views.changed(before, row), change: added };
    }, onCommit);
  }

  /** Renews a device (docs/api.md "Renewal"); `request` names the plan to switch to by id. */
  async renew(
    id: number,
    request: RenewalRequest,
    actor: string,
    onCommit?: CommitHook<PlacedDevice>,
  ): Promise<PlacedDevice> {
    const terms = await this.renewalTerms(request);
    const before = await this.get(id);
    return this.#changes.commit(async (tx) => {
      const { rows, change: renewed } = await this.#deviceChanges.renewMany(tx, [before], terms, actor);
      const [row] = rows;
      if (row === undefined) throw deviceNotFound(id);
      return { result: this.#views.changed(before, row), change: renewed };
    }, onCommit);
  }

  /** A renewal's terms with its plan read, checked before any device changes. */
  async renewalTerms(request: RenewalRequest): Promise<RenewalTerms> {
    const { planId, ...rest } = request;
    const row = planId === undefined ? undefined : await findPlan(this.#db, planId);
    if (planId !== undefined && !row) throw noSuchPlan(planId);
    const until = rest.until === undefined ? undefined : (normaliseInstant(rest.until, 'until') ?? undefined);
    const terms = { ...rest, until, plan: row && { ...planValues(row), id: row.id } };
    checkRenewal(terms);
    return terms;
  }

  /**
   * Moves a device to another server (docs/api.md "Changing, moving and deleting"): same id, keys, name, limits
   * and usage history; a new address there. The peer joins the new server before the move commits, then leaves
   * the old one (a node that misses the removal drops it at its next resync).
   */
  async move(
    id: number,
    target: number | 'auto',
    actor: string,
    onCommit?: CommitHook<PlacedDevice>,
  ): Promise<PlacedDevice> {
    const before = await this.get(id);
    const server =
      target === 'auto' ? await this.#pickServer({ current: before.server.id }) : await findServer(this.#db, target);
    if (!server || server.status === 'deploying') throw noSuchServer(target);
    if (server.id === before.server.id) throw deviceOnServerAlready(id, server.id);
    const node = await findNode(this.#db, server.node_id);
    if (!node) throw new Error(`server ${server.id} refers to missing node ${server.node_id}`);
    const moved = await this.#changes
      .commit(async (tx) => {
        // Both servers' counts change: both are locked, lowest id first.
        const counts = await lockServers(tx, [before.server.id, server.id], this.#store.dialect);
        // A move of this device that committed since `before` was read: a second move to the same server gets
        // the answer it would get after the first (not name_taken, its own name found there).
        const now = await findDevice(tx, id);
        if (now?.server_id === server.id) throw deviceOnServerAlready(id, server.id);
        // Read anew: a move has no retry, and another panel may have taken addresses there.
        const device = { name: before.row.name, publicKey: before.row.public_key };
        const addresses = await this.#claimSlot(tx, server, counts, device, true);
        const row = await moveDevice(tx, id, before.server.id, {
          server_id: server.id,
          ...addresses,
          updated_at: isoAt(this.#clock.nowMs()),
        });
        if (row === undefined) throw deviceMovedMeanwhile(id);
        this.#addresses.taken(server, addresses);
        const summary = `device ${row.name} moved from server ${before.server.name} to ${server.name}`;
        const result: PlacedDevice = { device: this.#views.view(row), row, server, node };
        return {
          result,
          change: change({
            events: [deviceEventDraft('device.moved', row, server, node, actor, summary)],
            activity: [
              {
                resource: 'device',
                resourceId: id,
                verb: 'moved',
                summary,
                actor,
                before: before.row,
                after: row,
              },
            ],
            deploy: this.#deviceChanges.peers(node, server.id, undefined, row),
            // A node that misses this removal drops the peer at its next resync.
            remove: [
              {
                node: before.node,
                serverId: before.server.id,
                change: { upsert: [], remove: [before.row.public_key] },
              },
            ],
          }),
        };
      }, onCommit)
      .catch((error: unknown) => {
        this.#addresses.forget(server.id);
        throw error;
      });
    this.#addresses.forget(before.server.id);
    return moved;
  }

  async delete(id: number, actor: string): Promise<void> {
    const placed = await this.get(id);
    const words = ({ row, server }: Placement) => ({
      detail: `device ${row.name} deleted`,
      summary: `device ${row.name} deleted from server ${server.name}`,
    });
    await this.#changes.commit(async (tx) => ({
      result: undefined,
      change: await this.#deviceChanges.delete(tx, [placed], actor, words),
    }));
    this.#addresses.forget(placed.server.id);
  }
}
