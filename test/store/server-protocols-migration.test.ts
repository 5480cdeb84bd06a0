/**
 * Migration 023 on both databases: servers made before it are WireGuard servers without obfuscation, and nodes have
 * reported no protocols yet (read as WireGuard only until they do).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { generateKeyPair } from '../../src/domain/wireguard-keys.ts';
import { MIGRATION_NAMES, migrate } from '../../src/store/migrate.ts';
import { openStore } from '../../src/store/open.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';
import { dumpTables } from '../support/table-dump.ts';

const NOW = '2026-03-04T05:06:07.089Z';
const PROTOCOLS = '023-server-protocols';
const BEFORE_PROTOCOLS = MIGRATION_NAMES[MIGRATION_NAMES.indexOf(PROTOCOLS) - 1] ?? '';

for (const kind of DATABASE_KINDS) {
  describe(`migration 023 (${kind})`, () => {
    let db: TestDatabase;
    before(async () => {
      db = await createTestDatabase(kind);
    });
    after(() => db.drop());

    it(`makes the servers of ${BEFORE_PROTOCOLS} WireGuard servers and leaves nodes unreported`, async () => {
      assert.ok(MIGRATION_NAMES.includes(PROTOCOLS), 'the migration is listed');
      const store = openStore({ databaseUrl: db.env.DATABASE_URL, dataDir: db.dataDir });
      try {
        await migrate(store, BEFORE_PROTOCOLS);
        await sql`insert into nodes (name, url, token, public_host, status, created_at)
          values ('local', null, null, '192.0.2.1', 'online', ${NOW})`.execute(store.db);
        const keys = generateKeyPair();
        await sql`insert into servers (node_id, name, country, city, status, endpoint, listen_port, private_key,
          public_key, address, subnet, dns, dns_on_server, mtu, persistent_keepalive, client_allowed_ips, capacity,
          created_at, updated_at)
          values (1, 'old', '', '', 'running', '192.0.2.1', 51820, ${keys.privateKey}, ${keys.publicKey},
          '10.1.0.1/24', '10.1.0.0/24', '[]', 0, 1420, 25, '["0.0.0.0/0"]', 253, ${NOW}, ${NOW})`.execute(store.db);
        await migrate(store);
      } finally {
        await store.close();
      }
      const dump = await dumpTables(db);
      assert.deepEqual(
        dump.servers?.map((s) => [s.name, s.protocol, s.obfuscation]),
        [['old', 'wireguard', null]],
      );
      assert.deepEqual(
        dump.nodes?.map((n) => [n.name, n.protocols]),
        [['local', null]],
      );
    });
  });
}
