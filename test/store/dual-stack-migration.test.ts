/**
 * Migration 017 on both databases: servers and devices made before it get their IPv6 addresses by the rules
 * the panel gives new ones; a backup made before it restores and gets them too.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { generateKeyPair } from '../../src/domain/wireguard-keys.ts';
import { MIGRATION_NAMES, migrate } from '../../src/store/migrate.ts';
import { openStore, type Store } from '../../src/store/open.ts';
import { ULA_PREFIX_KEY } from '../../src/store/panel-settings.ts';
import { createTestDatabase, DATABASE_KINDS, type DatabaseKind, type TestDatabase } from '../support/databases.ts';
import { runCli } from '../support/panel.ts';
import { dumpTables, readBackup, type TableDump } from '../support/table-dump.ts';

const NOW = '2026-03-04T05:06:07.089Z';
const DUAL_STACK = '017-dual-stack-addresses';
/** The level a panel before dual stack left its database at. */
const BEFORE_DUAL_STACK = MIGRATION_NAMES[MIGRATION_NAMES.indexOf(DUAL_STACK) - 1] ?? '';

/** A new database of the kind, dropped when the suite ends. */
function databaseOfSuite(kind: DatabaseKind): () => TestDatabase {
  let made: TestDatabase | undefined;
  before(async () => {
    made = await createTestDatabase(kind);
  });
  after(() => made?.drop());
  return () => {
    if (made === undefined) throw new Error('the database is made in before()');
    return made;
  };
}

const storeOf = (db: TestDatabase): Store => openStore({ databaseUrl: db.env.DATABASE_URL, dataDir: db.dataDir });

/**
 * Servers as a panel before 017 made them, with devices in the order of their ids: a default /24, a /24 whose
 * server has .9 (so a device has .1), a /20 with devices past its first 256 addresses.
 */
const OLD_FLEET = [
  { server: ['10.1.0.1/24', '10.1.0.0/24'], devices: ['10.1.0.2', '10.1.0.77', '10.1.0.254', '10.1.0.3'] },
  { server: ['10.2.0.9/24', '10.2.0.0/24'], devices: ['10.2.0.1', '10.2.0.2', '10.2.0.10'] },
  { server: ['10.3.16.1/20', '10.3.16.0/20'], devices: ['10.3.17.5', '10.3.31.254'] },
] as const;

/** The rows OLD_FLEET is, written with SQL of the schema before 017 (no code of this version involved). */
async function fillOldFleet(store: Store): Promise<void> {
  await sql`insert into nodes (name, url, token, public_host, status, created_at)
    values ('local', null, null, '192.0.2.1', 'online', ${NOW})`.execute(store.db);
  for (const [i, { server, devices }] of OLD_FLEET.entries()) {
    const serverKeys = generateKeyPair();
    const [address, subnet] = server;
    const { rows } = await sql<{ id: number }>`insert into servers (node_id, name, country, city, status, endpoint,
      listen_port, private_key, public_key, address, subnet, dns, dns_on_server, mtu, persistent_keepalive,
      client_allowed_ips, capacity, created_at, updated_at)
      values (1, ${`s${i}`}, '', '', 'running', '192.0.2.1', ${51820 + i}, ${serverKeys.privateKey},
      ${serverKeys.publicKey}, ${address}, ${subnet}, '[]', 0, 1420, 25, '["0.0.0.0/0","::/0"]', 253, ${NOW}, ${NOW})
      returning id`.execute(store.db);
    for (const [j, device] of devices.entries()) {
      const keys = generateKeyPair();
      await sql`insert into devices (server_id, name, address, public_key, private_key, enabled, data_limit,
        limit_period, usage_reset_at, speed_limit, created_at, updated_at)
        values (${rows[0]?.id}, ${`d${j}`}, ${device}, ${keys.publicKey}, ${keys.privateKey}, 1, 0, 'monthly', ${NOW},
        0, ${NOW}, ${NOW})`.execute(store.db);
    }
  }
}

