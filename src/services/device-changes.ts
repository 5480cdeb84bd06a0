import { type Clock, isoAt, normaliseInstant } from '../domain/clock.ts';
import { type LimitPeriod, metadataText } from '../domain/devices.ts';
import { deviceNotFound } from '../domain/error-cases.ts';
import type { EventKind } from '../domain/events.ts';
import { type QuotaAction, type RenewalTerms, renewedExpiry } from '../domain/plans.ts';
import type { Updateable } from 'kysely';
import type { Dialect, Tx } from '../store/db.ts';
import type { DeviceTable } from '../store/schema.ts';
import { deleteDevices, type DeviceRow, updateDevices } from '../store/devices.ts';
import type { NodeRow } from '../store/nodes.ts';
import { lockServers } from '../store/servers.ts';
import { deleteDeviceUsage } from '../store/usage.ts';
import { appendChange, type Change, change, type PeerPush } from './changes.ts';
import { peerChange } from './desired-state.ts';
import type { PlacedDevice } from './device-views.ts';
import { deviceEventDraft } from './events.ts';
import type { UsageService } from './usage.ts';

/**
 * The settings of a device a PATCH may change (docs/api.md "Changing, moving and deleting"); a group PATCH sets
 * some of them on every member.
 */
export interface DevicePatch {
  name?: string;
  externalId?: string;
  metadata?: object | null;
  enabled?: boolean;
  dataLimit?: number;
  limitPeriod?: LimitPeriod;
  expiresAt?: string | null;
  speedLimit?: number;
  /** Given together (DeviceService resolves the pair): `nextThrottleSpeed`. */
  quotaAction?: QuotaAction;
  throttleSpeed?: number | null;
}

/** What a usage reset sets besides its time: the period's count, its mark and its top-ups start again. */
const USAGE_RESET = { period_rx: 0, period_tx: 0, limit_reached_at: null, top_up_bytes: 0 } as const;

/** A device's row after a change, and what the change path records and pushes for it. */
export interface DeviceChange {
  row: DeviceRow;
  change: Change;
}

/** Several devices' rows after one change (in id order), and what it records and pushes for them. */
export interface ChangedDevices {
  rows: DeviceRow[];
  change: Change;
}

/** A device row with the server and node it is on: what a change needs of it. */
export type Placement = Pick<PlacedDevice, 'row' | 'server' | 'node'>;

/**
 * One device's update, usage reset or delete inside a caller's transaction, returned as a `Change`
 * (events, limit mark, activity, the peer its node needs): a single device and a group's members
 * take the same path, the caller commits one transaction through the `ChangePublisher`.
 */
export class DeviceChanges {
  readonly #clock: Clock;
  readonly #usage: UsageService;
  readonly #dialect: Dialect;

  constructor(clock: Clock, usage: UsageService, dialect: Dialect) {
    this.#clock = clock;
    this.#usage = usage;
    this.#dialect = dialect;
  }

  /**
   * The row changed, its `device.updated` and `device.enabled`/`disabled` events, its limit mark and
   * activity row; the peer change is applied after commit. `detail` words an event of the kind
   * (`updated`, `enabled`…).
   */
  async update(
    tx: Tx,
    before: Placement,
    patch: DevicePatch,
    actor: string,
    detail: (row: DeviceRow, kind: string) => string,
  ): Promise<DeviceChange> {
    const { rows, change } = await this.updateMany(tx, [before], patch, actor, detail);
    const [row] = rows;
    if (row === undefined) throw deviceNotFound(before.row.id);
    return { row, change };
  }

