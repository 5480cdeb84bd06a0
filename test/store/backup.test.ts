import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { sql } from 'kysely';
import { completeObfuscation, obfuscationJson } from '../../src/domain/protocols.ts';
import { generateKeyPair } from '../../src/domain/wireguard-keys.ts';
import { openMigratedStore } from '../../src/main/store.ts';
import { writeBackupFile } from '../../src/store/backup-file.ts';
import { openStore, type Store } from '../../src/store/open.ts';
import { deleteDevices, insertDevice } from '../../src/store/devices.ts';
import { claimIdempotencyKey, completeIdempotencyKey } from '../../src/store/idempotency.ts';
import { insertApiKey } from '../../src/store/api-keys.ts';
import { insertConsoleSession } from '../../src/store/console-sessions.ts';
import { insertConsoleUser } from '../../src/store/console-users.ts';
import { migrate } from '../../src/store/migrate.ts';
import { insertNode } from '../../src/store/nodes.ts';
import { insertServer } from '../../src/store/servers.ts';
import { replaceShareLink } from '../../src/store/share-links.ts';
import { createTestDatabase, type DatabaseKind, type TestDatabase } from '../support/databases.ts';
import { runCli } from '../support/panel.ts';
import { dumpTables, readBackup } from '../support/table-dump.ts';

const NOW = '2026-03-04T05:06:07.089Z';
const work = mkdtempSync(join(tmpdir(), 'vpn-panel-backup-test-'));
const databases: TestDatabase[] = [];
after(async () => {
  for (const database of databases) await database.drop();
  rmSync(work, { recursive: true, force: true });
});

async function database(kind: DatabaseKind): Promise<TestDatabase> {
  const made = await createTestDatabase(kind);
  databases.push(made);
  return made;
}

const storeOf = (db: TestDatabase) =>
  openMigratedStore({ databaseUrl: db.env.DATABASE_URL, dataDir: db.dataDir, panelSecret: undefined });

/** The secret of `from` in `to`'s DATA_DIR, as an operator copies it when moving a panel. */
function shareSecret(from: TestDatabase, to: TestDatabase): void {
  copyFileSync(join(from.dataDir, 'panel.secret'), join(to.dataDir, 'panel.secret'));
}

/**
 * A table no migration of this code makes, with types the project's own tables avoid, standing for
 * a table another developer adds: a backup must carry it without a change to the backup code.
 * (jsonb keeps a JSON value, not its spacing: the JSON here is written compact.)
 */
async function createExtraTable(db: TestDatabase): Promise<void> {
  const store = openStore({ databaseUrl: db.env.DATABASE_URL, dataDir: db.dataDir });
  await migrate(store);
  const postgres = db.kind === 'postgres';
  await sql`create table aaa_extras (
    id ${sql.raw(postgres ? 'bigserial' : 'integer')} primary key ${sql.raw(postgres ? '' : 'autoincrement')},
    device_id integer not null references devices (id),
    flag boolean not null, at ${sql.raw(postgres ? 'timestamptz' : 'text')},
    doc ${sql.raw(postgres ? 'jsonb' : 'text')},
    blob ${sql.raw(postgres ? 'bytea' : 'blob')}, ratio ${sql.raw(postgres ? 'double precision' : 'real')})`.execute(
    store.db,
  );
  await store.close();
}

