import { metadataText } from '../domain/devices.ts';
import { AppError } from '../domain/errors.ts';
import { type Usage, usageOf } from '../domain/usage.ts';
import { change, type CommitHook } from './changes.ts';
import type { DevicePatch } from './device-changes.ts';
import type { PlacedDevice } from './device-views.ts';
import type { DeviceService } from './devices.ts';

/** A group as spec §2.2 shows it. */
export interface GroupView {
  external_id: string;
  device_count: number;
  month_usage: Usage;
  devices: PlacedDevice[];
}

/** Fields a group PATCH sets on every device (DESIGN §3). */
export type GroupPatch = Pick<
  DevicePatch,
  'enabled' | 'expiresAt' | 'dataLimit' | 'limitPeriod' | 'speedLimit' | 'metadata'
>;

/** A group-deleted mail names this many devices and counts the rest. */
const MAILED_DEVICE_NAMES = 50;

function groupView(externalId: string, devices: PlacedDevice[]): GroupView {
  const rx = devices.reduce((n, d) => n + d.device.month_usage.rx_bytes, 0);
  const tx = devices.reduce((n, d) => n + d.device.month_usage.tx_bytes, 0);
  return { external_id: externalId, device_count: devices.length, month_usage: usageOf(rx, tx), devices };
}

/**
 * Every device sharing an external_id, read and changed as one (spec §4.3): each operation is the
 * `DeviceService` operation for all members in one transaction (`updateAll`, `resetUsageAll`,
 * `deleteAll`); the group adds its own words and, on delete, its mail.
 */
export class GroupService {
  readonly #devices: DeviceService;

  constructor(devices: DeviceService) {
    this.#devices = devices;
  }

  async #members(externalId: string): Promise<PlacedDevice[]> {
    const members = await this.#devices.ofGroup(externalId);
    if (members.length === 0) throw new AppError('not_found', `no device has external_id ${externalId}`);
    return members;
  }

  async get(externalId: string): Promise<GroupView> {
    return groupView(externalId, await this.#members(externalId));
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
    const detail = (row: { name: string }, kind: string) => `group ${externalId}: device ${row.name} ${kind}`;
    return groupView(externalId, await this.#devices.updateAll(members, patch, actor, detail));
  }

  async resetUsage(externalId: string, actor: string, onCommit?: CommitHook<GroupView>): Promise<GroupView> {
    const members = await this.#members(externalId);
    const detail = (member: PlacedDevice) => `group ${externalId}: usage of device ${member.row.name} reset`;
    return this.#devices.resetUsageAll(members, actor, detail, (devices) => groupView(externalId, devices), onCommit);
  }

  async delete(externalId: string, actor: string): Promise<void> {
    const members = await this.#members(externalId);
    const words = (member: PlacedDevice) => ({
      detail: `group ${externalId} deleted`,
      summary: `group ${externalId} deleted: device ${member.row.name} on server ${member.server.name}`,
    });
    const named = members
      .slice(0, MAILED_DEVICE_NAMES)
      .map((m) => `${m.row.name} (server ${m.server.name}, ${m.row.address})`);
    const more = members.length > named.length ? ` and ${members.length - named.length} more` : '';
    const headline = `group ${externalId} deleted with ${members.length} device(s)`;
    const mail = change({ mail: [{ headline, details: [`Devices: ${named.join(', ')}${more}`], actor }] });
    await this.#devices.deleteAll(members, actor, words, [mail]);
  }
}
