import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { generateKeyPair } from '../../src/domain/wireguard-keys.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';
import { type ApiCall, callApi, type PanelProcess, runCli, startPanel } from '../support/panel.ts';
import { dumpTables, readBackup } from '../support/table-dump.ts';

/** Writes through the API from a few clients at once until stopped; records when each one finished. */
class WriteLoad {
  readonly finishedAtMs: number[] = [];
  readonly failures: string[] = [];
  #running = true;
  #workers: Promise<void>[] = [];

  constructor(url: string, key: string, serverIds: readonly number[], workers: number) {
    for (let w = 0; w < workers; w++) this.#workers.push(this.#work(url, key, serverIds, w));
  }

  async #work(url: string, key: string, serverIds: readonly number[], worker: number): Promise<void> {
    for (let i = 0; this.#running; i++) {
      const created = await callApi(url, key, 'POST', '/devices', {
        server_id: serverIds[i % serverIds.length] ?? assert.fail('no server'),
        external_id: `load-${worker}`,
        metadata: { i },
      });
      if (created.status !== 201) this.failures.push(`create ${created.status}`);
      else {
        const change = { metadata: { i, changed: true }, data_limit: i * 1000 };
        const changed = await callApi(url, key, 'PATCH', `/devices/${created.expect(201).id}`, change);
        if (changed.status !== 200) this.failures.push(`patch ${changed.status}`);
      }
      this.finishedAtMs.push(Date.now());
    }
  }

  async stop(): Promise<void> {
    this.#running = false;
    await Promise.all(this.#workers);
  }
}