/** Rows of every kind, with values that are easy to lose on the way: big, empty, odd text, nulls. */
async function fill(store: Store): Promise<{ deletedDeviceId: number }> {
  const node = await insertNode(store.db, {
    name: 'remote',
    url: 'http://192.0.2.9:7000',
    token: 'a-node-token-of-16+',
    public_host: '192.0.2.9',
    status: 'online',
    last_seen_at: NOW,
    protocols: '["wireguard","amneziawg"]',
    created_at: NOW,
  });
  const serverKeys = generateKeyPair();
  const server = await insertServer(store.db, {
    node_id: node.id,
    name: 'Zürich ☃ "quoted"\nline',
    country: 'CH',
    city: 'Zürich',
    status: 'running',
    protocol: 'amneziawg',
    obfuscation: obfuscationJson(completeObfuscation({ h1: '100-200', i1: '<b 0xc0ffee><r 16>' }, 1420)),
    endpoint: 'vpn.example.com',
    listen_port: 51820,
    private_key: serverKeys.privateKey,
    public_key: serverKeys.publicKey,
    address: '10.9.0.1/24',
    subnet: '10.9.0.0/24',
    dns: '["1.1.1.1","9.9.9.9"]',
    dns_on_server: 0,
    mtu: 1420,
    persistent_keepalive: 25,
    client_allowed_ips: '["0.0.0.0/0","::/0"]',
    capacity: 253,
    created_at: NOW,
    updated_at: NOW,
  });
  const ids: number[] = [];
  for (let i = 0; i < 30; i++) {
    const keys = generateKeyPair();
    const device = await insertDevice(store.db, {
      server_id: server.id,
      name: `d-${i}`,
      external_id: i % 3 === 0 ? null : `cust-${i % 4}`,
      metadata: i % 2 === 0 ? null : JSON.stringify({ plan: 'pro', n: i, s: 'é\u0000x' }),
      address: `10.9.0.${i + 2}`,
      public_key: keys.publicKey,
      private_key: i % 5 === 0 ? null : keys.privateKey,
      enabled: i % 7 === 0 ? 0 : 1,
      data_limit: i === 1 ? 2 ** 53 - 1 : i * 1_000_000_000,
      limit_period: i % 2 === 0 ? 'monthly' : 'total',
      usage_reset_at: NOW,
      expires_at: i % 4 === 0 ? null : '2027-01-01T00:00:00.000Z',
      speed_limit: i * 100,
      last_handshake: null,
      created_at: NOW,
      updated_at: NOW,
    });
    ids.push(device.id);
  }
  // The newest device is gone: its id must never be handed out again, also after a restore.
  const deletedDeviceId = ids.at(-1) ?? 0;
  await deleteDevices(store.db, [deletedDeviceId]);
  // Found by its hash, the token itself sealed: both columns travel as they are.
  const token = { token_hash: 'a'.repeat(64), token: 'T'.repeat(43) };
  await replaceShareLink(store.db, { device_id: ids[0] ?? 0, ...token, expires_at: null, created_at: NOW });
  const key = await insertApiKey(store.db, {
    name: 'shop',
    keyHash: 'f'.repeat(64),
    scopes: 'devices:read',
    rateLimitExempt: false,
    createdAt: NOW,
  });
  const id = { apiKeyId: key.id, key: 'idem-1' };
  await claimIdempotencyKey(store.db, id, 'fp', NOW);
  await completeIdempotencyKey(store.db, id, 201, JSON.stringify({ config: 'PrivateKey = secret' }));
  // console_sessions sorts before the console_users it references: a restore loads the users first.
  const passwordHash = 'scrypt$N=32768,r=8,p=3$c2FsdHNhbHRzYWx0c2FsdA$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5';
  const user = await insertConsoleUser(store.db, { name: 'ops', role: 'viewer', passwordHash, createdAt: NOW });
  await insertConsoleSession(store.db, { userId: user.id, tokenHash: 'b'.repeat(64), createdAt: NOW, expiresAt: NOW });
  return { deletedDeviceId };
}

async function fillExtras(db: TestDatabase): Promise<void> {
  const store = openStore({ databaseUrl: db.env.DATABASE_URL, dataDir: db.dataDir });
  const postgres = db.kind === 'postgres';
  await sql`insert into aaa_extras (device_id, flag, at, doc, blob, ratio) values
    (1, ${postgres ? true : 1}, ${NOW}, ${'{"a":[1,2],"b":null}'}, ${Buffer.from([0, 1, 2, 255])}, 0.25),
    (2, ${postgres ? false : 0}, null, null, null, null)`.execute(store.db);
  await store.close();
}

