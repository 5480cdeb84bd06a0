import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';
import { FakeAgent } from '../support/fake-agent.ts';
import { type PanelProcess, startPanel } from '../support/panel.ts';

interface Reply {
  status: number;
  replayed: string | null;
  retryAfter: string | null;
  json: { id?: number; name?: string; error?: { code: string; fields: Record<string, string> } };
}

for (const kind of DATABASE_KINDS) {
  describe(`Idempotency-Key on POST /servers (${kind})`, () => {
    let db: TestDatabase;
    let panel: PanelProcess;
    let agent: FakeAgent;
    let key: string;

    async function post(body: unknown, idempotencyKey?: string, apiKey = key, target = panel): Promise<Reply> {
      const headers: Record<string, string> = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
      if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
      const response = await fetch(`${target.url}/api/v1/servers`, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
      });
      return {
        status: response.status,
        replayed: response.headers.get('idempotent-replayed'),
        retryAfter: response.headers.get('retry-after'),
        json: await response.json(),
      };
    }

    async function serversNamed(name: string): Promise<number> {
      const response = await fetch(`${panel.url}/api/v1/servers?limit=200`, {
        headers: { authorization: `Bearer ${key}` },
      });
      const page: { data: { name: string }[] } = await response.json();
      return page.data.filter((s) => s.name === name).length;
    }

    before(async () => {
      db = await createTestDatabase(kind);
      agent = new FakeAgent();
      await agent.start();
      panel = await startPanel({ database: db, env: { LOCAL_NODE: 'off' } });
      const added = await panel.cli(['nodes', 'add', '--name', 'fake', '--url', agent.url, '--token', agent.token]);
      assert.equal(added.code, 0, added.stderr);
      key = await panel.createKey('shop', 'servers:read,servers:write,events:read', ['--no-rate-limit']);
    });
    after(async () => {
      await panel.stop();
      await agent.stop();
      await db.drop();
    });

    it('replays the first reply for the same key and body, marked Idempotent-Replayed, without running again', async () => {
      const first = await post({ name: 'replayed' }, 'order-1');
      assert.equal(first.status, 201);
      assert.equal(first.replayed, null);
      const again = await post({ name: 'replayed' }, 'order-1');
      assert.equal(again.status, 201);
      assert.equal(again.replayed, 'true');
      assert.deepEqual(again.json, first.json);
      assert.equal(await serversNamed('replayed'), 1);
      assert.equal(agent.applied.filter((id) => id === first.json.id).length, 1, 'deployed once');
    });

    it('refuses the same key with another body (422 idempotency_key_reused)', async () => {
      assert.equal((await post({ name: 'reused-a' }, 'order-2')).status, 201);
      const other = await post({ name: 'reused-b' }, 'order-2');
      assert.equal(other.status, 422);
      assert.equal(other.json.error?.code, 'idempotency_key_reused');
      assert.equal(await serversNamed('reused-b'), 0);
    });

    it('keeps keys apart per API key', async () => {
      const otherKey = await panel.createKey('other shop', 'servers:write', ['--no-rate-limit']);
      const mine = await post({ name: 'per-key' }, 'order-3');
      const theirs = await post({ name: 'per-key' }, 'order-3', otherKey);
      assert.equal(theirs.status, 201);
      assert.equal(theirs.replayed, null);
      assert.notEqual(theirs.json.id, mine.json.id);
    });

    it('accepts keys up to 255 characters and refuses longer ones with 400', async () => {
      assert.equal((await post({ name: 'long-ok' }, 'k'.repeat(255))).status, 201);
      const tooLong = await post({ name: 'long-bad' }, 'k'.repeat(256));
      assert.equal(tooLong.status, 400);
      assert.equal(tooLong.json.error?.code, 'bad_request');
      assert.ok(
        'Idempotency-Key' in (tooLong.json.error?.fields ?? {}) ||
          'idempotency-key' in (tooLong.json.error?.fields ?? {}),
      );
      assert.equal(await serversNamed('long-bad'), 0);
    });

    it('answers 409 with Retry-After while the first request still runs, then replays it', async () => {
      let release = () => {};
      agent.hold = new Promise((resolve) => (release = resolve));
      const first = post({ name: 'slow' }, 'order-4');
      await new Promise((r) => setTimeout(r, 300));
      const during = await post({ name: 'slow' }, 'order-4');
      assert.equal(during.status, 409);
      assert.equal(during.json.error?.code, 'idempotency_key_in_use');
      assert.equal(during.retryAfter, '1');
      release();
      agent.hold = undefined;
      assert.equal((await first).status, 201);
      const later = await post({ name: 'slow' }, 'order-4');
      assert.equal(later.replayed, 'true');
      assert.equal(await serversNamed('slow'), 1);
    });

    it('does not store a 5xx: a failed deploy may be retried with the same key', async () => {
      agent.failDeploys = true;
      const failed = await post({ name: 'flaky' }, 'order-5');
      agent.failDeploys = false;
      assert.equal(failed.status, 502);
      assert.equal(failed.json.error?.code, 'deploy_failed');
      assert.equal(await serversNamed('flaky'), 0, 'a failed deploy leaves no row');
      const retried = await post({ name: 'flaky' }, 'order-5');
      assert.equal(retried.status, 201);
      assert.equal(retried.replayed, null);
    });

    it('remembers keys across a restart of the panel', async () => {
      const first = await post({ name: 'durable' }, 'order-6');
      assert.equal(await panel.stop(), 0);
      panel = await startPanel({ database: db, env: { LOCAL_NODE: 'off' } });
      const replay = await post({ name: 'durable' }, 'order-6');
      assert.equal(replay.replayed, 'true');
      assert.deepEqual(replay.json, first.json);
    });
  });
}
