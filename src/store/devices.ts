import { type Insertable, type Selectable, sql, type Updateable } from 'kysely';
import type { DeviceStatus } from '../domain/devices.ts';
import type { PageRequest } from '../domain/paging.ts';
import type { Db, Queryable } from './db.ts';
import { ReusedPageShape, type ReusedRows, rowLimit } from './query-shapes.ts';
import { oneOf } from './raw-sql.ts';
import { addToDeviceCount } from './servers.ts';
import { containsText } from './text-search.ts';
import type { DeviceTable } from './schema.ts';

export type DeviceRow = Selectable<DeviceTable>;

/** Inserts a device and counts it on its server; the caller holds the server's lock (lockServers). */
export async function insertDevice(db: Queryable, device: Insertable<DeviceTable>): Promise<DeviceRow> {
  const row = await db.insertInto('devices').values(device).returningAll().executeTakeFirstOrThrow();
  await addToDeviceCount(db, row.server_id, 1);
  return row;
}

export function findDevice(db: Queryable, id: number): Promise<DeviceRow | undefined> {
  return db.selectFrom('devices').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function updateDevice(db: Queryable, id: number, changes: Updateable<DeviceTable>): Promise<DeviceRow> {
  return db.updateTable('devices').set(changes).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}

/** Ids per statement of a set update or delete: well below either database's limit of bound values. */
const ID_CHUNK = 1_000;

/**
 * Sets the same changes on every device of `ids` with one statement per thousand, the rows after it in id order
 * (ids already gone are skipped). `expiresAt`, when given, also becomes each row's due expiry unless the row
 * held that expiry already (a new expiry is due for its own device.expired).
 */
export async function updateDevices(
  db: Queryable,
  ids: readonly number[],
  changes: Updateable<DeviceTable>,
  expiresAt?: string | null,
): Promise<DeviceRow[]> {
  const rows: DeviceRow[] = [];
  for (let i = 0; i < ids.length; i += ID_CHUNK) {
    let query = db.updateTable('devices').set(changes);
    if (expiresAt !== undefined) {
      query = query.set((eb) => ({
        expires_at: expiresAt,
        expiry_due_at:
          expiresAt === null
            ? null
            : eb.case().when('expires_at', '=', expiresAt).then(eb.ref('expiry_due_at')).else(expiresAt).end(),
      }));
    }
    rows.push(
      ...(await query
        .where(oneOf(db, 'id', ids.slice(i, i + ID_CHUNK)))
        .returningAll()
        .execute()),
    );
  }
  return rows.sort((a, b) => a.id - b.id);
}

/**
 * Moves a device from `fromServerId` to another server with its new addresses, and moves its count with it;
 * the caller holds both servers' locks (lockServers). Undefined when the device is no longer on `fromServerId`.
 */
export async function moveDevice(
  db: Queryable,
  id: number,
  fromServerId: number,
  changes: Updateable<DeviceTable> & { server_id: number },
): Promise<DeviceRow | undefined> {
  const row = await db
    .updateTable('devices')
    .set(changes)
    .where('id', '=', id)
    .where('server_id', '=', fromServerId)
    .returningAll()
    .executeTakeFirst();
  if (row === undefined) return undefined;
  await addToDeviceCount(db, fromServerId, -1);
  await addToDeviceCount(db, row.server_id, 1);
  return row;
}

/**
 * Deletes the devices and takes them off their servers' counts, by the server each row was on when deleted;
 * the caller holds those servers' locks (lockServers). Ids already gone are skipped.
 */
export async function deleteDevices(db: Queryable, ids: readonly number[]): Promise<void> {
  const removed = new Map<number, number>();
  for (let i = 0; i < ids.length; i += ID_CHUNK) {
    const rows = await db
      .deleteFrom('devices')
      .where(oneOf(db, 'id', ids.slice(i, i + ID_CHUNK)))
      .returning('server_id')
      .execute();
    for (const { server_id } of rows) removed.set(server_id, (removed.get(server_id) ?? 0) + 1);
  }
  for (const [serverId, count] of [...removed].sort(([a], [b]) => a - b)) {
    await addToDeviceCount(db, serverId, -count);
  }
}

/** Deletes every device of a server that is being deleted with them (its row goes, and its count with it). */
export async function deleteDevicesOfServer(db: Queryable, serverId: number): Promise<void> {
  await db.deleteFrom('devices').where('server_id', '=', serverId).execute();
}

/** Every address in use on a server, both families (to build its allocation bitmap and set once). */
export function listDeviceAddresses(
  db: Queryable,
  serverId: number,
): Promise<Pick<DeviceRow, 'address' | 'address6'>[]> {
  return db.selectFrom('devices').select(['address', 'address6']).where('server_id', '=', serverId).execute();
}

export async function isNameTaken(db: Queryable, serverId: number, name: string): Promise<boolean> {
  return (
    (await db
      .selectFrom('devices')
      .select('id')
      .where('server_id', '=', serverId)
      .where('name', '=', name)
      .executeTakeFirst()) !== undefined
  );
}

export async function isKeyTaken(db: Queryable, serverId: number, publicKey: string): Promise<boolean> {
  return (
    (await db
      .selectFrom('devices')
      .select('id')
      .where('server_id', '=', serverId)
      .where('public_key', '=', publicKey)
      .executeTakeFirst()) !== undefined
  );
}

/** Names on the server that start with `prefix` (an index range), for making a name unique. */
export async function namesStartingWith(db: Queryable, serverId: number, prefix: string): Promise<Set<string>> {
  const rows = await db
    .selectFrom('devices')
    .select('name')
    .where('server_id', '=', serverId)
    .where('name', '>=', prefix)
    .where('name', '<', `${prefix}\u{10FFFF}`)
    .execute();
  return new Set(rows.map((r) => r.name));
}

/** What a device's peer and its limits are made of (desired-state.ts): no private key to open, no metadata. */
const PEER_COLUMNS = [
  'id',
  'public_key',
  'address',
  'address6',
  'enabled',
  'speed_limit',
  'quota_action',
  'throttle_speed',
  'data_limit',
  'limit_period',
  'top_up_bytes',
  'top_up_month',
  'usage_month',
  'month_rx',
  'month_tx',
  'period_rx',
  'period_tx',
  'meter',
  'meter_journal',
  'expires_at',
] as const;
export type PeerRow = Pick<DeviceRow, (typeof PEER_COLUMNS)[number]>;

/**
 * A page of a server's devices as peers, oldest first after `afterId`: read at each resync and drift check a page at
 * a time, so a server's rows are never all in memory at once (the `devices (server_id, id)` index gives the order).
 */
export function listPeerRowsOfServer(
  db: Queryable,
  serverId: number,
  afterId: number,
  limit: number,
): Promise<PeerRow[]> {
  return db
    .selectFrom('devices')
    .select(PEER_COLUMNS)
    .where('server_id', '=', serverId)
    .where('id', '>', afterId)
    .orderBy('id')
    .limit(rowLimit(limit))
    .execute();
}

export function listDevicesOfServer(db: Queryable, serverId: number): Promise<DeviceRow[]> {
  return db.selectFrom('devices').selectAll().where('server_id', '=', serverId).orderBy('id').execute();
}

export interface DeviceFilter {
  serverId?: number;
  externalId?: string;
  /** Only devices whose name or external id contains this, ignoring case (containsText). */
  search?: string;
  /** Only these statuses; the caller turns a status into conditions with `nowIso`. */
  status?: DeviceStatus;
  nowIso: string;
  /** `YYYY-MM` of now in the panel's time zone: a monthly count of an earlier month no longer counts. */
  currentMonth: string;
}

/**
 * A device row's status in SQL: deviceStatus() with isLimitReached(), so the status filter of GET /devices
 * and the metrics' counts agree with the status each device shows.
 */
function statusOf(nowIso: string, currentMonth: string) {
  const limitReached = sql`data_limit > 0 and period_rx + period_tx >= data_limit
    and (limit_period = 'total' or usage_month = ${currentMonth})`;
  return sql<DeviceStatus>`case when enabled = 0 then 'disabled' when expires_at <= ${nowIso} then 'expired'
    when ${limitReached} then 'limit_reached' else 'active' end`;
}

function devicesAfter(db: Db, afterId: number, serverId: number | undefined, externalId: string | undefined) {
  let query = db.selectFrom('devices').selectAll().where('id', '>', afterId);
  if (serverId !== undefined) query = query.where('server_id', '=', serverId);
  if (externalId !== undefined) query = query.where('external_id', '=', externalId);
  return query;
}

/**
 * A page filtered by server and external id only, the common list, as a query shape whose rows are reused
 * while nothing has been committed: a page of rows opened from the sealed store (private keys) costs more than
 * checking that nothing changed, and reused rows let the views be reused too.
 */
const plainPage = new ReusedPageShape(
  (db, limit, afterId: number, serverId: number | undefined, externalId: string | undefined) =>
    devicesAfter(db, afterId, serverId, externalId).orderBy('id').limit(limit),
  [-1001, -1002, '\u0000external_id'],
);

/** Oldest first, `limit + 1` rows (see toPage), by server and external id only: rows reused (ReusedShape). */
export function listDevices(
  db: Db,
  filter: Pick<DeviceFilter, 'serverId' | 'externalId'>,
  page: PageRequest,
): Promise<ReusedRows<DeviceRow>> {
  return plainPage.execute(db, page.limit + 1, page.afterId, filter.serverId, filter.externalId);
}

/** Oldest first, `limit + 1` rows (see toPage), with a search or a status too: read anew every time. */
export function searchDevices(db: Db, filter: DeviceFilter, page: PageRequest): Promise<DeviceRow[]> {
  let query = devicesAfter(db, page.afterId, filter.serverId, filter.externalId);
  if (filter.search !== undefined) query = query.where(containsText(db, ['name', 'external_id'], filter.search));
  if (filter.status !== undefined) {
    query = query.where(statusOf(filter.nowIso, filter.currentMonth), '=', filter.status);
  }
  return query
    .orderBy('id')
    .limit(rowLimit(page.limit + 1))
    .execute();
}

/** How many devices have each status, and how many of them had a handshake after `onlineSinceIso`. */
export interface DeviceCounts {
  byStatus: Map<DeviceStatus, number>;
  online: number;
}

/**
 * Every device's status and whether it is online, counted in one pass over the table (a few tens of
 * milliseconds at 100,000 devices; the metrics run it in the background, see docs/benchmarks.md).
 */
export async function countDevices(
  db: Queryable,
  at: { nowIso: string; currentMonth: string; onlineSinceIso: string },
): Promise<DeviceCounts> {
  const rows = await db
    .selectFrom((eb) =>
      eb
        .selectFrom('devices')
        .select([
          statusOf(at.nowIso, at.currentMonth).as('status'),
          sql<number>`case when last_handshake > ${at.onlineSinceIso} then 1 else 0 end`.as('online'),
        ])
        .as('d'),
    )
    .select((eb) => ['d.status', eb.fn.countAll<number>().as('devices'), eb.fn.sum<number>('d.online').as('online')])
    .groupBy('d.status')
    .execute();
  return {
    byStatus: new Map(rows.map((r) => [r.status, Number(r.devices)])),
    online: rows.reduce((sum, r) => sum + Number(r.online), 0),
  };
}

/** A group (docs/api.md "Groups"): every device sharing the external id, oldest first. */
export function listDevicesOfGroup(db: Queryable, externalId: string): Promise<DeviceRow[]> {
  return db.selectFrom('devices').selectAll().where('external_id', '=', externalId).orderBy('id').execute();
}

/** Devices whose expiry passed and has no device.expired yet, soonest first. */
export function listExpiryDue(db: Queryable, nowIso: string, limit: number): Promise<DeviceRow[]> {
  return db
    .selectFrom('devices')
    .selectAll()
    .where('expiry_due_at', '<=', nowIso)
    .orderBy('expiry_due_at')
    .limit(rowLimit(limit))
    .execute();
}

/** Takes the device's due expiry off the list; false when another panel (or a PATCH) took it first. */
export async function clearExpiryDue(db: Queryable, id: number, due: string): Promise<boolean> {
  const result = await db
    .updateTable('devices')
    .set({ expiry_due_at: null })
    .where('id', '=', id)
    .where('expiry_due_at', '=', due)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/**
 * Devices whose expiry waits for their first handshake and that have had one: few, found by the index on the
 * waiting days (migration 025), which holds only such devices' rows on PostgreSQL.
 */
export function devicesAwaitingExpiry(db: Queryable): Promise<DeviceRow[]> {
  return db
    .selectFrom('devices')
    .selectAll()
    .where('handshake_expiry_days', 'is not', null)
    .where('last_handshake', 'is not', null)
    .orderBy('id')
    .limit(ID_CHUNK)
    .execute();
}

/** Sets the expiry of a device waiting for its first handshake, once: undefined when it waits no more. */
export function startExpiry(db: Queryable, id: number, expiresAt: string): Promise<DeviceRow | undefined> {
  return db
    .updateTable('devices')
    .set({ expires_at: expiresAt, expiry_due_at: expiresAt, handshake_expiry_days: null })
    .where('id', '=', id)
    .where('handshake_expiry_days', 'is not', null)
    .returningAll()
    .executeTakeFirst();
}

/**
 * Devices due an expiry reminder at `nowMs` (docs/api.md "Reminders"), with its window: the shortest of `windowsMs`
 * whose span before expires_at holds now, unless that expiry was reminded at that window or a shorter one. So a
 * device first seen inside several windows gets the nearest one's reminder only.
 */
export async function listRemindersDue(
  db: Queryable,
  nowMs: number,
  windowsMs: readonly number[],
  limit: number,
): Promise<(DeviceRow & { window_ms: number })[]> {
  const shortestFirst = [...windowsMs].sort((a, b) => a - b);
  const longest = shortestFirst.at(-1);
  if (longest === undefined) return [];
  const at = (ms: number) => new Date(nowMs + ms).toISOString();
  const whens = shortestFirst.map((w) => sql`when expires_at <= ${at(w)} then cast(${w} as bigint)`);
  const window = sql<number>`case ${sql.join(whens, sql` `)} end`;
  const rows = await db
    .selectFrom('devices')
    .selectAll()
    .select(window.as('window_ms'))
    .where('expires_at', '>', at(0))
    .where('expires_at', '<=', at(longest))
    .where((eb) =>
      eb.or([
        eb('reminded_expiry', 'is', null),
        eb('reminded_expiry', '<>', eb.ref('expires_at')),
        eb('reminded_window_ms', '>', window),
      ]),
    )
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map((row) => ({ ...row, window_ms: Number(row.window_ms) }));
}

/** Records the reminder of `expiresAt` at `windowMs`, once: false when the row changed or was reminded meanwhile. */
export async function markReminded(db: Queryable, id: number, expiresAt: string, windowMs: number): Promise<boolean> {
  const result = await db
    .updateTable('devices')
    .set({ reminded_expiry: expiresAt, reminded_window_ms: windowMs })
    .where('id', '=', id)
    .where('expires_at', '=', expiresAt)
    .where((eb) =>
      eb.or([
        eb('reminded_expiry', 'is', null),
        eb('reminded_expiry', '<>', expiresAt),
        eb('reminded_window_ms', '>', windowMs),
      ]),
    )
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}
