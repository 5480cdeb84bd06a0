/**
 * The panel's metrics in process (issue 13): what the listener would serve, scraped from the panel's own
 * registry after requests through the API, compared with what the API itself reports.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DEVICE_STATUSES } from '../../src/domain/devices.ts';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';
import { parseScrape, type Scrape, sampleValue } from '../support/metrics.ts';
import type { ApiClient } from '../support/panel.ts';

const HOUR_MS = 3_600_000;

for (const kind of DATABASE_KINDS) {
  describe(`metrics (${kind}, in process)`, () => {
    let db: TestDatabase;
    let panel: AppUnderTest;
    let api: ApiClient;
    let key: string;

    const scrape = async (): Promise<Scrape> => {
      assert.ok(panel.metrics, 'metrics are on by default');
      return parseScrape(await panel.metrics.scrape());
    };

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await buildTestApp(db, { WEBHOOK_ALLOW_PRIVATE: '1' });
      key = await panel.createKey('ops', 'all', { rateLimitExempt: true });
      api = panel.client(key);
    });
    after(async () => {
      await panel.close();
      await db.drop();
    });

    it('counts answers by method, route template and status, never by the URL', async () => {
      const before = await scrape();
      const count = (s: Scrape, labels: Record<string, string>) =>
        sampleValue(s, 'vpn_panel_http_requests_total', labels) ?? 0;
      const missing = { method: 'GET', route: '/api/v1/devices/:id', status: '404' };
      const unmatched = { method: 'GET', route: 'unmatched', status: '404' };
      for (const id of [424242, 434343])
        assert.equal((await api.GET('/api/v1/devices/{id}', { params: { path: { id } } })).response.status, 404);
      for (const path of ['/no/such/route', '/s/also-not-a-route/x'])
        assert.equal((await panel.app.inject({ url: path })).statusCode, 404);
      assert.equal((await panel.app.inject({ url: '/s/a-share-token-nobody-has' })).statusCode, 404);
      assert.equal((await api.GET('/api/v1/servers')).response.status, 200);

      const after = await scrape();
      assert.equal(count(after, missing) - count(before, missing), 2);
      assert.equal(count(after, unmatched) - count(before, unmatched), 2);
      const listed = { method: 'GET', route: '/api/v1/servers', status: '200' };
      assert.equal(count(after, listed) - count(before, listed), 1);
      const sharePage = { method: 'GET', route: '/s/:token', status: '404' };
      assert.equal(count(after, sharePage) - count(before, sharePage), 1);
      const durations = sampleValue(after, 'vpn_panel_http_request_duration_seconds_count', {
        method: 'GET',
        route: '/api/v1/devices/:id',
      });
      assert.ok((durations ?? 0) >= 2, 'each answer is timed under its route');
      const routes = new Set(
        after.samples.filter((s) => s.name === 'vpn_panel_http_requests_total').map((s) => s.labels.route),
      );
      for (const route of routes)
        assert.doesNotMatch(route ?? '', /424242|no\/such|also-not|share-token/, 'no URL becomes a label value');
    });

    it(
      'counts devices by status, online ones, servers, nodes and ' +
        'pending deliveries and mail as the API shows them',
      async () => {
        const one = (await api.POST('/api/v1/servers', { body: { name: 'm-1', max_devices: 20 } })).data;
        const two = (await api.POST('/api/v1/servers', { body: { name: 'm-2', max_devices: 20 } })).data;
        assert.ok(one && two, 'servers are created');
        const hook = await api.POST('/api/v1/webhooks', {
          body: { url: 'http://127.0.0.1:9/hook', events: ['device.created'] },
        });
        assert.equal(hook.response.status, 201);
        const past = new Date(Date.now() - HOUR_MS).toISOString();
        const bodies = [
          { server_id: one.id },
          { server_id: one.id },
          { server_id: two.id },
          { server_id: one.id, enabled: false },
          { server_id: two.id, enabled: false, expires_at: past },
          { server_id: one.id, expires_at: past },
          { server_id: two.id, data_limit: 1000, limit_period: 'total' as const },
          { server_id: two.id, data_limit: 1000, limit_period: 'total' as const, expires_at: past },
        ];
        const ids: number[] = [];
        for (const body of bodies) {
          const created = await api.POST('/api/v1/devices', { body });
          assert.equal(created.response.status, 201, JSON.stringify(created.error));
          ids.push(created.data?.id ?? 0);
        }
        // Usage over the limit, and recent handshakes, as the node's reports would have stored them.
        const limited = ids.slice(6);
        await panel.store.db
          .updateTable('devices')
          .set({ period_rx: 600, period_tx: 600 })
          .where('id', 'in', limited)
          .execute();
        const handshakeAt = new Date(Date.now() - 60_000).toISOString();
        const staleAt = new Date(Date.now() - HOUR_MS).toISOString();
        await panel.store.db
          .updateTable('devices')
          .set({ last_handshake: handshakeAt })
          .where('id', 'in', [ids[0] ?? 0, ids[3] ?? 0])
          .execute();
        await panel.store.db
          .updateTable('devices')
          .set({ last_handshake: staleAt })
          .where('id', '=', ids[1] ?? 0)
          .execute();

        const devices = (await api.GET('/api/v1/devices', { params: { query: { limit: 200 } } })).data?.data ?? [];
        assert.equal(devices.length, bodies.length);
        const byStatus = new Map(
          DEVICE_STATUSES.map((status) => [status, devices.filter((d) => d.status === status).length]),
        );
        for (const status of DEVICE_STATUSES) {
          const filtered = await api.GET('/api/v1/devices', { params: { query: { status, limit: 200 } } });
          assert.equal(
            filtered.data?.data.length,
            byStatus.get(status),
            `the status filter agrees with the status shown (${status})`,
          );
        }
        assert.deepEqual(
          [...byStatus.values()],
          [3, 2, 2, 1],
          'active, disabled, expired, limit_reached: each precedence case is here',
        );
        const serverList = (await api.GET('/api/v1/servers')).data?.data ?? [];
        const nodeList = (await api.GET('/api/v1/nodes')).data?.data ?? [];
        const pending = await api.GET('/api/v1/webhooks/{id}/deliveries', {
          params: { path: { id: hook.data?.id ?? 0 }, query: { state: 'pending' } },
        });
        const mailPending = await panel.store.db
          .selectFrom('mail_outbox')
          .select('id')
          .where('state', '=', 'pending')
          .execute();

        assert.ok(panel.metrics);
        await panel.metrics.recount();
        const scraped = await scrape();
        for (const status of DEVICE_STATUSES)
          assert.equal(sampleValue(scraped, 'vpn_panel_devices', { status }), byStatus.get(status), status);
        assert.equal(sampleValue(scraped, 'vpn_panel_devices_online'), devices.filter((d) => d.online).length);
        assert.equal(sampleValue(scraped, 'vpn_panel_devices_online'), 2);
        for (const status of ['deploying', 'running', 'node_offline', 'error']) {
          assert.equal(
            sampleValue(scraped, 'vpn_panel_servers', { status, protocol: 'wireguard' }),
            serverList.filter((s) => s.status === status).length,
            status,
          );
        }
        for (const status of ['online', 'offline']) {
          assert.equal(
            sampleValue(scraped, 'vpn_panel_nodes', { status }),
            nodeList.filter((n) => n.status === status).length,
            status,
          );
        }
        assert.equal(sampleValue(scraped, 'vpn_panel_webhook_deliveries_pending'), pending.data?.data.length);
        assert.equal(sampleValue(scraped, 'vpn_panel_webhook_deliveries_pending'), bodies.length);
        assert.equal(sampleValue(scraped, 'vpn_panel_mail_pending'), mailPending.length);
        assert.ok(mailPending.length > 0, 'server.created is mailed');
      },
    );

    it("shows the embedded node's peers, the peer changes it was sent and how long applying took", async () => {
      const created = await api.POST('/api/v1/servers', { body: { name: 'n-1', max_devices: 10 } });
      const serverId = created.data?.id ?? 0;
      const before = await scrape();
      for (let i = 0; i < 3; i++)
        assert.equal((await api.POST('/api/v1/devices', { body: { server_id: serverId } })).response.status, 201);
      const [first] =
        (await api.GET('/api/v1/devices', { params: { query: { server_id: serverId } } })).data?.data ?? [];
      const disabled = await api.PATCH('/api/v1/devices/{id}', {
        params: { path: { id: first?.id ?? 0 } },
        body: { enabled: false },
      });
      assert.equal(disabled.response.status, 200);

      const after = await scrape();
      assert.equal(
        sampleValue(after, 'vpn_node_peers', { server: String(serverId) }),
        2,
        'three devices, one disabled',
      );
      const changes = (s: Scrape) => sampleValue(s, 'vpn_node_peer_changes_total') ?? 0;
      assert.equal(changes(after) - changes(before), 4, 'three peers added, one removed');
      const applied = (s: Scrape, k: string) =>
        sampleValue(s, 'vpn_node_apply_duration_seconds_count', { kind: k }) ?? 0;
      assert.equal(applied(after, 'peers') - applied(before, 'peers'), 4);
      assert.ok(applied(after, 'server') >= 1, 'the server was applied whole when it was made');
    });
  });
}
