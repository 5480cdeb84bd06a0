import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { generateKeyPair } from '../../src/domain/wireguard-keys.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';
import {
  type ApiBody,
  type ApiCall,
  callApi,
  callApiUnchecked,
  type PanelProcess,
  startPanel,
} from '../support/panel.ts';

for (const kind of DATABASE_KINDS) {
  describe(`devices (${kind})`, () => {
    let db: TestDatabase;
    let panel: PanelProcess;
    let key: string;
    let serverId: number;

    const call: ApiCall = (method, path, body) => callApi(panel.url, key, method, path, body);

    async function newServer(body: ApiBody<'POST', '/servers'>): Promise<number> {
      return (await call('POST', '/servers', body)).expect(201).id;
    }

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await startPanel({ database: db });
      key = await panel.createKey('shop', 'all', ['--no-rate-limit']);
      serverId = await newServer({ name: 'fra-1', country: 'DE', city: 'Frankfurt' });
    });
    after(async () => {
      await panel.stop();
      await db.drop();
    });

    it('creates a device with every field of docs/api.md "Devices" and its config', async () => {
      const created = await call('POST', '/devices', {
        server_id: serverId,
        external_id: 'cust-1',
        metadata: { plan: 'pro', tags: ['a'] },
        data_limit: 5_000_000,
        speed_limit: 2000,
      });
      const d = created.expect(201);
      for (const field of [
        'id',
        'server_id',
        'name',
        'external_id',
        'metadata',
        'address',
        'address6',
        'public_key',
        'client_key',
        'enabled',
        'status',
        'online',
        'last_handshake',
        'data_limit',
        'limit_period',
        'period_usage',
        'usage_reset_at',
        'expires_at',
        'speed_limit',
        'month_usage',
        'created_at',
        'updated_at',
        'config',
      ]) {
        assert.ok(field in d, `field ${field}`);
      }
      assert.equal(d.name, 'cust-1', 'named after external_id');
      assert.deepEqual(d.metadata, { plan: 'pro', tags: ['a'] });
      assert.equal(d.client_key, false);
      assert.equal(d.status, 'active');
      assert.equal(d.limit_period, 'monthly');
      assert.match(d.config, /^\[Interface\]\nPrivateKey = .+\nAddress = 10\.128\.\d+\.\d+\/32, fd[0-9a-f:]+\/128\n/);
      assert.match(d.config, /Endpoint = 192\.0\.2\.1:\d+/);
    });

    it('gives the lowest free address, never the network, broadcast or server address', async () => {
      const id = await newServer({ name: 'tiny', address: '10.250.0.1/29' });
      const addresses: string[] = [];
      for (let i = 0; i < 5; i++) {
        addresses.push((await call('POST', '/devices', { server_id: id })).expect(201).address);
      }
      assert.deepEqual(addresses, ['10.250.0.2', '10.250.0.3', '10.250.0.4', '10.250.0.5', '10.250.0.6']);
      const full = await call('POST', '/devices', { server_id: id });
      assert.equal(full.status, 409);
      assert.equal(full.error?.code, 'server_full');
      const list = await call('GET', `/devices?server_id=${id}`);
      const first = list.expect(200).data[1];
      assert.equal((await call('DELETE', `/devices/${first?.id}`)).status, 204);
      const reused = (await call('POST', '/devices', { server_id: id })).expect(201);
      assert.equal(reused.address, '10.250.0.3', 'a freed address is reused, lowest first');
    });

    it('refuses a device over the server capacity with server_full', async () => {
      const id = await newServer({ name: 'capped', max_devices: 2 });
      assert.equal((await call('POST', '/devices', { server_id: id })).status, 201);
      assert.equal((await call('POST', '/devices', { server_id: id })).status, 201);
      const over = await call('POST', '/devices', { server_id: id });
      assert.equal(over.status, 409);
      assert.equal(over.error?.code, 'server_full');
    });

    it('names devices uniquely per server: external_id, then -2, then device-<id>; a taken name is 409', async () => {
      const a = (await call('POST', '/devices', { server_id: serverId, external_id: 'family' })).expect(201);
      const b = (await call('POST', '/devices', { server_id: serverId, external_id: 'family' })).expect(201);
      assert.equal(a.name, 'family');
      assert.equal(b.name, 'family-2');
      const anonymous = (await call('POST', '/devices', { server_id: serverId })).expect(201);
      assert.equal(anonymous.name, `device-${anonymous.id}`);
      const taken = await call('POST', '/devices', { server_id: serverId, name: 'family' });
      assert.equal(taken.status, 409);
      assert.equal(taken.error?.code, 'name_taken');
      const renamed = await call('PATCH', `/devices/${b.id}`, { name: 'family' });
      assert.equal(renamed.status, 409);
      assert.equal(renamed.error?.code, 'name_taken');
    });

    it('keeps a client-made key pair: client_key true, no PrivateKey line; refuses bad or reused keys', async () => {
      const pair = generateKeyPair();
      const created = (await call('POST', '/devices', { server_id: serverId, public_key: pair.publicKey })).expect(201);
      assert.equal(created.client_key, true);
      assert.equal(created.public_key, pair.publicKey);
      assert.doesNotMatch(created.config, /PrivateKey/);
      const reused = await call('POST', '/devices', { server_id: serverId, public_key: pair.publicKey });
      assert.equal(reused.status, 422);
      assert.ok('public_key' in (reused.error?.fields ?? {}));
      for (const bad of ['abc', 'A'.repeat(44), Buffer.alloc(31).toString('base64')]) {
        const refused = await call('POST', '/devices', { server_id: serverId, public_key: bad });
        assert.equal(refused.status, 422, bad);
        assert.ok('public_key' in (refused.error?.fields ?? {}));
      }
    });

    it('stores metadata exactly, clears it with null, and refuses more than 4 KB', async () => {
      const metadata = { nested: { list: [1, 2.5, 'three', null, true] }, 'unicode ✓': 'ü' };
      const created = (await call('POST', '/devices', { server_id: serverId, metadata })).expect(201);
      assert.deepEqual(created.metadata, metadata);
      const cleared = await call('PATCH', `/devices/${created.id}`, { metadata: null });
      assert.equal(cleared.expect(200).metadata, null);
      const big = await call('POST', '/devices', { server_id: serverId, metadata: { blob: 'x'.repeat(4100) } });
      assert.equal(big.status, 422);
      assert.ok('metadata' in (big.error?.fields ?? {}));
      const notObject = await callApiUnchecked(panel.url, key, 'POST', '/devices', {
        server_id: serverId,
        metadata: [1, 2],
      });
      assert.equal(notObject.status, 422);
    });

    it('places server_id auto on the running server with the fewest devices in the country or city asked', async () => {
      const nl1 = await newServer({ name: 'ams-1', country: 'NL', city: 'Amsterdam' });
      const nl2 = await newServer({ name: 'ams-2', country: 'NL', city: 'Amsterdam' });
      const placed = [];
      for (let i = 0; i < 4; i++) {
        placed.push((await call('POST', '/devices', { server_id: 'auto', country: 'nl' })).expect(201).server_id);
      }
      assert.deepEqual(placed.sort(), [nl1, nl1, nl2, nl2].sort(), 'spread over the two, fewest first');
      assert.equal((await call('POST', '/devices', { server_id: 'auto', city: 'amsterdam' })).status, 201);
      const none = await call('POST', '/devices', { server_id: 'auto', country: 'JP' });
      assert.equal(none.status, 409);
      assert.equal(none.error?.code, 'no_server_available');
      const misplaced = await call('POST', '/devices', { server_id: serverId, country: 'NL' });
      assert.equal(misplaced.status, 422);
      assert.ok('country' in (misplaced.error?.fields ?? {}));
    });

    it('reports status by precedence and filters the list by it', async () => {
      const past = '2020-01-01T00:00:00Z';
      const disabledBody = { server_id: serverId, enabled: false, expires_at: past };
      const disabled = (await call('POST', '/devices', disabledBody)).expect(201);
      assert.equal(disabled.status, 'disabled', 'disabled wins over expired');
      const expired = (await call('POST', '/devices', { server_id: serverId, expires_at: past })).expect(201);
      assert.equal(expired.status, 'expired');
      const renewed = await call('PATCH', `/devices/${expired.id}`, { expires_at: '2099-01-01T00:00:00Z' });
      assert.equal(renewed.expect(200).status, 'active');
      const list = (await call('GET', '/devices?status=disabled&limit=200')).expect(200).data;
      assert.ok(list.map((d) => d.id).includes(disabled.id));
      assert.ok(list.every((d) => d.status === 'disabled'));
    });

    it(
      'serves the config as text/plain with a download name, ' + 'with a kill switch on request, and as a PNG QR code',
      async () => {
        const created = (await call('POST', '/devices', { server_id: serverId, name: 'laptop' })).expect(201);
        const headers = { authorization: `Bearer ${key}` };
        const config = (query: string) =>
          fetch(`${panel.url}/api/v1/devices/${created.id}/config${query}`, { headers });
        const conf = await config('');
        assert.equal(conf.status, 200);
        assert.match(conf.headers.get('content-type') ?? '', /^text\/plain/);
        assert.match(conf.headers.get('content-disposition') ?? '', /attachment; filename="laptop\.conf"/);
        assert.equal(await conf.text(), created.config);
        const ks = await config('?kill_switch=true');
        const ksText = await ks.text();
        assert.match(ksText, /^PostUp = iptables -I OUTPUT .* && ip6tables -I OUTPUT .*-j REJECT$/m);
        assert.match(ksText, /^PreDown = iptables -D OUTPUT .* && ip6tables -D OUTPUT .*-j REJECT$/m);
        const qr = await config('?format=qr');
        assert.equal(qr.headers.get('content-type'), 'image/png');
        assert.deepEqual([...new Uint8Array(await qr.arrayBuffer()).slice(0, 8)], [137, 80, 78, 71, 13, 10, 26, 10]);
        const qrKs = await call('GET', `/devices/${created.id}/config?format=qr&kill_switch=true`);
        assert.equal(qrKs.status, 400);
      },
    );

    it('answers 404 for unknown devices and records events with the actor', async () => {
      for (const [method, path] of [
        ['GET', '/devices/999999'],
        ['PATCH', '/devices/999999'],
        ['DELETE', '/devices/999999'],
        ['GET', '/devices/999999/config'],
      ] as const) {
        const answer = await call(method, path, method === 'PATCH' ? { enabled: false } : undefined);
        assert.equal(answer.status, 404, `${method} ${path}`);
        assert.equal(answer.error?.code, 'not_found');
      }
      const created = (await call('POST', '/devices', { server_id: serverId, name: 'evented' })).expect(201);
      await call('PATCH', `/devices/${created.id}`, { enabled: false });
      await call('DELETE', `/devices/${created.id}`);
      const events = (await call('GET', `/events?device_id=${created.id}`)).expect(200).data;
      const kinds = events.map((e) => e.kind);
      assert.deepEqual(kinds, ['device.created', 'device.updated', 'device.disabled', 'device.deleted']);
      assert.ok(events.every((e) => e.actor === 'via API key shop'));
    });

    it('gives 200 parallel creates distinct addresses within capacity, or server_full: never a duplicate', async () => {
      const id = await newServer({ name: 'race', max_devices: 150 });
      const answers = await Promise.all(Array.from({ length: 200 }, () => call('POST', '/devices', { server_id: id })));
      const created = answers.filter((a) => a.status === 201);
      const full = answers.filter((a) => a.status === 409 && a.error?.code === 'server_full');
      assert.equal(
        created.length,
        150,
        answers
          .filter((a) => a.status !== 201 && a.status !== 409)
          .map((a) => JSON.stringify(a.json))
          .join('\n'),
      );
      assert.equal(full.length, 50);
      assert.equal(new Set(created.map((a) => a.expect(201).address)).size, 150, 'no duplicate address');
      assert.equal((await call('GET', `/servers/${id}`)).expect(200).device_count, 150);
      const node = (await call('GET', '/nodes/1')).expect(200);
      const servers = (await call('GET', '/servers?limit=200')).expect(200).data;
      assert.equal(
        node.device_count,
        servers.reduce((n, s) => n + s.device_count, 0),
        'a node counts the devices of its servers',
      );
      assert.equal(
        node.free_capacity,
        servers.reduce((n, s) => n + s.capacity - s.device_count, 0),
      );
      assert.equal(node.server_count, servers.length);
    });

    it('refuses to delete a server with devices unless forced, then removes them too', async () => {
      const id = await newServer({ name: 'doomed' });
      const device = (await call('POST', '/devices', { server_id: id })).expect(201);
      const refused = await call('DELETE', `/servers/${id}`);
      assert.equal(refused.status, 409);
      assert.equal(refused.error?.code, 'server_has_devices');
      assert.equal((await call('DELETE', `/servers/${id}?force=true`)).status, 204);
      assert.equal((await call('GET', `/devices/${device.id}`)).status, 404);
    });
  });
}
