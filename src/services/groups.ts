import type { PeerChange } from '../agent/protocol.ts';
import type { Clock } from '../domain/clock.ts';
import { metadataText, type LimitPeriod } from '../domain/devices.ts';
import { AppError } from '../domain/errors.ts';
import { type Usage, usageOf } from '../domain/usage.ts';
import { type Store, type Tx, write } from '../store/db.ts';
import { deleteDevice, type DeviceRow, listDevicesOfGroup } from '../store/devices.ts';
import { deleteDeviceUsage } from '../store/usage.ts';
import type { DeviceService, PlacedDevice } from './devices.ts';
import { recordActivity } from './activity.ts';
import { recordDeviceEvent } from './events.ts';
import { notifyChange } from './notifications.ts';
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

/** A group-deleted mail names this many devices and counts the rest. */
const MAILED_DEVICE_NAMES = 50;

function sumUsage(devices: readonly PlacedDevice[]): Usage {
  const rx = devices.reduce((n, d) => n + d.device.month_usage.rx_bytes, 0);
  const tx = devices.reduce((n, d) => n + d.device.month_usage.tx_bytes, 0);
  return usageOf(rx, tx);
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
    // Checked once before the transaction, so a too-large value is refused before anything changes.
    if (patch.metadata !== undefined) metadataText(patch.metadata);
    const changed = await this.#eachInOneTransaction(members, (tx, member) =>
      this.#devices.updateIn(tx, member, patch, actor, (row, kind) => `group ${externalId}: device ${row.name} ${kind}`),
    );
    await this.#applyPeerChanges(members, changed);
    return this.get(externalId);
  }

  async resetUsage(externalId: string, actor: string, onCommit?: CommitHook<GroupView>): Promise<GroupView> {
    const members = await this.#members(externalId);
    const view = await write(this.#store.db, async (tx) => {
      const devices: PlacedDevice[] = [];
      for (const member of members) {
        const row = await this.#devices.resetUsageIn(tx, member, actor, `group ${externalId}: usage of device ${member.row.name} reset`);
        devices.push({ ...member, row, device: this.#devices.view(row) });
      }
      const view: GroupView = { external_id: externalId, device_count: devices.length, month_usage: sumUsage(devices), devices };
      await onCommit?.(tx, view);
      return view;
    });
    await this.#applyPeerChanges(members, view.devices.map((d) => d.row));
    return view;
  }

  async delete(externalId: string, actor: string): Promise<void> {
    const members = await this.#members(externalId);
    await write(this.#store.db, async (tx) => {
      for (const member of members) {
        await deleteDevice(tx, member.row.id);
        await deleteDeviceUsage(tx, [member.row.id]);
        await recordDeviceEvent(tx, this.#clock, 'device.deleted', member.row, member.server, member.node, actor, `group ${externalId} deleted`);
        await recordActivity(tx, this.#clock, { resource: 'device', resourceId: member.row.id, verb: 'deleted', summary: `group ${externalId} deleted: device ${member.row.name} on server ${member.server.name}`, actor, before: member.row, after: null });
      }
      const named = members.slice(0, MAILED_DEVICE_NAMES).map((m) => `${m.row.name} (server ${m.server.name}, ${m.row.address})`);
      const more = members.length > named.length ? ` and ${members.length - named.length} more` : '';
      await notifyChange(tx, this.#clock, { headline: `group ${externalId} deleted with ${members.length} device(s)`, details: [`Devices: ${named.join(', ')}${more}`], actor });
    });
    for (const member of members) this.#devices.addressesFreed(member.server.id);
    // Nodes that miss a removal drop the peers at their next resync.
    for (const [member, change] of this.#changesByServer(members.map((m) => [m, { upsert: [], remove: [m.row.public_key], deleted: true }]))) {
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

  /** Each node gets its devices' new peers, one change per server; a node that cannot is apply_failed (saved). */
  async #applyPeerChanges(members: readonly PlacedDevice[], changed: readonly DeviceRow[]): Promise<void> {
    const pairs: [PlacedDevice, PeerChange][] = [];
    members.forEach((member, i) => {
      const row = changed[i];
      const change = row && this.#devices.peerChange(member.row, row);
      if (change) pairs.push([member, change]);
    });
    for (const [member, change] of this.#changesByServer(pairs)) {
      await applyOrFail(this.#connections, member.node, member.server.id, change, 'apply_failed');
    }
  }

  /** Merges per-device changes into one change per server. */
  #changesByServer(pairs: readonly [PlacedDevice, PeerChange][]): [PlacedDevice, PeerChange][] {
    const byServer = new Map<number, [PlacedDevice, PeerChange]>();
    for (const [member, change] of pairs) {
      const entry = byServer.get(member.server.id) ?? [member, { upsert: [], remove: [], deleted: change.deleted }];
      entry[1].upsert.push(...change.upsert);
      entry[1].remove.push(...change.remove);
      byServer.set(member.server.id, entry);
    }
    return [...byServer.values()];
  }
}
