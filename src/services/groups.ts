import { metadataText, type LimitPeriod } from '../domain/devices.ts';
import { AppError } from '../domain/errors.ts';
import { type Usage, usageOf } from '../domain/usage.ts';
import type { Store } from '../store/open.ts';
import { listDevicesOfGroup } from '../store/devices.ts';
import { type Change, type ChangePublisher, type CommitHook, change, mergeChanges } from './changes.ts';
import type { DeviceService, PlacedDevice } from './devices.ts';

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

/**
 * Every device sharing an external_id, read and changed as one (spec §4.3): each operation runs the
 * device's own path (`updateIn`, `resetUsageIn`, `deleteIn`) for every member in one transaction,
 * and the change publisher pushes one peer change per server after commit.
 */
export class GroupService {
  readonly #store: Store;
  readonly #devices: DeviceService;
  readonly #changes: ChangePublisher;

  constructor(store: Store, devices: DeviceService, changes: ChangePublisher) {
    this.#store = store;
    this.#devices = devices;
    this.#changes = changes;
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
    await this.#changes.commit(async (tx) => {
      const changes: Change[] = [];
      for (const member of members) {
        const detail = (row: { name: string }, kind: string) => `group ${externalId}: device ${row.name} ${kind}`;
        changes.push((await this.#devices.updateIn(tx, member, patch, actor, detail)).change);
      }
      return { result: undefined, change: mergeChanges(changes) };
    });
    return this.get(externalId);
  }

  async resetUsage(externalId: string, actor: string, onCommit?: CommitHook<GroupView>): Promise<GroupView> {
    const members = await this.#members(externalId);
    return this.#changes.commit(async (tx) => {
      const devices: PlacedDevice[] = [];
      const changes: Change[] = [];
      for (const member of members) {
        const detail = `group ${externalId}: usage of device ${member.row.name} reset`;
        const { row, change: reset } = await this.#devices.resetUsageIn(tx, member, actor, detail);
        devices.push({ ...member, row, device: this.#devices.view(row) });
        changes.push(reset);
      }
      const view: GroupView = { external_id: externalId, device_count: devices.length, month_usage: sumUsage(devices), devices };
      return { result: view, change: mergeChanges(changes) };
    }, onCommit);
  }

  async delete(externalId: string, actor: string): Promise<void> {
    const members = await this.#members(externalId);
    await this.#changes.commit(async (tx) => {
      const changes: Change[] = [];
      for (const member of members) {
        const summary = `group ${externalId} deleted: device ${member.row.name} on server ${member.server.name}`;
        const words = { detail: `group ${externalId} deleted`, summary };
        changes.push(await this.#devices.deleteIn(tx, member, actor, words));
      }
      const named = members.slice(0, MAILED_DEVICE_NAMES).map((m) => `${m.row.name} (server ${m.server.name}, ${m.row.address})`);
      const more = members.length > named.length ? ` and ${members.length - named.length} more` : '';
      const headline = `group ${externalId} deleted with ${members.length} device(s)`;
      changes.push(change({ mail: [{ headline, details: [`Devices: ${named.join(', ')}${more}`], actor }] }));
      return { result: undefined, change: mergeChanges(changes) };
    });
    for (const member of members) this.#devices.addressesFreed(member.server.id);
  }
}