  /** `update` for several devices: one set statement (per thousand), their records gathered in one change. */
  async updateMany(
    tx: Tx,
    members: readonly Placement[],
    patch: DevicePatch,
    actor: string,
    detail: (row: DeviceRow, kind: string) => string,
  ): Promise<ChangedDevices> {
    const expiresAt = patch.expiresAt === undefined ? undefined : normaliseInstant(patch.expiresAt, 'expires_at');
    const changed = await updateDevices(
      tx,
      members.map((m) => m.row.id),
      {
        name: patch.name,
        external_id: patch.externalId,
        metadata: patch.metadata === undefined ? undefined : metadataText(patch.metadata),
        enabled: patch.enabled === undefined ? undefined : patch.enabled ? 1 : 0,
        data_limit: patch.dataLimit,
        limit_period: patch.limitPeriod,
        speed_limit: patch.speedLimit,
        quota_action: patch.quotaAction,
        throttle_speed: patch.throttleSpeed,
        updated_at: isoAt(this.#clock.nowMs()),
      },
      expiresAt,
    );
    const byId = new Map(members.map((m) => [m.row.id, m]));
    const rows: DeviceRow[] = [];
    // One change gathers every device's records: a group's thousands of small changes merged cost more.
    const result = change({});
    for (const row of changed) {
      const before = byId.get(row.id);
      if (before === undefined) continue;
      const kinds: EventKind[] = ['device.updated'];
      if (before.row.enabled !== row.enabled) kinds.push(row.enabled === 1 ? 'device.enabled' : 'device.disabled');
      for (const kind of kinds) {
        const words = detail(row, kind.slice('device.'.length));
        result.events.push(deviceEventDraft(kind, row, before.server, before.node, actor, words));
      }
      const { row: settled, change: limit } = await this.#usage.settleLimit(tx, row, actor);
      rows.push(settled);
      appendChange(result, limit);
      result.activity.push({
        resource: 'device',
        resourceId: settled.id,
        verb: 'updated',
        summary: detail(settled, 'updated'),
        actor,
        before: before.row,
        after: settled,
      });
      result.apply.push(...this.peers(before.node, before.server.id, before.row, settled));
    }
    return { rows, change: result };
  }

  /**
   * Restarts the count toward the data limit from now (docs/api.md "Changing, moving and deleting"); the
   * history stays. The node gets the whole allowance back after commit, so a device cut off at its limit may
   * connect again.
   */
  async resetUsage(tx: Tx, placed: Placement, actor: string, detail: string): Promise<DeviceChange> {
    const { rows, change } = await this.resetUsageMany(tx, [placed], actor, () => detail);
    const [row] = rows;
    if (row === undefined) throw deviceNotFound(placed.row.id);
    return { row, change };
  }

  /** `resetUsage` for several devices: one set statement (per thousand), their records gathered in one change. */
  async resetUsageMany(
    tx: Tx,
    members: readonly Placement[],
    actor: string,
    detail: (member: Placement) => string,
  ): Promise<ChangedDevices> {
    const reset = await updateDevices(
      tx,
      members.map((m) => m.row.id),
      { ...USAGE_RESET, usage_reset_at: isoAt(this.#clock.nowMs()) },
    );
    const byId = new Map(members.map((m) => [m.row.id, m]));
    const rows: DeviceRow[] = [];
    const result = change({});
    for (const row of reset) {
      const placed = byId.get(row.id);
      if (placed === undefined) continue;
      const words = detail(placed);
      rows.push(row);
      result.events.push(deviceEventDraft('device.usage_reset', row, placed.server, placed.node, actor, words));
      result.activity.push({
        resource: 'device',
        resourceId: row.id,
        verb: 'usage_reset',
        summary: words,
        actor,
        before: placed.row,
        after: row,
      });
      result.apply.push(...this.peers(placed.node, placed.server.id, placed.row, row));
    }
    return { rows, change: result };
  }

  /**
   * Renews each device (docs/api.md "Renewal"): its expiry from its own (renewedExpiry), the plan's values when
   * switching plans, its usage count restarted unless `resetUsage` is false, and a waiting first-handshake clock
   * dropped (the renewal starts it). Each gets `device.renewed` and an activity row; the node gets the peer after
   * commit, so a device cut off at its limit or expiry connects again.
   */
  async renewMany(tx: Tx, members: readonly Placement[], terms: RenewalTerms, actor: string): Promise<ChangedDevices> {
    const nowMs = this.#clock.nowMs();
    const now = isoAt(nowMs);
    const plan = terms.plan;
    const values: Updateable<DeviceTable> = {
      handshake_expiry_days: null,
      updated_at: now,
      ...(plan === undefined
        ? {}
        : {
            plan_id: plan.id,
            data_limit: plan.dataLimit,
            limit_period: plan.limitPeriod,
            speed_limit: plan.speedLimit,
            quota_action: plan.quotaAction,
            throttle_speed: plan.throttleSpeed,
          }),
      ...(terms.resetUsage ? { ...USAGE_RESET, usage_reset_at: now } : {}),
    };
    const rows: DeviceRow[] = [];
    const result = change({});
    for (const member of members) {
      const expiresAt = renewedExpiry(member.row.expires_at, nowMs, terms);
      const [renewed] = await updateDevices(tx, [member.row.id], values, expiresAt);
      if (renewed === undefined) continue;
      const { row, change: limit } = await this.#usage.settleLimit(tx, renewed, actor);
      rows.push(row);
      const detail = `device ${row.name} renewed${expiresAt === null ? ', no expiry' : ` until ${expiresAt}`}`;
      result.events.push(deviceEventDraft('device.renewed', row, member.server, member.node, actor, detail));
      appendChange(result, limit);
      result.activity.push({
        resource: 'device',
        resourceId: row.id,
        verb: 'renewed',
        summary: detail,
        actor,
        before: member.row,
        after: row,
      });
      result.apply.push(...this.peers(member.node, member.server.id, member.row, row));
    }
    return { rows, change: result };
  }

  /**
   * Adds `bytes` to the allowance of the device's current period (docs/api.md "Top-up"): a device at its limit is
   * admitted again by its node after commit. The top-ups of an earlier month have lapsed and are not carried.
   */
  async topUp(tx: Tx, placed: Placement, bytes: number, actor: string): Promise<DeviceChange> {
    const month = this.#usage.currentMonth();
    const [added] = await updateDevices(tx, [placed.row.id], {
      top_up_bytes: this.#usage.topUp(placed.row) + bytes,
      top_up_month: month,
      updated_at: isoAt(this.#clock.nowMs()),
    });
    if (added === undefined) throw deviceNotFound(placed.row.id);
    const { row, change: limit } = await this.#usage.settleLimit(tx, added, actor);
    const detail = `device ${row.name} topped up by ${bytes} bytes (${row.top_up_bytes} this period)`;
    const result = change({
      events: [deviceEventDraft('device.topped_up', row, placed.server, placed.node, actor, detail)],
      activity: [
        {
          resource: 'device',
          resourceId: row.id,
          verb: 'topped_up',
          summary: detail,
          actor,
          before: placed.row,
          after: row,
        },
      ],
      apply: this.peers(placed.node, placed.server.id, placed.row, row),
    });
    appendChange(result, limit);
    return { row, change: result };
  }

  /**
   * The rows and their usage rows deleted with set statements (their servers locked lowest id first, their
   * counts lowered), each device's `device.deleted` (worded by `detail`) and activity row (`summary`).
   * The peers leave their nodes after commit, best effort: a node that misses a removal drops the peer at
   * its next resync.
   */
  async delete(
    tx: Tx,
    members: readonly Placement[],
    actor: string,
    words: (member: Placement) => { detail: string; summary: string },
  ): Promise<Change> {
    const ids = members.map((m) => m.row.id);
    await lockServers(
      tx,
      members.map((m) => m.server.id),
      this.#dialect,
    );
    await deleteDevices(tx, ids);
    await deleteDeviceUsage(tx, ids);
    const deleted = change({});
    for (const member of members) {
      const { row, server, node } = member;
      const { detail, summary } = words(member);
      deleted.events.push(deviceEventDraft('device.deleted', row, server, node, actor, detail));
      deleted.activity.push({
        resource: 'device',
        resourceId: row.id,
        verb: 'deleted',
        summary,
        actor,
        before: row,
        after: null,
      });
      deleted.remove.push({
        node,
        serverId: server.id,
        change: { upsert: [], remove: [row.public_key], deleted: true },
      });
    }
    return deleted;
  }

  /** The peer change a device's node needs after `before` became `after`, if any. */
  peers(node: NodeRow, serverId: number, before: DeviceRow | undefined, after: DeviceRow): PeerPush[] {
    const peers = peerChange(before, after, this.#usage);
    return peers ? [{ node, serverId, change: peers }] : [];
  }
}