/** Checks what 017 gave OLD_FLEET in `dump`: one /48, a /64 each in server order, devices by the rules. */
function assertAddressed(dump: TableDump): void {
  const setting = dump.panel_settings?.find((row) => row.key === ULA_PREFIX_KEY);
  const ula = /^(fd[0-9a-f]{2}:[0-9a-f]{1,4}:[0-9a-f]{1,4})::\/48$/.exec(String(setting?.value));
  assert.ok(ula?.[1] !== undefined, `a ULA /48 in panel_settings: ${JSON.stringify(setting)}`);
  const prefix = ula[1];
  const servers = [...(dump.servers ?? [])].sort((a, b) => Number(a.id) - Number(b.id));
  assert.deepEqual(
    servers.map((s) => [s.subnet6, s.address6, s.ipv6]),
    [
      [`${prefix}::/64`, `${prefix}::1/64`, 'off'],
      [`${prefix}:1::/64`, `${prefix}:1::1/64`, 'off'],
      [`${prefix}:2::/64`, `${prefix}:2::1/64`, 'off'],
    ],
    'the /64s of the /48 in server order, each server at ::1, ipv6 off until the node reports',
  );
  const byAddress = new Map((dump.devices ?? []).map((d) => [d.address, d.address6]));
  assert.deepEqual(Object.fromEntries(byAddress), {
    '10.1.0.2': `${prefix}::2`,
    '10.1.0.77': `${prefix}::77`,
    '10.1.0.254': `${prefix}::254`,
    '10.1.0.3': `${prefix}::3`,
    // ::1 is the server's own address6: the lowest free instead, so 10.2.0.2 finds ::2 taken and takes ::3.
    '10.2.0.1': `${prefix}:1::2`,
    '10.2.0.2': `${prefix}:1::3`,
    '10.2.0.10': `${prefix}:1::10`,
    '10.3.17.5': `${prefix}:2::17:5`,
    '10.3.31.254': `${prefix}:2::31:254`,
  });
}

for (const kind of DATABASE_KINDS) {
  describe(`migration 017 (${kind})`, () => {
    const filled = databaseOfSuite(kind);
    const empty = databaseOfSuite(kind);

    it(`addresses the servers and devices made at ${BEFORE_DUAL_STACK}`, async () => {
      const db = filled();
      const store = storeOf(db);
      try {
        await migrate(store, BEFORE_DUAL_STACK);
        await fillOldFleet(store);
        await migrate(store);
        assertAddressed(await dumpTables(db));
        const taken = (await dumpTables(db)).devices?.find((d) => d.address === '10.1.0.2');
        const keys = generateKeyPair();
        await assert.rejects(
          sql`insert into devices (server_id, name, address, address6, public_key, enabled, data_limit, limit_period,
            usage_reset_at, speed_limit, created_at, updated_at)
            values (${taken?.server_id}, 'twin', '10.1.0.200', ${taken?.address6}, ${keys.publicKey}, 1, 0, 'monthly',
            ${NOW}, 0, ${NOW}, ${NOW})`.execute(store.db),
          /address6|UNIQUE|unique/,
          'one address6 per server: the database holds it too',
        );
      } finally {
        await store.close();
      }
    });

    it('leaves an empty database empty, so a backup can still be restored into it', async () => {
      const db = empty();
      const store = storeOf(db);
      try {
        await migrate(store);
      } finally {
        await store.close();
      }
      const dump = await dumpTables(db);
      assert.deepEqual(
        Object.entries(dump).filter(([, rows]) => rows.length > 0),
        [],
      );
    });
  });
}

for (const [from, to] of [
  ['sqlite', 'postgres'],
  ['postgres', 'sqlite'],
] as const) {
  describe(`a backup made before 017, ${from} → ${to}`, () => {
    const source = databaseOfSuite(from);
    const target = databaseOfSuite(to);
    let file: string;
    before(async () => {
      const old = source();
      const store = storeOf(old);
      try {
        await migrate(store, BEFORE_DUAL_STACK);
        await fillOldFleet(store);
      } finally {
        await store.close();
      }
      file = join(old.dataDir, 'before-017.vpb');
      const made = await runCli(['backup', file], old.env);
      assert.equal(made.code, 0, made.stderr);
    });

    it('restores, and its servers and devices get their IPv6 addresses', async () => {
      assert.equal(readBackup(file).header.migrations.at(-1), BEFORE_DUAL_STACK);
      assert.ok(
        !readBackup(file)
          .header.tables.find((t) => t.name === 'devices')
          ?.columns.includes('address6'),
      );
      const restored = await runCli(['restore', file], target().env);
      assert.equal(restored.code, 0, restored.stderr);
      assertAddressed(await dumpTables(target()));
    });
  });
}
