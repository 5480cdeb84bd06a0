/**
 * Dual stack through the API (issue 15), in process on SQLite and PostgreSQL: subnet6/address6 of servers,
 * address6 of devices, configs with both addresses, IPv6 endpoints, and errors naming the field (docs/api.md "Errors").
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { IPV6_STATUSES } from '../../src/domain/servers.ts';
import { bigIntToIpv6, ipv6ToBigInt, parseNetwork6 } from '../../src/domain/subnets6.ts';
import type { DeviceView } from '../../src/services/device-views.ts';
import type { ServerView } from '../../src/services/server-views.ts';
import { setServerIpv6 } from '../../src/store/servers.ts';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';

/** The JSON of a server and of a device as the API answers them. */
type Server = ServerView;
type Device = DeviceView & { config: string };

/** The address `host` (`2`, `17:5`) of the server's subnet6, e.g. `fd3a:1b2c:4d5e::2`. */
function at(server: Server, host: string): string {
  return bigIntToIpv6(parseNetwork6(server.subnet6 ?? '').network + (ipv6ToBigInt(`::${host}`) ?? 0n));
}

for (const kind of DATABASE_KINDS) {
  describe(`dual stack through the API (${kind}, in process)`, () => {
    let db: TestDatabase;
    let panel: AppUnderTest;
    let key: string;

    /** Sends a request and answers its status and JSON (or text). */
    async function call(method: 'GET' | 'POST' | 'PATCH', url: string, body?: object) {
      const response = await panel.app.inject({
        method,
        url: `/api/v1${url}`,
        headers: { authorization: `Bearer ${key}` },
        ...(body === undefined ? {} : { payload: body }),
      });
      const json = response.headers['content-type']?.toString().startsWith('application/json');
      return { status: response.statusCode, body: json ? response.json() : response.body };
    }
    async function newServer(body: object): Promise<Server> {
      const answer = await call('POST', '/servers', body);
      assert.equal(answer.status, 201, JSON.stringify(answer.body));
      return answer.body;
    }
    async function newDevice(body: object): Promise<Device> {
      const answer = await call('POST', '/devices', body);
      assert.equal(answer.status, 201, JSON.stringify(answer.body));
      return answer.body;
    }
    async function assertRefused(body: object, field: string): Promise<void> {
      const answer = await call('POST', '/servers', body);
      assert.equal(answer.status, 422, `${JSON.stringify(body)}: ${JSON.stringify(answer.body)}`);
      assert.equal(answer.body.error.code, 'validation_failed');
      assert.deepEqual(Object.keys(answer.body.error.fields), [field], JSON.stringify(answer.body));
    }

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await buildTestApp(db);
      key = await panel.createKey('infra', 'all', { rateLimitExempt: true });
    });
    after(async () => {
      await panel.close();
      await db.drop();
    });

    it('gives each new server the next /64 of one ULA /48 and its first address there', async () => {
      const first = await newServer({ name: 'first' });
      const second = await newServer({ name: 'second' });
      const ula = parseNetwork6(first.subnet6 ?? '');
      assert.match(first.subnet6 ?? '', /^fd[0-9a-f]{2}:[0-9a-f:]+\/64$/);
      assert.equal(ula.network % 2n ** 80n, 0n, 'the first /64 of a /48');
      assert.equal(first.address6, `${at(first, '1')}/64`);
      assert.equal(second.subnet6, `${bigIntToIpv6(ula.network + 2n ** 64n)}/64`, 'the next /64');
      assert.equal(second.address6, `${at(second, '1')}/64`);
      assert.ok(IPV6_STATUSES.includes(first.ipv6), `ipv6 is one of ${IPV6_STATUSES.join(', ')}`);
      const listed = (await call('GET', '/servers')).body.data.find((s: Server) => s.id === first.id);
      assert.deepEqual([listed.subnet6, listed.address6, listed.ipv6], [first.subnet6, first.address6, first.ipv6]);
    });

    it('takes a given address6: a ULA or global /64 to /120, its host bits or the first address', async () => {
      const ula = await newServer({ name: 'ula-120', address: '10.61.0.1/24', address6: 'fd61::/120' });
      assert.deepEqual([ula.subnet6, ula.address6, ula.capacity], ['fd61::/120', 'fd61::1/120', 253]);
      const routed = await newServer({ name: 'routed', address6: '2001:db8:61:1::a/64' });
      assert.deepEqual([routed.subnet6, routed.address6], ['2001:db8:61:1::/64', '2001:db8:61:1::a/64']);
    });

    it('refuses a bad address6 with 422 naming address6 (or max_devices when it is too small)', async () => {
      await newServer({ name: 'taken-64', address6: 'fd62:1::1/64' });
      await newServer({ name: 'taken-120', address6: 'fd62:5::101/120' });
      const cases: Array<[body: object, field: string]> = [
        [{ name: 'link-local', address6: 'fe80::1/64' }, 'address6'],
        [{ name: 'multicast', address6: 'ff05::1/64' }, 'address6'],
        [{ name: 'ipv4-mapped', address6: '::ffff:10.0.0.1/120' }, 'address6'],
        [{ name: 'too-wide', address6: 'fd62:2::1/63' }, 'address6'],
        [{ name: 'too-narrow', address6: 'fd62:2::1/121' }, 'address6'],
        [{ name: 'no-prefix', address6: 'fd62:2::1' }, 'address6'],
        [{ name: 'same', address6: 'fd62:1::1/64' }, 'address6'],
        [{ name: 'inside', address6: 'fd62:1::100/120' }, 'address6'],
        [{ name: 'around', address6: 'fd62:5::1/64' }, 'address6'],
        [{ name: 'small', address6: 'fd62:3::1/120', max_devices: 255 }, 'max_devices'],
        [{ name: 'bracketed', endpoint: '[2001:db8::7]' }, 'endpoint'],
      ];
      for (const [body, field] of cases) await assertRefused(body, field);
      const unlisted = (await call('GET', '/servers?limit=200')).body.data.map((s: Server) => s.name);
      assert.ok(!unlisted.includes('around') && !unlisted.includes('small'), 'nothing was made');
    });

    it('gives a /120 server 254 devices at most, each a distinct address6 in it, readable where it fits', async () => {
      const server = await newServer({ name: 'small6', address: '10.63.0.1/22', address6: 'fd63::1/120' });
      assert.equal(server.capacity, 254, 'the subnet6 holds fewer devices than the /22');
      const patched = await call('PATCH', `/servers/${server.id}`, { max_devices: 255 });
      assert.equal(patched.status, 422);
      assert.deepEqual(Object.keys(patched.body.error.fields), ['max_devices']);
      const devices: Device[] = [];
      for (let i = 0; i < 254; i++) devices.push(await newDevice({ server_id: server.id }));
      const full = await call('POST', '/devices', { server_id: server.id });
      assert.equal(full.status, 409);
      assert.equal(full.body.error.code, 'server_full');
      const addresses6 = devices.map((d) => d.address6 ?? '');
      assert.equal(new Set(addresses6).size, 254, 'no duplicate address6');
      assert.ok(
        addresses6.every((a) => /^fd63::[0-9a-f]{1,2}$/.test(a) && a !== 'fd63::1'),
        'inside, not ::1',
      );
      const byAddress = new Map(devices.map((d) => [d.address, d.address6]));
      assert.equal(byAddress.get('10.63.0.2'), 'fd63::2');
      assert.equal(byAddress.get('10.63.0.99'), 'fd63::99');
      assert.notEqual(byAddress.get('10.63.0.100'), 'fd63::100', '0x100 lies outside the /120');
    });

    it('writes both addresses in the config, AllowedIPs as the server has them, IPv6 endpoints bracketed', async () => {
      const server = await newServer({ name: 'v6-endpoint', endpoint: '2001:db8::7', listen_port: 51900 });
      const device = await newDevice({ server_id: server.id, name: 'laptop' });
      assert.equal(device.address6, at(server, '2'));
      for (const config of [device.config, (await call('GET', `/devices/${device.id}/config`)).body]) {
        assert.match(config, new RegExp(`^Address = ${device.address}/32, ${device.address6}/128$`, 'm'));
        assert.match(config, /^AllowedIPs = 0\.0\.0\.0\/0, ::\/0$/m);
        assert.match(config, /^Endpoint = \[2001:db8::7\]:51900$/m);
      }
      const moved = await call('PATCH', `/servers/${server.id}`, { endpoint: 'vpn6.example.com' });
      assert.equal(moved.status, 200);
      assert.match((await call('GET', `/devices/${device.id}/config`)).body, /^Endpoint = vpn6\.example\.com:51900$/m);
    });

    it('keeps ::/0 in the tunnel when the node has no IPv6 uplink, so IPv6 never leaves beside it', async () => {
      const server = await newServer({ name: 'tunnel-only' });
      const device = await newDevice({ server_id: server.id });
      await setServerIpv6(panel.store.db, server.id, 'tunnel_only');
      assert.equal((await call('GET', `/servers/${server.id}`)).body.ipv6, 'tunnel_only');
      const config = (await call('GET', `/devices/${device.id}/config`)).body;
      assert.match(config, /^AllowedIPs = 0\.0\.0\.0\/0, ::\/0$/m);
      assert.match(config, new RegExp(`^Address = ${device.address}/32, ${device.address6}/128$`, 'm'));
      assert.equal((await call('GET', `/devices/${device.id}/config?kill_switch=true`)).status, 200);
    });

    it('shows address6 on every device of a group, and gives a moved device one on its new server', async () => {
      const [from, to] = [await newServer({ name: 'group-a' }), await newServer({ name: 'group-b' })];
      const a = await newDevice({ server_id: from.id, external_id: 'family', name: 'phone' });
      const b = await newDevice({ server_id: to.id, external_id: 'family', name: 'laptop' });
      const group = (await call('GET', '/groups/family')).body;
      assert.deepEqual(
        group.devices.map((d: Device) => d.address6),
        [at(from, '2'), at(to, '2')],
      );
      const moved = await call('POST', `/devices/${a.id}/move`, { server_id: to.id });
      assert.equal(moved.status, 200, JSON.stringify(moved.body));
      assert.equal(moved.body.address6, at(to, '3'));
      assert.match(moved.body.config, new RegExp(`^Address = ${moved.body.address}/32, ${at(to, '3')}/128$`, 'm'));
      assert.notEqual(moved.body.address6, b.address6);
    });
  });
}

describe('an IPv6 PUBLIC_HOST (in process)', () => {
  let db: TestDatabase;
  let panel: AppUnderTest;
  before(async () => {
    db = await createTestDatabase('sqlite');
    panel = await buildTestApp(db, { PUBLIC_HOST: '[2001:db8::5]' });
  });
  after(async () => {
    await panel.close();
    await db.drop();
  });

  it('is the endpoint of servers made without one, written in brackets in configs', async () => {
    const api = panel.client(await panel.createKey('infra', 'all'));
    const { data: server } = await api.POST('/api/v1/servers', { body: { name: 'v6-host' } });
    assert.equal(server?.endpoint, '2001:db8::5', 'stored without brackets');
    const { data: device } = await api.POST('/api/v1/devices', { body: { server_id: server?.id ?? 0 } });
    assert.match(device?.config ?? '', /^Endpoint = \[2001:db8::5\]:51820$/m);
  });
});
