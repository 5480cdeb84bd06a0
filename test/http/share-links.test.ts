import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { generateKeyPair } from '../../src/domain/wireguard-keys.ts';
import { openStore } from '../../src/store/open.ts';
import { migrate } from '../../src/store/migrate.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';
import { type ApiCall, callApi, type PanelProcess, startPanel } from '../support/panel.ts';

/** The share_links rows as the database holds them, read past the panel's encryption. */
async function storedShareLinks(db: TestDatabase): Promise<Record<string, unknown>[]> {
  const store = openStore({ databaseUrl: db.env.DATABASE_URL, dataDir: db.dataDir });
  try {
    return (await sql<Record<string, unknown>>`select * from share_links order by device_id`.execute(store.db)).rows;
  } finally {
    await store.close();
  }
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const tokenOf = (url: string) => new URL(url).pathname.split('/').at(-1) ?? '';

for (const kind of DATABASE_KINDS) {
  describe(`share links (${kind})`, () => {
    let db: TestDatabase;
    let panel: PanelProcess;
    let key: string;
    /** The ids of the servers 'one' and 'two'. */
    let servers: [number, number];

    const call: ApiCall = (method, path, body) => callApi(panel.url, key, method, path, body);

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await startPanel({ database: db, env: { PANEL_URL: 'https://vpn.example.com' } });
      key = await panel.createKey('shop', 'all', ['--no-rate-limit']);
      const made = async (name: string): Promise<number> => (await call('POST', '/servers', { name })).expect(201).id;
      servers = [await made('one'), await made('two')];
    });
    after(async () => {
      await panel.stop();
      await db.drop();
    });

    /** The local path of a share URL, fetched from the panel under test. */
    const open = (url: string, suffix = '') => fetch(`${panel.url}${new URL(url).pathname}${suffix}`);

    it('makes a link on PANEL_URL with at least 128 random bits; the page needs no account and is locked down', async () => {
      const expires = '2099-01-01T00:00:00Z';
      const body = { server_id: servers[0], name: '<b>phone</b>', data_limit: 5_000_000_000, expires_at: expires };
      const device = (await call('POST', '/devices', body)).expect(201);
      const link = (await call('POST', `/devices/${device.id}/share`, {})).expect(201);
      assert.match(link.url, /^https:\/\/vpn\.example\.com\/s\/[A-Za-z0-9_-]{43}$/);
      assert.equal(link.expires_at, null);
      assert.deepEqual((await call('GET', `/devices/${device.id}/share`)).expect(200), link);
      const page = await open(link.url);
      assert.equal(page.status, 200);
      assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
      assert.equal(page.headers.get('cache-control'), 'no-store');
      assert.equal(page.headers.get('referrer-policy'), 'no-referrer');
      const csp = page.headers.get('content-security-policy') ?? '';
      assert.match(csp, /default-src 'none'/);
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|script-src/);
      const html = await page.text();
      assert.ok(html.includes('&#60;b&#62;phone&#60;/b&#62;') && !html.includes('<b>phone'), 'the name is escaped');
      assert.match(html, /<img id="qr"[^>]+src="data:image\/png;base64,/);
      assert.match(html, /id="remaining">5\.00 GB of 5\.00 GB this month</);
      assert.match(html, /id="expires"><time datetime="2099-01-01T00:00:00.000Z">1 January 2099 at 00:00 UTC<\/time>/);
      const config = await open(link.url, '/config');
      assert.equal(await config.text(), device.config);
      assert.match(config.headers.get('content-disposition') ?? '', /attachment; filename=".+\.conf"/);
    });

    it('always shows the current config, also after a move', async () => {
      const device = (await call('POST', '/devices', { server_id: servers[0] })).expect(201);
      const link = (await call('POST', `/devices/${device.id}/share`)).expect(201);
      const moved = (await call('POST', `/devices/${device.id}/move`, { server_id: servers[1] })).expect(200);
      assert.equal(await (await open(link.url, '/config')).text(), moved.config);
    });

    it('stops a replaced, deleted or expired link at once; deleting a missing link succeeds', async () => {
      const device = (await call('POST', '/devices', { server_id: servers[0] })).expect(201);
      const first = (await call('POST', `/devices/${device.id}/share`)).expect(201);
      const second = (await call('POST', `/devices/${device.id}/share`)).expect(201);
      assert.equal((await open(first.url)).status, 404, 'replaced');
      assert.equal((await open(second.url)).status, 200);
      assert.equal((await call('DELETE', `/devices/${device.id}/share`)).status, 204);
      assert.equal((await open(second.url)).status, 404, 'deleted');
      assert.equal((await open(second.url, '/config')).status, 404);
      assert.equal((await call('DELETE', `/devices/${device.id}/share`)).status, 204, 'missing link');
      assert.equal((await call('GET', `/devices/${device.id}/share`)).status, 404);

      const soon = new Date(Date.now() + 1500).toISOString();
      const expiring = (await call('POST', `/devices/${device.id}/share`, { expires_at: soon })).expect(201);
      assert.equal(expiring.expires_at, soon);
      assert.equal((await open(expiring.url)).status, 200);
      await new Promise((r) => setTimeout(r, 1700));
      assert.equal((await open(expiring.url)).status, 404, 'expired');
      const shown = await call('GET', `/devices/${device.id}/share`);
      assert.equal(shown.status, 200, 'the API still shows an expired link');
      const past = await call('POST', `/devices/${device.id}/share`, { expires_at: '2001-01-01T00:00:00Z' });
      assert.equal(past.status, 422);
    });

    it('ends with its device, and records share events', async () => {
      const device = (await call('POST', '/devices', { server_id: servers[0] })).expect(201);
      const link = (await call('POST', `/devices/${device.id}/share`)).expect(201);
      await call('DELETE', `/devices/${device.id}/share`);
      const again = (await call('POST', `/devices/${device.id}/share`)).expect(201);
      await call('DELETE', `/devices/${device.id}`);
      assert.equal((await open(again.url)).status, 404);
      assert.equal((await open(link.url)).status, 404);
      const kinds = 'device.share_created,device.share_deleted';
      const events = (await call('GET', `/events?device_id=${device.id}&kind=${kinds}`)).expect(200);
      const shareKinds = events.data.map((e) => e.kind);
      assert.deepEqual(shareKinds, ['device.share_created', 'device.share_deleted', 'device.share_created']);
    });

    it('keeps no token in the database: its SHA-256, which finds the link, and a sealed copy for the URL', async () => {
      const device = (await call('POST', '/devices', { server_id: servers[0] })).expect(201);
      const link = (await call('POST', `/devices/${device.id}/share`)).expect(201);
      const token = tokenOf(link.url);
      const row = (await storedShareLinks(db)).find((r) => Number(r.device_id) === device.id);
      assert.ok(row !== undefined);
      assert.equal(row.token_hash, sha256(token));
      assert.match(String(row.token), /^enc:v1:[A-Za-z0-9_-]+$/, 'sealed with the panel secret');
      assert.ok(!JSON.stringify(row).includes(token), 'the token in plain nowhere in the row');
      if (kind === 'sqlite') {
        const files = ['vpn-panel.db', 'vpn-panel.db-wal'].map((f) => join(db.dataDir, f)).filter((f) => existsSync(f));
        for (const file of files) assert.ok(!readFileSync(file).includes(token), `the token in plain in ${file}`);
      }
      assert.equal((await open(link.url)).status, 200, 'the link works, found by its hash');
      const shown = (await call('GET', `/devices/${device.id}/share`)).expect(200);
      assert.equal(shown.url, link.url, 'the URL shown again');
    });

    it('answers unknown tokens with 404 without touching a key', async () => {
      for (const token of ['nope', 'A'.repeat(43), '../../etc/passwd']) {
        const page = await fetch(`${panel.url}/s/${encodeURIComponent(token)}`);
        assert.equal(page.status, 404, token);
        assert.equal(page.headers.get('cache-control'), 'no-store');
      }
    });
  });
}

