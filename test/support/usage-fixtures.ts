import { after, before } from 'node:test';
import type { Insertable } from 'kysely';
import type { Clock } from '../../src/domain/clock.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { generateKeyPair } from '../../src/domain/wireguard-keys.ts';
import { quietPublisher } from '../../src/services/changes.ts';
import { UsageService } from '../../src/services/usage.ts';
import type { Db } from '../../src/store/db.ts';
import type { Store } from '../../src/store/open.ts';
import type { NodeRow } from '../../src/store/nodes.ts';
import type { DeviceTable } from '../../src/store/schema.ts';
import type { DatabaseKind, TestDatabase } from './databases.ts';
import { openTestStore, type TestStore } from './stores.ts';
import type { ServerRow } from '../../src/store/servers.ts';

/** Rows written straight to the database, for usage tests and benchmarks that need no node or API. */
export function seedNode(db: Db, name: string, nowIso: string): Promise<NodeRow> {
  return db
    .insertInto('nodes')
    .values({
      name,
      url: null,
      token: null,
      public_host: '192.0.2.1',
      status: 'online',
      driver: 'dry-run',
      version: 'seed',
      last_seen_at: null,
      created_at: nowIso,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** A running server on `subnet` (e.g. `10.1.0.0/24`), its address the first of it. */
export function seedServer(
  db: Db,
  node: Pick<NodeRow, 'id'>,
  fields: { name: string; listenPort: number; subnet: string; capacity: number },
  nowIso: string,
): Promise<ServerRow> {
  const [network, bits] = fields.subnet.split('/');
  const address = `${(network ?? '').replace(/\.0$/, '.1')}/${bits ?? '24'}`;
  // A real pair: a device's config (GET /devices) names the server's public key.
  const keys = generateKeyPair();
  return db
    .insertInto('servers')
    .values({
      node_id: node.id,
      name: fields.name,
      country: 'DE',
      city: '',
      status: 'running',
      endpoint: '192.0.2.1',
      listen_port: fields.listenPort,
      private_key: keys.privateKey,
      public_key: keys.publicKey,
      address,
      subnet: fields.subnet,
      dns: '[]',
      dns_on_server: 0,
      mtu: 1420,
      persistent_keepalive: 25,
      client_allowed_ips: '[]',
      capacity: fields.capacity,
      created_at: nowIso,
      updated_at: nowIso,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** The row of an enabled device with a client-made key and the given limits (insert one or many). */
export function deviceValues(
  serverId: number,
  fields: { name: string; address: string; publicKey?: string; dataLimit?: number; limitPeriod?: 'monthly' | 'total' },
  nowIso: string,
): Insertable<DeviceTable> {
  return {
    server_id: serverId,
    name: fields.name,
    external_id: null,
    metadata: null,
    address: fields.address,
    public_key: fields.publicKey ?? generateKeyPair().publicKey,
    private_key: null,
    enabled: 1,
    data_limit: fields.dataLimit ?? 0,
    limit_period: fields.limitPeriod ?? 'total',
    usage_reset_at: nowIso,
    expires_at: null,
    speed_limit: 0,
    last_handshake: null,
    created_at: nowIso,
    updated_at: nowIso,
  };
}

/** Distinct valid public keys, cheaply: one real key with its first bytes varied. */
function keyOf(base: Buffer, i: number): string {
  const key = Buffer.from(base);
  key.writeUInt32BE(i, 0);
  return key.toString('base64');
}

/**
 * `devices` enabled devices over `servers` running servers of `node` (the n-th on 10.2n.0.0/15), inserted a
 * thousand a statement, for benchmarks at fleet scale. `row` may change each device's row (`i`: its index on
 * its server).
 */
export async function seedFleet(
  db: Db,
  node: Pick<NodeRow, 'id'>,
  size: { devices: number; servers: number },
  nowIso: string,
  row: (values: Insertable<DeviceTable>, i: number) => Insertable<DeviceTable> = (values) => values,
): Promise<void> {
  const perServer = Math.ceil(size.devices / size.servers);
  for (let s = 0; s < size.servers; s++) {
    const fields = { name: `s${s}`, listenPort: 51820 + s, subnet: `10.${s * 2}.0.0/15`, capacity: perServer };
    const server = await seedServer(db, node, fields, nowIso);
    const base = Buffer.from(generateKeyPair().publicKey, 'base64');
    for (let start = 0; start < perServer; start += 1000) {
      const values = Array.from({ length: Math.min(1000, perServer - start) }, (_, k) => {
        const i = start + k;
        const address = `10.${s * 2 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;
        return row(deviceValues(server.id, { name: `d${i}`, address, publicKey: keyOf(base, i) }, nowIso), i);
      });
      await db.insertInto('devices').values(values).execute();
    }
    // Written straight, so counted here as the panel's own inserts count them.
    await db.updateTable('servers').set({ device_count: perServer }).where('id', '=', server.id).execute();
  }
}

/** A migrated store on a new test database of the kind, opened before the suite's tests and dropped after them. */
export function migratedStoreForSuite(kind: DatabaseKind): { readonly store: Store; readonly database: TestDatabase } {
  let opened: TestStore | undefined;
  before(async () => {
    opened = await openTestStore(kind, { sealed: true });
  });
  after(async () => {
    await opened?.close();
  });
  const current = () => {
    if (!opened) throw new Error('the store opens in before()');
    return opened;
  };
  return {
    get store() {
      return current().store;
    },
    get database() {
      return current().database;
    },
  };
}

/**
 * A node's usage reports as the node monitor stores them: `use(deviceId, bytes)` ingests one batch of `bytes` more
 * for the device at the clock's time, its meter counting on from the bytes reported before; the day and month of
 * each batch those of `timeZone`. Each reporter counts its batches from 1: two of them need their own `journalId`.
 */
export function usageReporter(
  db: Db,
  clock: Clock,
  nodeId: number,
  timeZone = 'UTC',
  journalId = 'j',
): (deviceId: number, bytes: number) => Promise<void> {
  const usage = new UsageService(db, clock, new Calendar(timeZone));
  const meters = new Map<number, number>();
  let seq = 0;
  return async (deviceId, bytes) => {
    const meter = (meters.get(deviceId) ?? 0) + bytes;
    meters.set(deviceId, meter);
    seq++;
    const entries = [{ deviceId, rxBytes: bytes, txBytes: 0, meter }];
    const report = { journalId, batches: [{ seq, slotStartMs: clock.nowMs(), entries }], handshakes: [] };
    await usage.ingest({ id: nodeId }, report, quietPublisher(db, clock));
  };
}
