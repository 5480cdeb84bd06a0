/**
 * Idempotency-Key is kept per owner (migration 030), on both databases: a console user's key replayed by
 * another console user or by an API key is a new request, not a replay of the first one's reply.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';

const PASSWORD = 'correct horse battery';
const KEY = 'order-7';

for (const kind of DATABASE_KINDS) {
  describe(`Idempotency-Key owners (${kind})`, () => {
    let db: TestDatabase;
    let t: AppUnderTest;

    async function cookieOf(user: string): Promise<string> {
      const response = await t.app.inject({
        method: 'POST',
        url: '/console/session',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({ user, password: PASSWORD }),
      });
      assert.equal(response.statusCode, 204, response.body);
      const fields = [response.headers['set-cookie'] ?? []].flat();
      const cookie = fields.find((f) => f.startsWith('vpn_panel_session='))?.split(';')[0];
      assert.ok(cookie !== undefined, `no session cookie in ${JSON.stringify(fields)}`);
      return cookie;
    }

    /** POST /servers under KEY, as a console user (its cookie) or an API key (`Bearer …`). */
    function create(credential: { cookie: string } | { bearer: string }, name: string) {
      const auth =
        'cookie' in credential
          ? { cookie: credential.cookie, 'x-console-request': '1' }
          : { authorization: `Bearer ${credential.bearer}` };
      return t.app.inject({
        method: 'POST',
        url: '/api/v1/servers',
        headers: { ...auth, 'content-type': 'application/json', 'idempotency-key': KEY },
        payload: JSON.stringify({ name }),
      });
    }

    function fresh(response: LightMyRequestResponse): number {
      assert.equal(response.statusCode, 201, response.body);
      assert.equal(response.headers['idempotent-replayed'], undefined, 'a new request, not a replay');
      return response.json().id;
    }

    before(async () => {
      db = await createTestDatabase(kind);
      t = await buildTestApp(db);
      await t.createUser('ann', 'admin', PASSWORD);
      await t.createUser('ben', 'admin', PASSWORD);
    });
    after(async () => {
      await t.close();
      await db.drop();
    });

    it("one key, three owners: each one's first request runs, its retry replays its own reply", async () => {
      const ann = { cookie: await cookieOf('ann') };
      const ben = { cookie: await cookieOf('ben') };
      const shop = { bearer: await t.createKey('shop', 'all') };
      const annId = fresh(await create(ann, 'ann-1'));
      // Another body under the same key: a replay would answer 422; another owner's key is its own.
      const benId = fresh(await create(ben, 'ben-1'));
      const shopId = fresh(await create(shop, 'shop-1'));
      assert.equal(new Set([annId, benId, shopId]).size, 3, 'three servers made');
      for (const [owner, name, id] of [
        [ann, 'ann-1', annId],
        [ben, 'ben-1', benId],
        [shop, 'shop-1', shopId],
      ] as const) {
        const again = await create(owner, name);
        assert.equal(again.headers['idempotent-replayed'], 'true', name);
        assert.equal(again.json().id, id, `${name}: its own stored reply`);
      }
      const rows = await t.store.db
        .selectFrom('idempotency_keys')
        .select(['api_key_id', 'console_user_id'])
        .where('idempotency_key', '=', KEY)
        .execute();
      assert.equal(rows.length, 3);
      assert.ok(
        rows.every((row) => (row.api_key_id === null) !== (row.console_user_id === null)),
        'one owner each',
      );
    });
  });
}
