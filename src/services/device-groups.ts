import { setImmediate } from 'node:timers/promises';
import type { RenewalTerms } from '../domain/plans.ts';
import { groupNotFound } from '../domain/error-cases.ts';
import { DEFAULT_PAGE_SIZE, type Page, type PageRequest } from '../domain/paging.ts';
import { type Usage, usageOf } from '../domain/usage.ts';
import type { Tx } from '../store/db.ts';
import { type DeviceRow, listDevices } from '../store/devices.ts';
import { groupTotals, listGroupDevices } from '../store/groups.ts';
import type { Store } from '../store/open.ts';
import type { AddressAllocator } from './address-allocator.ts';
import { type Change, type ChangePublisher, change, mergeChanges } from './changes.ts';
import type { ChangedDevices, DeviceChanges, DevicePatch, Placement } from './device-changes.ts';
import type { DeviceBody, DeviceViews } from './device-views.ts';
import type { UsageService } from './usage.ts';

/** How many devices and what they moved this month, of a group (docs/api.md "Groups"). */
export interface GroupTotals {
  devices: number;
  monthUsage: Usage;
}

/** Devices per transaction of a group change on SQLite: a few ms each (see #changeGroup; docs/benchmarks.md). */
const SQLITE_GROUP_BATCH = 100;
/** Devices a group change handles between two turns of the event loop on PostgreSQL (see #changeGroup). */
const GROUP_CHUNK = 1_000;

/**
 * The devices of a group (every device sharing an external_id) read, and changed as `DeviceService` changes
 * one device, with set statements: what `GroupService` runs for a group (docs/api.md "Groups"). It shares the
 * device service's views and its cache of free addresses.
 */
export class DeviceGroups {
  readonly #store: Store;
  readonly #usage: UsageService;
  readonly #changes: ChangePublisher;
  readonly #views: DeviceViews;
  readonly #deviceChanges: DeviceChanges;
  readonly #addresses: AddressAllocator;

  constructor(
    store: Store,
    usage: UsageService,
    changes: ChangePublisher,
    views: DeviceViews,
    deviceChanges: DeviceChanges,
    addresses: AddressAllocator,
  ) {
    this.#store = store;
    this.#usage = usage;
    this.#changes = changes;
    this.#views = views;
    this.#deviceChanges = deviceChanges;
    this.#addresses = addresses;
  }

  /** A group's devices (docs/api.md "Groups"), oldest first: the device list's kept page (listedPage). */
  async page(externalId: string, page: PageRequest): Promise<Page<DeviceBody>> {
    return this.#views.listedPage(await listDevices(this.#store.db, { externalId }, page), page);
  }

  /** How many devices a group has and their usage this month; not_found when no device has the external id. */
  async totals(externalId: string): Promise<GroupTotals> {
    const totals = await groupTotals(this.#store.db, externalId, this.#usage.currentMonth());
    if (totals.devices === 0) throw groupNotFound(externalId);
    return { devices: totals.devices, monthUsage: usageOf(totals.monthRx, totals.monthTx) };
  }

  /** The totals and first page of a group's devices after a change gave every row (in id order). */
  after(changed: readonly Placement[]): { totals: GroupTotals; page: Page<DeviceBody> } {
    let rx = 0;
    let tx = 0;
    for (const { row } of changed) {
      const month = this.#usage.monthUsage(row);
      rx += month.rx_bytes;
      tx += month.tx_bytes;
    }
    const first = changed
      .slice(0, DEFAULT_PAGE_SIZE)
      .map((placed) => this.#views.body({ ...placed, device: this.#views.view(placed.row) }));
    return {
      totals: { devices: changed.length, monthUsage: usageOf(rx, tx) },
      page: { data: first, has_more: changed.length > DEFAULT_PAGE_SIZE },
    };
  }

  /**
   * Sets the fields on every device of the group as `DeviceService.update` does each, with set statements; the
   * values were checked before (a value wrong for one device changes none). Gives every row after it, in id order.
   */
  update(
    externalId: string,
    patch: DevicePatch,
    actor: string,
    detail: (row: DeviceRow, kind: string) => string,
  ): Promise<Placement[]> {
    return this.#changeGroup(externalId, (tx, members) =>
      this.#deviceChanges.updateMany(tx, members, patch, actor, detail),
    );
  }

  /** Resets the usage of every device of the group; `last` runs in the last transaction with every row after it. */
  resetUsage(
    externalId: string,
    actor: string,
    detail: (member: Placement) => string,
    last?: (tx: Tx, changed: Placement[]) => Promise<void>,
  ): Promise<Placement[]> {
    return this.#changeGroup(
      externalId,
      (tx, members) => this.#deviceChanges.resetUsageMany(tx, members, actor, detail),
      async (tx, changed) => {
        await last?.(tx, changed);
        return change({});
      },
    );
  }

