import type { PeerChange } from '../agent/protocol.ts';
import { type Clock, isoAt, normaliseInstant } from '../domain/clock.ts';
import { metadataText, type LimitPeriod } from '../domain/devices.ts';
import { AppError } from '../domain/errors.ts';
import type { EventKind } from '../domain/events.ts';
import { type Store, type Tx, write } from '../store/db.ts';
import { deleteDevice, type DeviceRow, listDevicesOfGroup, updateDevice } from '../store/devices.ts';
import { admitted, peerOf } from './desired-state.ts';
import type { DeviceService, PlacedDevice, Usage } from './devices.ts';
import { recordDeviceEvent } from './events.ts';
import { applyOrFail, type NodeConnections } from './nodes.ts';
import type { CommitHook } from './servers.ts';

/** A group as spec §2.2 shows it. */
export interface GroupView {
  external_id: string;
  device_count: number;
  month_usage: Usage;
  devices: PlacedDevice[];
}

/** Fields a group PATCH sets on every device (DESIGN §3). */
export interface GroupPatch {
  enabled?: boolean;
  expiresAt?: string | null;
  dataLimit?: number;
  limitPeriod?: LimitPeriod;
  speedLimit?: number;
  metadata?: object | null;
}

function sumUsage(devices: readonly PlacedDevice[]): Usage {
  const rx = devices.reduce((n, d) => n + d.device.month_usage.rx_bytes, 0);
  const tx = devices.reduce((n, d) => n + d.device.month_usage.tx_bytes, 0);
  return { rx_bytes: rx, tx_bytes: tx, total_bytes: rx + tx };
}

/** Every device sharing an external_id, read and changed as one (spec §4.3). */
export class GroupService {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #connections: NodeConnections;
  readonly #devices: DeviceService;

  constructor(store: Store, clock: Clock, connections: NodeConnections, devices: DeviceService) {
    this.#store = store;
    this.#clock = clock;
    this.#connections = connections;
    this.#devices = devices;
  }

  async #members(externalId: string): Promise<PlacedDevice[]> {
    const rows = await listDevicesOfGroup(this.#store.db, externalId);
    if (rows.length === 0) throw new AppError('not_found', `no device has external_id ${externalId}`);
    return this.#devices.placeAll(rows);
  }

  async get(externalId: string): Promise<GroupView> {
    const devices = await this.#members(externalId);
    return { external_id: externalId, device_count: devices.length, month_usage: sumUsage(devices), devices };
  }

  /**
   * Sets the fields on every device in one transaction: a value wrong for one device changes none.
   * Then each node gets the peers whose admission or speed limit changed; a node that cannot is
   * apply_failed (saved).
   */
  async update(externalId: string, patch: GroupPatch, actor: string): Promise<GroupView> {
    const members = await this.#members(externalId);
    const metadata = patch.metadata === undefined ? undefined : metadataText(patch.metadata);
    const nowMs = this.#clock.nowMs();
    const changed = await this.#eachInOneTransaction(members, async (tx, member) => {
      const row = await updateDevice(tx, member.row.id, {
        enabled: patch.enabled === undefined ? undefined : patch.enabled ? 1 : 0,
        expires_at: patch.expiresAt === undefined ? undefined : normaliseInstant(patch.expiresAt),
        data_limit: patch.dataLimit,
        limit_period: patch.limitPeriod,
        speed_limit: patch.speedLimit,
        metadata,
        updated_at: isoAt(nowMs),
      });
      const kinds: EventKind[] = ['device.updated'];
      if (member.row.enabled !== row.enabled) kinds.push(row.enabled === 1 ? 'device.enabled' : 'device.disabled');
      for (const kind of kinds) await recordDeviceEvent(tx, this.#clock, kind, row, member.server, member.node, actor, `group ${externalId}: device ${row.name} ${kind.slice('device.'.length)}`);
      return row;
    });
    await this.#applyAdmissionChanges(members, changed, nowMs);
    return this.get(externalId);
  }

  async resetUsage(externalId: string, actor: string, onCommit?: CommitHook<GroupView>): Promise<GroupView> {
    const members = await this.#members(externalId);
    const now = isoAt(this.#clock.nowMs());
    return write(this.#store.db, async (tx) => {
      const devices: PlacedDevice[] = [];
      for (const member of members) {
        const row = await updateDevice(tx, member.row.id, { usage_reset_at: now });
        await recordDeviceEvent(tx, this.#clock, 'device.usage_reset', row, member.server, member.node, actor, `group ${externalId}: usage of device ${row.name} reset`);
        devices.push({ ...member, row, device: this.#devices.view(row) });
      }
      const view: GroupView = { external_id: externalId, device_count: devices.length, month_usage: sumUsage(devices), devices };
      await onCommit?.(tx, view);
      return view;
    });
  }

  async delete(externalId: string, actor: string): Promise<void> {
    const members = await this.#members(externalId);
    await this.#eachInOneTransaction(members, async (tx, member) => {
      await deleteDevice(tx, member.row.id);
      await recordDeviceEvent(tx, this.#clock, 'device.deleted', member.row, member.server, member.node, actor, `group ${externalId} deleted`);
      return member.row;
    });
    for (const member of members) this.#devices.addressesFreed(member.server.id);
    // Nodes that miss a removal drop the peers at their next resync.
    for (const [member, change] of this.#changesByServer(members.map((m) => [m, { upsert: [], remove: [m.row.public_key] }]))) {
      await this.#connections.for(member.node).changePeers(member.server.id, change).catch(() => undefined);
    }
  }

  async #eachInOneTransaction(members: readonly PlacedDevice[], work: (tx: Tx, member: PlacedDevice) => Promise<DeviceRow>): Promise<DeviceRow[]> {
    return write(this.#store.db, async (tx) => {
      const rows: DeviceRow[] = [];
      for (const member of members) rows.push(await work(tx, member));
      return rows;
    });
  }

  async #applyAdmissionChanges(members: readonly PlacedDevice[], changed: readonly DeviceRow[], nowMs: number): Promise<void> {
    const pairs: [PlacedDevice, PeerChange][] = [];
    members.forEach((member, i) => {
      const row = changed[i];
      if (!row) return;
      const isAdmitted = admitted(row, nowMs);
      // A device that stays a peer is sent again only when its speed limit changed.
      if (admitted(member.row, nowMs) === isAdmitted && !(isAdmitted && member.row.speed_limit !== row.speed_limit)) return;
      pairs.push([member, isAdmitted ? { upsert: [peerOf(row)], remove: [] } : { upsert: [], remove: [row.public_key] }]);
    });
    for (const [member, change] of this.#changesByServer(pairs)) {
      await applyOrFail(this.#connections, member.node, member.server.id, change, 'apply_failed');
    }
  }

  /** Merges per-device changes into one change per server. */
  #changesByServer(pairs: readonly [PlacedDevice, PeerChange][]): [PlacedDevice, PeerChange][] {
    const byServer = new Map<number, [PlacedDevice, PeerChange]>();
    for (const [member, change] of pairs) {
      const entry = byServer.get(member.server.id) ?? [member, { upsert: [], remove: [] }];
      entry[1].upsert.push(...change.upsert);
      entry[1].remove.push(...change.remove);
      byServer.set(member.server.id, entry);
    }
    return [...byServer.values()];
  }
}