async function backup(db: TestDatabase, name: string): Promise<string> {
  const file = join(work, name);
  const result = await runCli(['backup', file], db.env);
  assert.equal(result.code, 0, result.stderr);
  return file;
}

async function restore(
  db: TestDatabase,
  file: string,
  ...extra: string[]
): Promise<{ code: number; stderr: string; stdout: string }> {
  return runCli(['restore', file, ...extra], db.env);
}

function withoutExtras(dump: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(dump).filter(([name]) => name !== 'aaa_extras'));
}

for (const chain of [
  ['sqlite', 'postgres', 'sqlite'],
  ['postgres', 'sqlite', 'postgres'],
] as const) {
  describe(`backup and restore across databases: ${chain.join(' → ')}`, () => {
    let source: TestDatabase;
    let middle: TestDatabase;
    let last: TestDatabase;
    let deletedDeviceId: number;

    before(async () => {
      [source, middle, last] = [await database(chain[0]), await database(chain[1]), await database(chain[2])];
      const store = await storeOf(source);
      ({ deletedDeviceId } = await fill(store));
      await store.close();
      for (const db of [source, middle, last]) await createExtraTable(db);
      await fillExtras(source);
      shareSecret(source, middle);
      shareSecret(source, last);
    });

    it('carries every row of every table there and back unchanged, tables added by others included', async () => {
      const first = await backup(source, `${chain.join('-')}-1.vpb`);
      const restored = await restore(middle, first);
      assert.equal(restored.code, 0, restored.stderr);
      assert.match(restored.stdout, /restored \d+ rows of \d+ tables/);
      assert.deepEqual(
        withoutExtras(await dumpTables(middle)),
        withoutExtras(await dumpTables(source)),
        `${chain[0]} → ${chain[1]}: the panel's own tables are equal`,
      );
      const inFile = readBackup(first).rows;
      const awg = (await dumpTables(middle)).servers?.[0];
      assert.deepEqual([awg?.protocol, typeof awg?.obfuscation], ['amneziawg', 'string'], 'AmneziaWG columns restored');
      assert.equal(awg?.obfuscation, (await dumpTables(source)).servers?.[0]?.obfuscation);
      assert.equal((await dumpTables(middle)).nodes?.[0]?.protocols, '["wireguard","amneziawg"]');
      assert.deepEqual(
        withoutExtras(inFile),
        withoutExtras(await dumpTables(source)),
        'the file holds what the source holds',
      );
      assert.deepEqual(
        inFile.aaa_extras?.[0],
        {
          id: 1,
          device_id: 1,
          flag: 1,
          at: NOW,
          doc: '{"a":[1,2],"b":null}',
          blob: { base64: 'AAEC/w==' },
          ratio: 0.25,
        },
        'other types in portable form',
      );
      const second = await backup(middle, `${chain.join('-')}-2.vpb`);
      assert.equal((await restore(last, second)).code, 0);
      assert.deepEqual(
        await dumpTables(last),
        await dumpTables(source),
        'there and back: every row equal, the extra types too',
      );
    });

    it('keeps ids past those of deleted rows, so no id is handed out twice', async () => {
      const store = await storeOf(last);
      try {
        const keys = generateKeyPair();
        const device = await insertDevice(store.db, {
          server_id: 1,
          name: 'after-restore',
          external_id: null,
          metadata: null,
          address: '10.9.0.200',
          public_key: keys.publicKey,
          private_key: keys.privateKey,
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
        assert.equal(device.id, deletedDeviceId + 1);
      } finally {
        await store.close();
      }
    });
  });
}

/** One line on stderr that starts like every CLI error, exit code 1. */
function assertRefused(result: { code: number; stderr: string }, message: RegExp): void {
  assert.equal(result.code, 1, result.stderr);
  const lines = result.stderr.trim().split('\n');
  assert.equal(lines.length, 1, result.stderr);
  assert.match(lines[0] ?? '', /^vpn-panel: nothing was restored: /);
  assert.match(lines[0] ?? '', message);
}

/** A file with a valid checksum around `lines`, as a newer or a buggy writer would make it. */
async function craft(name: string, lines: unknown[]): Promise<string> {
  const file = join(work, name);
  await writeBackupFile(
    file,
    (async function* () {
      for (const line of lines) yield `${JSON.stringify(line)}\n`;
    })(),
  );
  return file;
}

function linesOf(file: string): unknown[] {
  return gunzipSync(readFileSync(file))
    .toString('utf8')
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l));
}

