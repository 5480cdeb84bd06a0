import { after, before } from 'node:test';
import type { Insertable } from 'kysely';
import { generateKeyPair } from '../../src/domain/wireguard-keys.ts';
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
      private_key: generateKeyPair().privateKey,
      public_key: '',
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
