import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';
import { callApi, type PanelProcess, startPanel } from '../support/panel.ts';

for (const kind of DATABASE_KINDS) {
  describe(`share links (${kind})`, () => {
    let db: TestDatabase;
    let panel: PanelProcess;
    let key: string;
    const servers: number[] = [];

    const call = (method: string, path: string, body?: unknown) => callApi(panel.url, key, method, path, body);

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await startPanel({ database: db, env: { PANEL_URL: 'https://vpn.example.com' } });
      key = await panel.createKey('shop', 'all', ['--no-rate-limit']);
      for (const name of ['one', 'two']) servers.push((await call('POST', '/servers', { name })).json.id);
    });
    after(async () => {
      await panel.stop();
      await db.drop();
    });

    /** The local path of a share URL, fetched from the panel under test. */
    const open = (url: string, suffix = '') => fetch(`${panel.url}${new URL(url).pathname}${suffix}`);

    it('makes a link on PANEL_URL with at least 128 random bits; the page needs no account and is locked down', async () => {
      const device = await call('POST', '/devices', { server_id: servers[0], name: '<b>phone</b>', data_limit: 5_000_000_000, expires_at: '2099-01-01T00:00:00Z' });
      const link = await call('POST', `/devices/${device.json.id}/share`, {});
      assert.equal(link.status, 201);
      assert.match(link.json.url, /^https:\/\/vpn\.example\.com\/s\/[A-Za-z0-9_-]{43}$/);
      assert.equal(link.json.expires_at, null);
      assert.deepEqual((await call('GET', `/devices/${device.json.id}/share`)).json, link.json);
      const page = await open(link.json.url);
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
      const config = await open(link.json.url, '/config');
      assert.equal(await config.text(), device.json.config);
      assert.match(config.headers.get('content-disposition') ?? '', /attachment; filename=".+\.conf"/);
    });

    it('always shows the current config, also after a move', async () => {
      const device = await call('POST', '/devices', { server_id: servers[0] });
      const link = await call('POST', `/devices/${device.json.id}/share`);
      const moved = await call('POST', `/devices/${device.json.id}/move`, { server_id: servers[1] });
      assert.equal(await (await open(link.json.url, '/config')).text(), moved.json.config);
    });

    it('stops a replaced, deleted or expired link at once; deleting a missing link succeeds', async () => {
      const device = await call('POST', '/devices', { server_id: servers[0] });
      const first = await call('POST', `/devices/${device.json.id}/share`);
      const second = await call('POST', `/devices/${device.json.id}/share`);
      assert.equal((await open(first.json.url)).status, 404, 'replaced');
      assert.equal((await open(second.json.url)).status, 200);
      assert.equal((await call('DELETE', `/devices/${device.json.id}/share`)).status, 204);
      assert.equal((await open(second.json.url)).status, 404, 'deleted');
      assert.equal((await open(second.json.url, '/config')).status, 404);
      assert.equal((await call('DELETE', `/devices/${device.json.id}/share`)).status, 204, 'missing link');
      assert.equal((await call('GET', `/devices/${device.json.id}/share`)).status, 404);

      const soon = new Date(Date.now() + 1500).toISOString();
      const expiring = await call('POST', `/devices/${device.json.id}/share`, { expires_at: soon });
      assert.equal(expiring.json.expires_at, soon);
      assert.equal((await open(expiring.json.url)).status, 200);
      await new Promise((r) => setTimeout(r, 1700));
      assert.equal((await open(expiring.json.url)).status, 404, 'expired');
      assert.equal((await call('GET', `/devices/${device.json.id}/share`)).status, 200, 'the API still shows an expired link');
      assert.equal((await call('POST', `/devices/${device.json.id}/share`, { expires_at: '2001-01-01T00:00:00Z' })).status, 422);
    });

    it('ends with its device, and records share events', async () => {
      const device = await call('POST', '/devices', { server_id: servers[0] });
      const link = await call('POST', `/devices/${device.json.id}/share`);
      await call('DELETE', `/devices/${device.json.id}/share`);
      const again = await call('POST', `/devices/${device.json.id}/share`);
      await call('DELETE', `/devices/${device.json.id}`);
      assert.equal((await open(again.json.url)).status, 404);
      assert.equal((await open(link.json.url)).status, 404);
      const events = await call('GET', `/events?device_id=${device.json.id}&kind=device.share_created,device.share_deleted`);
      assert.deepEqual(events.json.data.map((e: { kind: string }) => e.kind), ['device.share_created', 'device.share_deleted', 'device.share_created']);
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