  /** Renews every device of the group, each from its own expiry; `last` as in `resetUsage`. */
  renew(
    externalId: string,
    terms: RenewalTerms,
    actor: string,
    last?: (tx: Tx, changed: Placement[]) => Promise<void>,
  ): Promise<Placement[]> {
    return this.#changeGroup(
      externalId,
      (tx, members) => this.#deviceChanges.renewMany(tx, members, terms, actor),
      async (tx, changed) => {
        await last?.(tx, changed);
        return change({});
      },
    );
  }

  /**
   * Deletes every device of the group with set statements; `words` gives each device's event detail and
   * activity summary, `along` what the last transaction records besides (the group's mail, naming the devices).
   * Their peers leave the nodes after commit, best effort.
   */
  async delete(
    externalId: string,
    actor: string,
    words: (member: Placement) => { detail: string; summary: string },
    along: (deleted: readonly Placement[]) => Change,
  ): Promise<void> {
    const deleted = await this.#changeGroup(
      externalId,
      async (tx, members) => ({
        rows: members.map((m) => m.row),
        change: await this.#deviceChanges.delete(tx, members, actor, words),
      }),
      async (_tx, all) => along(all),
    );
    for (const serverId of new Set(deleted.map((m) => m.server.id))) this.#addresses.forget(serverId);
  }

  /**
   * Runs a change over every device of a group, oldest first, and gives each row after it with its place. It
   * goes GROUP_CHUNK devices at a time (read, changed, their events and activity recorded), letting the event
   * loop go between chunks, so no run of JavaScript handles a whole group. On PostgreSQL every chunk is in one
   * transaction. On SQLite, whose one connection and synchronous driver would hold every other request
   * (`/healthz` too) for a whole group's transaction, each chunk of SQLITE_GROUP_BATCH is its own transaction:
   * a group's all-or-nothing (docs/decisions.md "Groups") is about its values, all checked before the first; a
   * failure of the database midway leaves the chunks before it done, and repeating the request finishes the rest. The
   * nodes get one peer change per server after the last commit. `last` adds what the last transaction records
   * besides. Not found when the group has no device.
   */
  async #changeGroup(
    externalId: string,
    changeOf: (tx: Tx, members: Placement[]) => Promise<ChangedDevices>,
    last?: (tx: Tx, changed: Placement[]) => Promise<Change>,
  ): Promise<Placement[]> {
    const sqlite = this.#store.dialect === 'sqlite';
    const chunk = sqlite ? SQLITE_GROUP_BATCH : GROUP_CHUNK;
    const changed: Placement[] = [];
    const committed: Change[] = [];
    let afterId = 0;
    let done = false;
    try {
      while (!done) {
        if (afterId > 0) await setImmediate();
        const { change: peers } = await this.#changes.record(async (tx, recordPart) => {
          const pushes: Change[] = [];
          for (let chunks = 0; !done && (chunks === 0 || !sqlite); chunks++) {
            if (chunks > 0) await setImmediate();
            const rows = await listGroupDevices(tx, externalId, afterId, chunk + 1);
            if (rows.length === 0 && afterId === 0) throw groupNotFound(externalId);
            done = rows.length <= chunk;
            const mine = rows.slice(0, chunk);
            afterId = mine.at(-1)?.id ?? afterId;
            const places = await this.#views.placesIn(tx, mine);
            const members = mine.flatMap((row) => {
              const place = places.get(row.server_id);
              return place ? [{ row, ...place }] : [];
            });
            const result = await changeOf(tx, members);
            for (const row of result.rows) {
              const place = places.get(row.server_id);
              if (place) changed.push({ ...place, row });
            }
            // The records now, chunk by chunk; the peers are merged and go to the nodes after the last commit.
            pushes.push(await recordPart(result.change));
          }
          const extra = done && last ? [await last(tx, changed)] : [];
          return { result: undefined, change: mergeChanges([...pushes, ...extra]) };
        });
        committed.push(peers);
      }
    } finally {
      await this.#changes.publish(mergeChanges(committed));
    }
    return changed;
  }
}
