import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';
import { type PanelProcess, startPanel } from '../support/panel.ts';

interface EventItem {
  id: number;
  kind: string;
  server_id: number | null;
  device_id: number | null;
  actor: string;
}

for (const kind of DATABASE_KINDS) {
  describe(`GET /events (${kind})`, () => {
    let db: TestDatabase;
    let panel: PanelProcess;
    let key: string;
    let serverA: number;
    let serverB: number;
    let device: number;

    async function events(query: string): Promise<{ data: EventItem[]; has_more: boolean }> {
      const response = await fetch(`${panel.url}/api/v1/events${query}`, {
        headers: { authorization: `Bearer ${key}` },
      });
      assert.equal(response.status, 200);
      return response.json();
    }
    async function post(path: string, body: unknown): Promise<{ id: number }> {
      const response = await fetch(`${panel.url}/api/v1${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return response.json();
    }

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await startPanel({ database: db });
      key = await panel.createKey('reader', 'all', ['--no-rate-limit']);
      serverA = (await post('/servers', { name: 'a' })).id;
      serverB = (await post('/servers', { name: 'b' })).id;
      device = (await post('/devices', { server_id: serverA, name: 'd1' })).id;
      await post('/devices', { server_id: serverB, name: 'd2' });
      await fetch(`${panel.url}/api/v1/devices/${device}`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: '{"enabled":false}',
      });
    });
    after(async () => {
      await panel.stop();
      await db.drop();
    });

    it('lists every field of docs/api.md "Events" oldest first, and pages with after/limit', async () => {
      const all = await events('?limit=200');
      const ids = all.data.map((e) => e.id);
      assert.deepEqual(
        ids,
        [...ids].sort((x, y) => x - y),
      );
      for (const field of [
        'id',
        'kind',
        'created_at',
        'server_id',
        'server_name',
        'device_id',
        'device_name',
        'node_name',
        'ip',
        'country',
        'detail',
        'actor',
      ]) {
        assert.ok(field in (all.data[0] ?? {}), field);
      }
      const first = await events('?limit=2');
      assert.equal(first.data.length, 2);
      assert.equal(first.has_more, true);
      const rest = await events(`?after=${first.data[1]?.id}&limit=200`);
      assert.deepEqual(
        [...first.data, ...rest.data].map((e) => e.id),
        ids,
      );
      assert.equal(rest.has_more, false);
    });

    it('filters by server_id, device_id and a comma-separated kind list', async () => {
      const onA = await events(`?server_id=${serverA}&limit=200`);
      assert.ok(onA.data.length > 0 && onA.data.every((e) => e.server_id === serverA));
      const ofDevice = await events(`?device_id=${device}`);
      assert.deepEqual(
        ofDevice.data.map((e) => e.kind),
        ['device.created', 'device.updated', 'device.disabled'],
      );
      const kinds = await events('?kind=server.created,device.disabled&limit=200');
      assert.deepEqual(kinds.data.map((e) => e.kind).sort(), ['device.disabled', 'server.created', 'server.created']);
      assert.ok(kinds.data.every((e) => e.actor === 'via API key reader'));
      // Spaces around a kind and empty items are taken, as the query's documented pattern says.
      const spaced = await events('?kind=%20server.created%20,,%20device.disabled&limit=200');
      assert.deepEqual(spaced.data, kinds.data);
    });
  });
}