for (const kind of ['sqlite', 'postgres'] as const) {
  describe(`restore refuses and changes nothing (${kind})`, () => {
    let source: TestDatabase;
    let target: TestDatabase;
    let file: string;
    let untouched: Record<string, unknown>;

    const attempt = async (badFile: string, message: RegExp) => {
      assertRefused(await restore(target, badFile, '--replace'), message);
      assert.deepEqual(await dumpTables(target), untouched, 'the database is as it was');
    };

    before(async () => {
      source = await database('sqlite');
      target = await database(kind);
      const store = await storeOf(source);
      await fill(store);
      await store.close();
      file = await backup(source, `refusals-${kind}.vpb`);
      // The target has a state of its own that every refusal must leave alone.
      shareSecret(source, target);
      const own = await storeOf(target);
      await insertNode(own.db, {
        name: 'own',
        url: null,
        token: null,
        public_host: '198.51.100.1',
        status: 'online',
        created_at: NOW,
      });
      await own.close();
      untouched = await dumpTables(target);
    });

    it('a truncated file', async () => {
      const bytes = readFileSync(file);
      for (const length of [bytes.length - 1, 50]) {
        const cut = join(work, `cut-${length}.vpb`);
        writeFileSync(cut, bytes.subarray(0, length));
        await attempt(
          cut,
          length > 100
            ? /is damaged: its SHA-256 checksum does not match \(the file is truncated or altered\)/
            : /is not a vpn-panel backup/,
        );
      }
    });

    it('a file with one byte altered, wherever it is', async () => {
      const bytes = readFileSync(file);
      for (const position of [5, 120, Math.floor(bytes.length / 2), bytes.length - 1]) {
        const altered = Buffer.from(bytes);
        altered[position] = (altered[position] ?? 0) ^ 0x01;
        const bad = join(work, `altered-${position}.vpb`);
        writeFileSync(bad, altered);
        await attempt(bad, /is damaged|is not a vpn-panel backup/);
      }
    });

    it('a database that is not empty, unless told to replace it', async () => {
      assertRefused(
        await restore(target, file),
        /the database is not empty \(rows in .*nodes.*\): restore into an empty database, or give --replace/,
      );
      assert.deepEqual(await dumpTables(target), untouched);
    });

    it('a backup from a newer vpn-panel', async () => {
      const [header, ...rest] = linesOf(file);
      assert.ok(
        header !== null && typeof header === 'object' && 'migrations' in header && Array.isArray(header.migrations),
      );
      const newer = await craft('newer.vpb', [
        { ...header, migrations: [...header.migrations, '999-future'] },
        ...rest,
      ]);
      await attempt(newer, /the backup comes from a newer vpn-panel \(migration 999-future\)/);
    });

    it('a backup whose rows break a rule of the schema: the one transaction is rolled back whole', async () => {
      const lines = linesOf(file);
      const device = lines.find((l) => Array.isArray(l) && l[0] === 'devices');
      const trailer = lines.at(-1);
      assert.ok(
        trailer !== null &&
          typeof trailer === 'object' &&
          'rows' in trailer &&
          trailer.rows !== null &&
          typeof trailer.rows === 'object' &&
          'devices' in trailer.rows,
      );
      const duplicated = [
        ...lines.slice(0, -1),
        device,
        { rows: { ...trailer.rows, devices: Number(trailer.rows.devices) + 1 } },
      ];
      await attempt(
        await craft('duplicate.vpb', duplicated),
        /UNIQUE constraint failed|duplicate key value violates unique constraint/,
      );
    });

    it('a backup made with another panel secret, or when the secret is not here', async () => {
      const stranger = await database('sqlite');
      assertRefused(
        await restore(stranger, file),
        /the private keys are encrypted with a panel secret that is not here .*copy panel\.secret/,
      );
      writeFileSync(join(stranger.dataDir, 'panel.secret'), `${Buffer.alloc(32, 7).toString('base64')}\n`);
      assertRefused(
        await restore(stranger, file),
        /panel\.secret is not the panel secret the private keys are encrypted with/,
      );
    });

    it('and then restores the same file with --replace', async () => {
      const result = await restore(target, file, '--replace');
      assert.equal(result.code, 0, result.stderr);
      assert.deepEqual(await dumpTables(target), readBackup(file).rows);
    });
  });
}

