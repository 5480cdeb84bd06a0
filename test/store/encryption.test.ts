import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { sql } from 'kysely';
import { generateKeyPair } from '../../src/domain/wireguard-keys.ts';
import { openMigratedStore } from '../../src/main/store.ts';
import { openStore, type Store } from '../../src/store/open.ts';
import { insertDevice, findDevice } from '../../src/store/devices.ts';
import { migrate } from '../../src/store/migrate.ts';
import { insertNode } from '../../src/store/nodes.ts';
import { insertServer, listServersOfNode } from '../../src/store/servers.ts';
import { insertWebhook, listEnabledWebhooks } from '../../src/store/webhooks.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';

const NOW = '2026-01-01T00:00:00.000Z';

/** A node, a server and a device with panel-made keys, through the store functions. */
async function fill(store: Store) {
  const server = generateKeyPair();
  const device = generateKeyPair();
  const node = await insertNode(store.db, {
    name: 'remote',
    url: 'http://192.0.2.9:7000',
    token: 'node-token-0123456789',
    public_host: '192.0.2.9',
    status: 'offline',
    created_at: NOW,
  });
  const serverRow = await insertServer(store.db, {
    node_id: node.id,
    name: 's',
    country: '',
    city: '',
    status: 'running',
    endpoint: '192.0.2.9',
    listen_port: 51820,
    private_key: server.privateKey,
    public_key: server.publicKey,
    address: '10.9.0.1/24',
    subnet: '10.9.0.0/24',
    dns: '[]',
    dns_on_server: 0,
    mtu: 1420,
    persistent_keepalive: 25,
    client_allowed_ips: '[]',
    capacity: 253,
    created_at: NOW,
    updated_at: NOW,
  });
  const deviceRow = await insertDevice(store.db, {
    server_id: serverRow.id,
    name: 'd',
    external_id: null,
    metadata: null,
    address: '10.9.0.2',
    public_key: device.publicKey,
    private_key: device.privateKey,
    enabled: 1,
    data_limit: 0,
    limit_period: 'monthly',
    usage_reset_at: NOW,
    expires_at: null,
    speed_limit: 0,
    last_handshake: null,
    created_at: NOW,
    updated_at: NOW,
  });
  await insertWebhook(store.db, {
    url: 'https://example.com/h',
    events: '[]',
    description: '',
    enabled: 1,
    secret: 'whsec_c2VjcmV0LXNpZ25pbmcta2V5',
    created_by: 'admin',
    created_at: NOW,
    updated_at: NOW,
  });
  return { node, serverRow, deviceRow, serverKey: server.privateKey, deviceKey: device.privateKey };
}

/** What the database holds in the encrypted columns, read past the store's encryption. */
async function stored(store: Store): Promise<string[]> {
  const raw = store.db.withoutPlugins();
  const rows = await sql<{
    v: string | null;
  }>`select private_key as v from servers union all select private_key from devices
    union all select token from nodes union all select secret from webhooks`.execute(raw);
  return rows.rows.map((r) => String(r.v));
}

