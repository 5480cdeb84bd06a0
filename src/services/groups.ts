import { metadataText } from '../domain/devices.ts';
import type { Page, PageRequest } from '../domain/paging.ts';
import type { Usage } from '../domain/usage.ts';
import { change, type CommitHook } from './changes.ts';
import type { DevicePatch, Placement } from './device-changes.ts';
import type { DeviceGroups, GroupTotals } from './device-groups.ts';
import type { DeviceBody } from './device-views.ts';
import type { DeviceService, RenewalRequest } from './devices.ts';

/**
 * A group as docs/api.md "Groups" shows it: `device_count` and `month_usage` over all its devices, `devices`
 * one page of them (oldest first) with `has_more` as the devices list has it (docs/api.md "Paging").
 */
export interface GroupView {
  external_id: string;
  device_count: number;
  month_usage: Usage;
  /** The page's own array (a kept page's, so the same while the page is: PageWriter.sendWithin). */
  devices: readonly DeviceBody[];
  has_more: boolean;
}

/** Fields a group PATCH sets on every device (docs/decisions.md "Groups"). */
export type GroupPatch = Pick<
  DevicePatch,
  'enabled' | 'expiresAt' | 'dataLimit' | 'limitPeriod' | 'speedLimit' | 'metadata'
>;

/** A group-deleted mail names this many devices and counts the rest. */
const MAILED_DEVICE_NAMES = 50;

function groupView(externalId: string, totals: GroupTotals, page: Page<DeviceBody>): GroupView {
  return {
    external_id: externalId,
    device_count: totals.devices,
    month_usage: totals.monthUsage,
    devices: page.data,
    has_more: page.has_more,
  };
}

/**
 * Every device sharing an external_id, read and changed as one (docs/api.md "Groups"): each operation is the
 * `DeviceService` operation for all members with set statements (`DeviceGroups`: `update`, `resetUsage`,
 * `delete`); the group adds its own words and, on delete, its mail. A change answers the group after it
 * with the first page of its devices.
 */
export class GroupService {
  readonly #devices: DeviceGroups;
  readonly #service: DeviceService;

  constructor(devices: DeviceService) {
    this.#devices = devices.groups;
    this.#service = devices;
  }

  async get(externalId: string, page: PageRequest): Promise<GroupView> {
    const totals = await this.#devices.totals(externalId);
    return groupView(externalId, totals, await this.#devices.page(externalId, page));
  }

  #after(externalId: string, changed: readonly Placement[]): GroupView {
    const { totals, page } = this.#devices.after(changed);
    return groupView(externalId, totals, page);
  }

  /**
   * Sets the fields on every device: every value is checked before anything changes, so a value wrong for
   * one device changes none. Then each node gets the peers whose admission or speed limit changed; a node
   * that cannot is apply_failed (saved).
   */
  async update(externalId: string, patch: GroupPatch, actor: string): Promise<GroupView> {
    if (patch.metadata !== undefined) metadataText(patch.metadata);
    const detail = (row: { name: string }, kind: string) => `group ${externalId}: device ${row.name} ${kind}`;
    return this.#after(externalId, await this.#devices.update(externalId, patch, actor, detail));
  }

  async resetUsage(externalId: string, actor: string, onCommit?: CommitHook<GroupView>): Promise<GroupView> {
    const detail = (member: Placement) => `group ${externalId}: usage of device ${member.row.name} reset`;
    const changed = await this.#devices.resetUsage(
      externalId,
      actor,
      detail,
      onCommit && ((tx, all) => onCommit(tx, this.#after(externalId, all))),
    );
    return this.#after(externalId, changed);
  }

  /** Renews every device of the group (docs/api.md "Renewal"), checked once before any changes. */
  async renew(
    externalId: string,
    request: RenewalRequest,
    actor: string,
    onCommit?: CommitHook<GroupView>,
  ): Promise<GroupView> {
    const terms = await this.#service.renewalTerms(request);
    const changed = await this.#devices.renew(
      externalId,
      terms,
      actor,
      onCommit && ((tx, all) => onCommit(tx, this.#after(externalId, all))),
    );
    return this.#after(externalId, changed);
  }

  async delete(externalId: string, actor: string): Promise<void> {
    const words = (member: Placement) => ({
      detail: `group ${externalId} deleted`,
      summary: `group ${externalId} deleted: device ${member.row.name} on server ${member.server.name}`,
    });
    const mail = (members: readonly Placement[]) => {
      const named = members
        .slice(0, MAILED_DEVICE_NAMES)
        .map((m) => `${m.row.name} (server ${m.server.name}, ${m.row.address})`);
      const more = members.length > named.length ? ` and ${members.length - named.length} more` : '';
      const headline = `group ${externalId} deleted with ${members.length} device(s)`;
      return change({ mail: [{ headline, details: [`Devices: ${named.join(', ')}${more}`], actor }] });
    };
    await this.#devices.delete(externalId, actor, words, mail);
  }
}