for (const kind of DATABASE_KINDS) {
  describe(`share links made before tokens were hashed (${kind})`, () => {
    let db: TestDatabase;
    let panel: PanelProcess | undefined;
    after(async () => {
      await panel?.stop();
      await db.drop();
    });

    it('keep working after the upgrade: found by the SHA-256 the migration adds, their tokens sealed', async () => {
      db = await createTestDatabase(kind);
      const now = '2026-03-01T00:00:00.000Z';
      const serverKeys = generateKeyPair();
      const deviceKeys = [generateKeyPair(), generateKeyPair()] as const;
      const live = `${'L'.repeat(40)}ive`;
      const expired = `${'E'.repeat(40)}xpd`;
      // A database of the version before hashing, written as that version wrote it.
      const old = openStore({ databaseUrl: db.env.DATABASE_URL, dataDir: db.dataDir });
      await migrate(old, '010-panel-settings');
      await sql`insert into nodes (name, url, token, public_host, status, created_at)
        values ('local', null, null, '192.0.2.1', 'online', ${now})`.execute(old.db);
      await sql`insert into servers (node_id, name, country, city, status, endpoint, listen_port, private_key,
        public_key, address, subnet, dns, dns_on_server, mtu, persistent_keepalive, client_allowed_ips, capacity,
        created_at, updated_at)
        values (1, 's', '', '', 'running', '192.0.2.1', 51820, ${serverKeys.privateKey}, ${serverKeys.publicKey},
        '10.1.0.1/24', '10.1.0.0/24', '["1.1.1.1"]', 0, 1420, 25, '["0.0.0.0/0"]', 253, ${now}, ${now})`.execute(
        old.db,
      );
      for (const [i, keys] of deviceKeys.entries()) {
        await sql`insert into devices (server_id, name, external_id, metadata, address, public_key, private_key,
          enabled, data_limit, limit_period, usage_reset_at, expires_at, speed_limit, last_handshake, created_at,
          updated_at)
          values (1, ${`d${i}`}, null, null, ${`10.1.0.${i + 2}`}, ${keys.publicKey}, ${keys.privateKey}, 1, 0,
          'monthly', ${now}, null, 0, null, ${now}, ${now})`.execute(old.db);
      }
      await sql`insert into share_links (device_id, token, expires_at, created_at) values
        (1, ${live}, null, ${now}), (2, ${expired}, '2026-03-02T00:00:00.000Z', ${now})`.execute(old.db);
      await old.close();

      panel = await startPanel({ database: db, env: { PANEL_URL: 'https://vpn.example.com' } });
      const key = await panel.createKey('reader', 'devices:read');
      const page = await fetch(`${panel.url}/s/${live}/config`);
      assert.equal(page.status, 200);
      assert.ok((await page.text()).includes(`PrivateKey = ${deviceKeys[0].privateKey}`), "the device's own config");
      assert.equal((await fetch(`${panel.url}/s/${expired}`)).status, 404, 'an expired link stays expired');
      const shown = (await callApi(panel.url, key, 'GET', '/devices/1/share')).expect(200);
      assert.deepEqual(shown, { url: `https://vpn.example.com/s/${live}`, expires_at: null });

      const rows = await storedShareLinks(db);
      assert.deepEqual(
        rows.map((r) => r.token_hash),
        [sha256(live), sha256(expired)],
      );
      // Sealed at the first start after the upgrade.
      for (const row of rows) assert.match(String(row.token), /^enc:v1:/);
    });
  });
}