for (const kind of DATABASE_KINDS) {
  describe(`private keys at rest (${kind})`, () => {
    let database: TestDatabase;
    const config = () => ({
      databaseUrl: database.env.DATABASE_URL,
      dataDir: database.dataDir,
      panelSecret: undefined,
    });
    const opened: Store[] = [];
    const open = async (overrides: { panelSecret?: Buffer } = {}) => {
      const store = await openMigratedStore({ ...config(), ...overrides });
      opened.push(store);
      return store;
    };

    beforeEach(async () => {
      database = await createTestDatabase(kind);
    });
    afterEach(async () => {
      for (const store of opened.splice(0)) await store.close();
      await database.drop();
    });

    it(
      'makes a secret readable by the panel user only on first start, ' + 'and keeps every key sealed in the database',
      async () => {
        const store = await open();
        const secretFile = join(database.dataDir, 'panel.secret');
        assert.equal(statSync(secretFile).mode & 0o777, 0o600);
        assert.match(readFileSync(secretFile, 'utf8'), /^[A-Za-z0-9+/]{43}=\n$/);
        const { serverRow, deviceRow, serverKey, deviceKey } = await fill(store);
        assert.equal(serverRow.private_key, serverKey, 'an insert answers the plain value');
        assert.equal((await findDevice(store.db, deviceRow.id))?.private_key, deviceKey);
        assert.equal((await listServersOfNode(store.db, serverRow.node_id))[0]?.private_key, serverKey);
        assert.equal((await listEnabledWebhooks(store.db))[0]?.secret, 'whsec_c2VjcmV0LXNpZ25pbmcta2V5');
        const values = await stored(store);
        assert.equal(values.length, 4);
        for (const value of values) assert.match(value, /^enc:v1:[A-Za-z0-9_-]+$/);
        for (const plain of [serverKey, deviceKey, 'node-token-0123456789', 'whsec_c2VjcmV0LXNpZ25pbmcta2V5'])
          assert.ok(!values.some((v) => v.includes(plain)));
      },
    );

    it('opens the same database again with the same secret, and with it given as PANEL_SECRET', async () => {
      const { deviceRow, deviceKey } = await fill(await open());
      const secret = Buffer.from(readFileSync(join(database.dataDir, 'panel.secret'), 'utf8').trim(), 'base64');
      rmSync(join(database.dataDir, 'panel.secret'));
      const again = await open({ panelSecret: secret });
      assert.equal((await findDevice(again.db, deviceRow.id))?.private_key, deviceKey);
    });

    it('refuses to start with another secret or none, naming what to do, instead of issuing garbage', async () => {
      await fill(await open());
      await assert.rejects(
        open({ panelSecret: randomBytes(32) }),
        /PANEL_SECRET is not the panel secret the private keys are encrypted with/,
      );
      writeFileSync(join(database.dataDir, 'panel.secret'), `${randomBytes(32).toString('base64')}\n`);
      await assert.rejects(open(), /panel\.secret is not the panel secret the private keys are encrypted with/);
      rmSync(join(database.dataDir, 'panel.secret'));
      await assert.rejects(
        open(),
        /encrypted with a panel secret that is not here .*copy panel\.secret .*or set PANEL_SECRET/,
      );
      writeFileSync(join(database.dataDir, 'panel.secret'), 'not a secret\n');
      await assert.rejects(open(), /panel\.secret is not a panel secret \(32 bytes in base64\)/);
    });

    it('seals keys that an older panel stored in plain at the next start', async () => {
      const plain = openStore(config());
      await migrate(plain, '006-device-page-index');
      const node = await sql<{ id: number }>`insert into nodes (name, url, token, public_host, status, created_at)
        values ('n', 'http://192.0.2.1:7000', 'plain-node-token-1234', '192.0.2.1', 'offline', ${NOW})
        returning id`.execute(plain.db);
      const key = generateKeyPair();
      await sql`insert into servers (node_id, name, country, city, status, endpoint, listen_port, private_key,
        public_key, address, subnet, dns, dns_on_server, mtu, persistent_keepalive, client_allowed_ips, capacity,
        created_at, updated_at)
        values (${node.rows[0]?.id}, 's', '', '', 'running', 'e', 51820, ${key.privateKey}, ${key.publicKey},
        '10.1.0.1/24', '10.1.0.0/24', '[]', 0, 1420, 25, '[]', 253, ${NOW}, ${NOW})`.execute(plain.db);
      await plain.close();
      const store = await open();
      for (const value of await stored(store)) assert.match(value, /^enc:v1:/);
      const [server] = await listServersOfNode(store.db, Number(node.rows[0]?.id));
      assert.equal(server?.private_key, key.privateKey);
    });

    it('refuses writes of an encrypted column that it cannot seal', async () => {
      const store = await open();
      const { deviceRow } = await fill(store);
      await assert.rejects(
        store.db
          .updateTable('devices')
          .set({ private_key: sql<string>`upper(private_key)` })
          .where('id', '=', deviceRow.id)
          .execute(),
        /devices\.private_key is stored encrypted: write it as a value/,
      );
    });
  });
}
