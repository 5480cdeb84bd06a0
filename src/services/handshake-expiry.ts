import { isoAt } from '../domain/clock.ts';
import { AppError } from '../domain/errors.ts';
import { SYSTEM_ACTOR } from '../domain/events.ts';
import { expiryAfter } from '../domain/plans.ts';
import type { Queryable, Tx } from '../store/db.ts';
import { type DeviceRow, devicesAwaitingExpiry, startExpiry } from '../store/devices.ts';
import { findNode } from '../store/nodes.ts';
import { findServer } from '../store/servers.ts';
import { appendChange, type Change, type ChangePublisher, change } from './changes.ts';
import { peerChange } from './desired-state.ts';
import { deviceEventDraft } from './events.ts';
import type { UsageService } from './usage.ts';

/**
 * Starts the clock of devices whose plan starts it at the first handshake (docs/api.md "Plans"): once a device's
 * row holds a handshake, its expiry becomes that handshake + the plan's days, with a `device.updated` event, and the
 * node gets the expiry to enforce. Read from the rows, not a report, so a start that failed is made at the next
 * one; each device is started once, its waiting days cleared by the statement that sets its expiry.
 */
export async function startExpiriesAtHandshake(
  db: Queryable,
  changes: ChangePublisher,
  usage: UsageService,
): Promise<void> {
  const waiting = await devicesAwaitingExpiry(db);
  if (waiting.length === 0) return;
  const committed = changes.commit(async (tx) => {
    const started = change({});
    for (const before of waiting) {
      if (before.last_handshake === null || before.handshake_expiry_days === null) continue;
      const handshakeMs = Date.parse(before.last_handshake);
      const row = await startExpiry(tx, before.id, expiryAfter(handshakeMs, before.handshake_expiry_days));
      if (row !== undefined) appendChange(started, await expiryStarted(tx, before, row, handshakeMs, usage));
    }
    return { result: undefined, change: started };
  });
  // Saved either way: a node that missed the new expiry gets it at the next drift check (its digest holds the
  // limits).
  await committed.catch((error: unknown) => {
    if (!(error instanceof AppError && error.code === 'apply_failed')) throw error;
  });
}

async function expiryStarted(
  tx: Tx,
  before: DeviceRow,
  row: DeviceRow,
  handshakeMs: number,
  usage: UsageService,
): Promise<Change> {
  const server = await findServer(tx, row.server_id);
  const node = server && (await findNode(tx, server.node_id));
  if (!server || !node) return change({});
  const detail = `device ${row.name}: first handshake at ${isoAt(handshakeMs)}, expires at ${row.expires_at}`;
  const peer = peerChange(before, row, usage);
  return change({
    events: [deviceEventDraft('device.updated', row, server, node, SYSTEM_ACTOR, detail)],
    activity: [
      {
        resource: 'device',
        resourceId: row.id,
        verb: 'updated',
        summary: detail,
        actor: SYSTEM_ACTOR,
        before: { expires_at: before.expires_at },
        after: { expires_at: row.expires_at },
      },
    ],
    apply: peer === undefined ? [] : [{ node, serverId: server.id, change: peer }],
  });
}
