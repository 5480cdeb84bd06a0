import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';
import { type PanelProcess, startPanel } from '../support/panel.ts';

interface Answer {
  status: number;
  replayed: string | null;
  json: Record<string, unknown> & { error?: { code: string; fields: Record<string, string> } };
}

for (const kind of DATABASE_KINDS) {
  describe(`moves, groups and usage resets (${kind})`, () => {
    let db: TestDatabase;
    let panel: PanelProcess;
    let key: string;
    const servers: number[] = [];

    async function call(method: string, path: string, body?: unknown, idempotencyKey?: string): Promise<Answer> {
      const headers: Record<string, string> = { authorization: `Bearer ${key}` };
      if (body !== undefined) headers['content-type'] = 'application/json';
      if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
      const response = await fetch(`${panel.url}/api/v1${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await response.text();
      return {
        status: response.status,
        replayed: response.headers.get('idempotent-replayed'),
        json: text === '' ? {} : JSON.parse(text),
      };
    }

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await startPanel({ database: db });
      key = await panel.createKey('shop', 'all', ['--no-rate-limit']);
      for (const [name, city] of [
        ['fra-1', 'Frankfurt'],
        ['fra-2', 'Frankfurt'],
        ['ams-1', 'Amsterdam'],
      ]) {
        servers.push(
          Number(
            (await call('POST', '/servers', { name, country: name?.startsWith('fra') ? 'DE' : 'NL', city })).json.id,
          ),
        );
      }
    });
    after(async () => {
      await panel.stop();
      await db.drop();
    });

    it('moves a device keeping id, keys, name and limits, with a new address and config', async () => {
      const [from, to] = servers;
      const created = await call('POST', '/devices', {
        server_id: from,
        name: 'mover',
        data_limit: 123,
        speed_limit: 500,
        metadata: { a: 1 },
      });
      const moved = await call('POST', `/devices/${created.json.id}/move`, { server_id: to }, 'move-1');
      assert.equal(moved.status, 200, JSON.stringify(moved.json));
      for (const field of ['id', 'name', 'public_key', 'data_limit', 'speed_limit', 'metadata', 'created_at'])
        assert.deepEqual(moved.json[field], created.json[field], field);
      assert.equal(moved.json.server_id, to);
      assert.notEqual(moved.json.address, created.json.address);
      assert.notEqual(moved.json.config, created.json.config);
      const replay = await call('POST', `/devices/${created.json.id}/move`, { server_id: to }, 'move-1');
      assert.equal(replay.replayed, 'true');
      const events = await call('GET', `/events?device_id=${created.json.id}&kind=device.moved`);
      assert.equal((events.json.data as unknown[]).length, 1);
    });

    it('never picks the current server with auto, and refuses a name taken on the target', async () => {
      const [a, b] = servers;
      const device = await call('POST', '/devices', { server_id: a, name: 'twin' });
      await call('POST', '/devices', { server_id: b, name: 'twin' });
      const clash = await call('POST', `/devices/${device.json.id}/move`, { server_id: b });
      assert.equal(clash.status, 409);
      assert.equal(clash.json.error?.code, 'name_taken');
      for (let i = 0; i < 3; i++) {
        const solo = await call('POST', '/devices', { server_id: a });
        const auto = await call('POST', `/devices/${solo.json.id}/move`, { server_id: 'auto' });
        assert.equal(auto.status, 200);
        assert.notEqual(auto.json.server_id, a);
      }
      const same = await call('POST', `/devices/${device.json.id}/move`, { server_id: a });
      assert.equal(same.status, 422);
    });

    it('reads a group oldest first with its device count; an unknown group is 404; ids are URL-decoded', async () => {
      const externalId = 'customer/42 ü';
      const ids = [];
      for (const server of servers)
        ids.push((await call('POST', '/devices', { server_id: server, external_id: externalId })).json.id);
      const group = await call('GET', `/groups/${encodeURIComponent(externalId)}`);
      assert.equal(group.status, 200, JSON.stringify(group.json));
      assert.equal(group.json.external_id, externalId);
      assert.equal(group.json.device_count, 3);
      assert.deepEqual(
        (group.json.devices as { id: number }[]).map((d) => d.id),
        ids,
      );
      assert.deepEqual(group.json.month_usage, { rx_bytes: 0, tx_bytes: 0, total_bytes: 0 });
      assert.equal((await call('GET', '/groups/nobody')).status, 404);
      assert.equal((await call('GET', `/groups/${'x'.repeat(256)}`)).status, 404);
    });

    it('changes every device of a group in one go, or none when a value is wrong', async () => {
      for (const server of servers)
        await call('POST', '/devices', { server_id: server, external_id: 'plan-7', metadata: { v: 1 } });
      const disabled = await call('PATCH', '/groups/plan-7', {
        enabled: false,
        expires_at: '2099-01-01T02:00:00+02:00',
        data_limit: 10_000,
      });
      assert.equal(disabled.status, 200);
      for (const d of disabled.json.devices as {
        enabled: boolean;
        status: string;
        data_limit: number;
        expires_at: string;
      }[]) {
        assert.equal(d.enabled, false);
        assert.equal(d.status, 'disabled');
        assert.equal(d.data_limit, 10_000);
        assert.equal(d.expires_at, '2099-01-01T00:00:00.000Z', 'stored as UTC');
      }
      const wrong = await call('PATCH', '/groups/plan-7', { enabled: true, metadata: { blob: 'x'.repeat(5000) } });
      assert.equal(wrong.status, 422);
      const after = await call('GET', '/groups/plan-7');
      assert.ok(
        (after.json.devices as { enabled: boolean; metadata: unknown }[]).every(
          (d) => d.enabled === false && JSON.stringify(d.metadata) === '{"v":1}',
        ),
        'nothing changed',
      );
      const unknownField = await call('PATCH', '/groups/plan-7', { name: 'x' });
      assert.equal(unknownField.status, 422);
      assert.equal(unknownField.json.error?.fields.name, 'unknown field');
    });

    it('resets usage of a device and of a group (a new period starts, events recorded), idempotently', async () => {
      const device = await call('POST', '/devices', { server_id: servers[0], external_id: 'resetters' });
      await new Promise((r) => setTimeout(r, 20));
      const reset = await call('POST', `/devices/${device.json.id}/usage/reset`, undefined, 'reset-1');
      assert.equal(reset.status, 200);
      assert.ok(String(reset.json.usage_reset_at) > String(device.json.usage_reset_at));
      assert.equal(
        (await call('POST', `/devices/${device.json.id}/usage/reset`, undefined, 'reset-1')).replayed,
        'true',
      );
      const group = await call('POST', '/groups/resetters/usage/reset', undefined, 'reset-2');
      assert.equal(group.status, 200);
      assert.equal(group.json.device_count, 1);
      const events = await call('GET', `/events?device_id=${device.json.id}&kind=device.usage_reset`);
      assert.equal((events.json.data as unknown[]).length, 2);
    });

    it('deletes a group with all its devices', async () => {
      for (const server of servers) await call('POST', '/devices', { server_id: server, external_id: 'leaving' });
      assert.equal((await call('DELETE', '/groups/leaving')).status, 204);
      assert.equal((await call('GET', '/groups/leaving')).status, 404);
      assert.equal(((await call('GET', '/devices?external_id=leaving')).json.data as unknown[]).length, 0);
      assert.equal((await call('DELETE', '/groups/leaving')).status, 404);
      const [first] = servers;
      const reused = await call('POST', '/devices', { server_id: first });
      const lowest = ((await call('GET', `/devices?server_id=${first}&limit=200`)).json.data as { address: string }[])
        .map((d) => d.address)
        .filter((a) => a !== reused.json.address);
      assert.ok(!lowest.includes(String(reused.json.address)), 'addresses stay distinct after a group delete');
    });
  });
}