describe('backup while the panel works, restore into an empty SQLite and PostgreSQL (black box)', () => {
  let source: TestDatabase;
  let panel: PanelProcess;
  let key: string;
  let reader: string;
  let file: string;
  /** The config of every device in the backup, as the source panel served it. */
  const configs = new Map<number, string>();
  /** The token of device 1's share link. */
  let shareToken = '';
  const cleanup: (() => Promise<unknown>)[] = [];

  const call: ApiCall = (method, path, body) => callApi(panel.url, key, method, path, body);

  before(async () => {
    source = await createTestDatabase('sqlite');
    panel = await startPanel({ database: source, env: { WEBHOOK_ALLOW_PRIVATE: '1' } });
    key = await panel.createKey('shop', 'all', ['--no-rate-limit']);
    reader = await panel.createKey('reader', 'devices:read');
    file = join(source.dataDir, '..', `${source.dataDir.split('/').at(-1)}.vpb`);
    cleanup.push(
      () => panel.stop(),
      () => source.drop(),
      async () => rmSync(file, { force: true }),
    );
    const fra = (await call('POST', '/servers', { name: 'fra-1', country: 'DE', city: 'Frankfurt' })).expect(201).id;
    const ams = (await call('POST', '/servers', { name: 'ams-1', address: '10.200.0.1/20' })).expect(201).id;
    for (let i = 0; i < 12; i++)
      assert.equal(
        (
          await call('POST', '/devices', {
            server_id: i % 2 ? fra : ams,
            external_id: `cust-${i % 3}`,
            metadata: { i },
          })
        ).status,
        201,
      );
    const own = await call('POST', '/devices', {
      server_id: fra,
      public_key: generateKeyPair().publicKey,
      name: 'own-key',
    });
    assert.equal(own.status, 201);
    const replayable = await fetch(`${panel.url}/api/v1/devices`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': 'order-42' },
      body: JSON.stringify({ server_id: ams, name: 'idempotent' }),
    });
    assert.equal(replayable.status, 201);
    assert.equal((await call('PATCH', '/devices/2', { enabled: false })).status, 200);
    assert.equal((await call('DELETE', '/devices/3')).status, 204);
    const link = (await callApi(panel.url, key, 'POST', '/devices/1/share', {})).expect(201);
    shareToken = new URL(link.url).pathname.split('/').at(-1) ?? '';
    assert.equal(
      (await call('POST', '/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['device.created'] })).status,
      201,
    );
  });
  after(async () => {
    for (const step of cleanup.reverse()) await step();
  });

  it('takes one consistent snapshot while devices are created and changed', async () => {
    const load = new WriteLoad(panel.url, key, [1, 2], 4);
    while (load.finishedAtMs.length < 20) await new Promise((r) => setTimeout(r, 20));
    const startedMs = Date.now();
    const result = await panel.cli(['backup', file]);
    const endedMs = Date.now();
    await new Promise((r) => setTimeout(r, 200));
    await load.stop();
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /backed up \d+ rows of \d+ tables .* sha256 [0-9a-f]{64}/);
    assert.deepEqual(load.failures, []);
    assert.ok(
      load.finishedAtMs.filter((t) => t > startedMs && t < endedMs).length > 0,
      'writes went on during the backup',
    );

    const { rows } = readBackup(file);
    const devices = new Set(rows.devices?.map((d) => Number(d.id)));
    const created = new Set(rows.events?.filter((e) => e.kind === 'device.created').map((e) => Number(e.device_id)));
    const deleted = new Set(rows.events?.filter((e) => e.kind === 'device.deleted').map((e) => Number(e.device_id)));
    assert.deepEqual(
      devices,
      new Set([...created].filter((id) => !deleted.has(id))),
      'each device with its event, written in one transaction, or neither',
    );
    assert.ok(
      load.finishedAtMs.some((t) => t > endedMs),
      'the load went on after the snapshot',
    );
    for (const id of devices) {
      const config = await fetch(`${panel.url}/api/v1/devices/${id}/config`, {
        headers: { authorization: `Bearer ${key}` },
      });
      configs.set(id, await config.text());
    }
    // After the backup: the key a restore must bring back.
    assert.equal((await panel.cli(['keys', 'revoke', 'reader'])).code, 0);
    assert.equal((await callApi(panel.url, reader, 'GET', '/devices')).status, 401);
  });

  it('refuses to restore while a panel runs on the database', async () => {
    const result = await panel.cli(['restore', '--replace', file]);
    assert.equal(result.code, 1);
    assert.match(
      result.stderr.trim(),
      /^vpn-panel: nothing was restored: a panel is running on this database: stop every panel that uses it, then restore$/,
    );
    assert.equal((await fetch(`${panel.url}/healthz`)).status, 200);
  });

  for (const kind of DATABASE_KINDS) {
    it(`restores into an empty ${kind}: every row equal, keys (a revoked one too) work, configs byte for byte`, async () => {
      const target = await createTestDatabase(kind);
      cleanup.push(() => target.drop());
      const withoutSecret = await runCli(['restore', file], target.env);
      assert.equal(withoutSecret.code, 1);
      assert.match(withoutSecret.stderr, /encrypted with a panel secret that is not here/);
      copyFileSync(join(source.dataDir, 'panel.secret'), join(target.dataDir, 'panel.secret'));

      const restored = await runCli(['restore', file], target.env);
      assert.equal(restored.code, 0, restored.stderr);
      assert.deepEqual(await dumpTables(target), readBackup(file).rows, 'every row of every table');

      const moved = await startPanel({ database: target });
      cleanup.push(() => moved.stop());
      assert.equal((await callApi(moved.url, key, 'GET', '/servers')).status, 200, 'the key works again');
      assert.equal(
        (await callApi(moved.url, reader, 'GET', '/devices')).status,
        200,
        'the key revoked after the backup works again',
      );
      for (const [id, config] of configs) {
        const served = await fetch(`${moved.url}/api/v1/devices/${id}/config`, {
          headers: { authorization: `Bearer ${key}` },
        });
        assert.equal(await served.text(), config, `config of device ${id}`);
      }
      const replay = await fetch(`${moved.url}/api/v1/devices`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': 'order-42' },
        body: JSON.stringify({ server_id: 2, name: 'idempotent' }),
      });
      assert.equal(replay.headers.get('idempotent-replayed'), 'true', 'the stored answer came back too');
      const shared = await fetch(`${moved.url}/s/${shareToken}/config`);
      assert.equal(await shared.text(), configs.get(1), 'the share link works again, found by its hash');
      const created = await callApi(moved.url, key, 'POST', '/devices', { server_id: 1 });
      assert.equal(created.status, 201, 'the restored servers run on the node again');
      assert.ok(created.expect(201).id > Math.max(...configs.keys()));
      await moved.stop();
      const wrongSecret = await runCli(['serve'], { ...moved.env, PANEL_SECRET: randomBytes(32).toString('base64') });
      assert.equal(wrongSecret.code, 1);
      assert.match(
        wrongSecret.stderr.trim(),
        /^vpn-panel: PANEL_SECRET is not the panel secret the private keys are encrypted with \(fingerprint [\w-]+, this one [\w-]+\); use the secret of the panel they come from$/,
      );
    });
  }

  it('keeps no private key or share token in plain in the database files or the backup', () => {
    const keys = [...configs.values()].flatMap((c) => /^PrivateKey = (.+)$/m.exec(c)?.[1] ?? []);
    assert.ok(keys.length >= 12);
    const files = ['vpn-panel.db', 'vpn-panel.db-wal'].map((f) => join(source.dataDir, f)).filter((f) => existsSync(f));
    const contents = [
      ...files.map((f) => readFileSync(f).toString('latin1')),
      gunzipSync(readFileSync(file)).toString('utf8'),
    ];
    for (const privateKey of keys)
      for (const content of contents) assert.ok(!content.includes(privateKey), 'a private key in plain');
    for (const content of contents) assert.ok(!content.includes(shareToken), 'a share token in plain');
  });
});
