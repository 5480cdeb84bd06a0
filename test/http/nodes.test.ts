import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';
import { type ApiCall, callApi, type PanelProcess, startPanel } from '../support/panel.ts';

for (const kind of DATABASE_KINDS) {
  describe(`nodes (${kind})`, () => {
    let db: TestDatabase;
    let panel: PanelProcess;
    let key: string;

    const call: ApiCall = (method, path, body) => callApi(panel.url, key, method, path, body);
    const nodes = async () => (await call('GET', '/nodes')).expect(200).data;

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await startPanel({ database: db });
      key = await panel.createKey('ops', 'all', ['--no-rate-limit']);
    });
    after(async () => {
      await panel.stop();
      await db.drop();
    });

    it('counts the servers, devices and free places of each node, and follows every change at once', async () => {
      const [local] = await nodes();
      assert.deepEqual(
        local && {
          name: local.name,
          server_count: local.server_count,
          device_count: local.device_count,
          free_capacity: local.free_capacity,
        },
        {
          name: 'local',
          server_count: 0,
          device_count: 0,
          free_capacity: 0,
        },
      );
      const server = (await call('POST', '/servers', { name: 'fra-1', max_devices: 10 })).expect(201);
      for (let i = 0; i < 3; i++) assert.equal((await call('POST', '/devices', { server_id: server.id })).status, 201);
      assert.equal((await call('POST', '/servers', { name: 'fra-2', max_devices: 5 })).status, 201);
      const counted = (await nodes()).find((n) => n.name === 'local');
      assert.deepEqual(counted && [counted.server_count, counted.device_count, counted.free_capacity], [2, 3, 12]);

      // The CLI is another process: its changes show in the very next answer.
      const added = await panel.cli([
        'nodes',
        'add',
        '--name',
        'remote-1',
        '--url',
        'http://127.0.0.1:9',
        '--token',
        'a-token-of-16-chars',
      ]);
      assert.equal(added.code, 0, added.stderr);
      const remote = (await nodes()).find((n) => n.name === 'remote-1');
      assert.deepEqual(remote && [remote.status, remote.server_count, remote.device_count, remote.free_capacity], [
        'offline',
        0,
        0,
        0,
      ]);
      assert.equal((await call('GET', `/nodes/${remote?.id}`)).expect(200).name, 'remote-1');
      const removed = await panel.cli(['nodes', 'remove', 'remote-1']);
      assert.equal(removed.code, 0, removed.stderr);
      assert.deepEqual(
        (await nodes()).map((n) => n.name),
        ['local'],
      );
      assert.equal((await call('GET', `/nodes/${remote?.id}`)).status, 404);
    });
  });
}