describe('a backup of an older schema', () => {
  it('restores into an empty database, which is then migrated on and its plain keys sealed', async () => {
    const old = await database('sqlite');
    const store = openStore({ databaseUrl: undefined, dataDir: old.dataDir });
    await migrate(store, '006-device-page-index');
    const keys = generateKeyPair();
    await sql`insert into nodes (name, url, token, public_host, status, created_at)
      values ('local', null, null, '192.0.2.1', 'online', ${NOW})`.execute(store.db);
    await sql`insert into servers (node_id, name, country, city, status, endpoint, listen_port, private_key, public_key,
      address, subnet, dns, dns_on_server, mtu, persistent_keepalive, client_allowed_ips, capacity, created_at,
      updated_at)
      values (1, 's', '', '', 'running', 'e', 51820, ${keys.privateKey}, ${keys.publicKey}, '10.1.0.1/24',
      '10.1.0.0/24', '[]', 0, 1420, 25, '[]', 253, ${NOW}, ${NOW})`.execute(store.db);
    await sql`insert into devices (server_id, name, address, public_key, private_key, enabled, data_limit, limit_period,
      usage_reset_at, speed_limit, created_at, updated_at)
      values (1, 'd', '10.1.0.2', ${keys.publicKey}, null, 1, 0, 'monthly', ${NOW}, 0, ${NOW}, ${NOW})`.execute(
      store.db,
    );
    const token = 'S'.repeat(43);
    await sql`insert into share_links (device_id, token, expires_at, created_at)
      values (1, ${token}, null, ${NOW})`.execute(store.db);
    await store.close();
    const file = await backup(old, 'old-schema.vpb');
    assert.equal(readBackup(file).header.migrations.at(-1), '006-device-page-index');
    assert.equal(readBackup(file).header.secret_fingerprint, null);

    const target = await database('postgres');
    const result = await restore(target, file);
    assert.equal(result.code, 0, result.stderr);
    const dump = await dumpTables(target);
    assert.deepEqual(
      dump.panel_settings?.map((setting) => setting.key).sort(),
      ['ipv6_ula_prefix', 'secret_fingerprint'],
      'migrated on: the newer table is there, with the fingerprint of a new secret and the ULA prefix of 017',
    );
    assert.match(String(dump.servers?.[0]?.private_key), /^enc:v1:/);
    const tokenHash = createHash('sha256').update(token).digest('hex');
    assert.equal(dump.share_links?.[0]?.token_hash, tokenHash, 'a plain share link of the backup: found by its hash');
    assert.match(String(dump.share_links?.[0]?.token), /^enc:v1:/, 'and its token sealed');
    const opened = await storeOf(target);
    try {
      const server = await opened.db.selectFrom('servers').select('private_key').executeTakeFirstOrThrow();
      assert.equal(server.private_key, keys.privateKey);
    } finally {
      await opened.close();
    }

    const newer = await database('sqlite');
    shareSecret(target, newer);
    assert.equal((await runCli(['keys', 'list'], newer.env)).code, 0, 'a database at the current schema');
    assertRefused(
      await restore(newer, file, '--replace'),
      new RegExp(
        /the database is at a newer schema \(\d{3}-[a-z-]+\) than the backup \(006-device-page-index\): /.source +
          /restore into an empty database/.source,
      ),
    );
  });
});
