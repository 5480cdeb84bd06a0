/**
 * GET /devices?search=, on SQLite and PostgreSQL: a case-insensitive substring of the name or the external
 * id, whose LIKE wildcards (`%`, `_`) and escape (`\`) are plain characters, combined with the other filters
 * and walked with the cursor like any list.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';

for (const kind of DATABASE_KINDS) {
  describe(`device search (${kind}, in process)`, () => {
    let db: TestDatabase;
    let panel: AppUnderTest;
    let key: string;
    const ids = new Map<string, number>();
    let second: number;

    async function list(query: string): Promise<{ data: { id: number; name: string }[]; has_more: boolean }> {
      const answer = await panel.app.inject({
        method: 'GET',
        url: `/api/v1/devices?${query}`,
        headers: { authorization: `Bearer ${key}` },
      });
      assert.equal(answer.statusCode, 200, `${query}: ${answer.body}`);
      return answer.json();
    }
    const names = async (query: string) => (await list(query)).data.map((d) => d.name);

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await buildTestApp(db);
      key = await panel.createKey('search', 'all', { rateLimitExempt: true });
      const api = panel.client(key);
      const servers: number[] = [];
      for (const name of ['fra-1', 'ams-1']) {
        const { data } = await api.POST('/api/v1/servers', { body: { name, country: 'DE' } });
        assert.ok(data);
        servers.push(data.id);
      }
      second = servers[1] ?? 0;
      const devices: { name: string; external_id?: string; server: number; enabled?: boolean }[] = [
        { name: 'Alice-Phone', external_id: 'CUST-100', server: 0 },
        { name: 'bob laptop', external_id: 'cust-200', server: 1 },
        { name: '50%_off', server: 0 },
        { name: 'a_b\\c', external_id: 'x', server: 1, enabled: false },
        { name: 'axb', external_id: 'ALICE', server: 1 },
        { name: 'router', external_id: 'Cust-300', server: 1, enabled: false },
      ];
      for (const d of devices) {
        const { data } = await api.POST('/api/v1/devices', {
          body: { server_id: servers[d.server] ?? 0, name: d.name, external_id: d.external_id, enabled: d.enabled },
        });
        assert.ok(data, d.name);
        ids.set(d.name, data.id);
      }
    });
    after(async () => {
      await panel.close();
      await db.drop();
    });

    it('finds a part of the name or of the external id, whatever its case', async () => {
      assert.deepEqual(await names('search=alice'), ['Alice-Phone', 'axb']);
      assert.deepEqual(await names('search=LAPTOP'), ['bob laptop']);
      assert.deepEqual(await names('search=cust-'), ['Alice-Phone', 'bob laptop', 'router']);
      assert.deepEqual(await names(`search=${encodeURIComponent('b l')}`), ['bob laptop']);
      assert.deepEqual(await names('search=nobody'), []);
    });

    it('takes %, _ and \\ as the characters they are', async () => {
      assert.deepEqual(await names(`search=${encodeURIComponent('%')}`), ['50%_off']);
      assert.deepEqual(await names(`search=${encodeURIComponent('%_')}`), ['50%_off']);
      assert.deepEqual(await names('search=_'), ['50%_off', 'a_b\\c']);
      assert.deepEqual(await names('search=a_b'), ['a_b\\c'], 'not axb');
      assert.deepEqual(await names(`search=${encodeURIComponent('\\')}`), ['a_b\\c']);
      assert.deepEqual(await names(`search=${encodeURIComponent('b\\c')}`), ['a_b\\c']);
    });

    it('combines with server_id, status and external_id', async () => {
      assert.deepEqual(await names(`search=cust&server_id=${second}`), ['bob laptop', 'router']);
      assert.deepEqual(await names(`search=cust&server_id=${second}&status=disabled`), ['router']);
      assert.deepEqual(await names('search=a&status=active'), ['Alice-Phone', 'bob laptop', 'axb']);
      assert.deepEqual(await names('search=phone&external_id=CUST-100'), ['Alice-Phone']);
      assert.deepEqual(await names('search=phone&external_id=cust-100'), [], 'external_id stays exact');
    });

    it('pages with the cursor like the unfiltered list', async () => {
      const seen: string[] = [];
      let cursor = 0;
      for (;;) {
        const page = await list(`search=a&limit=2&after=${cursor}`);
        assert.ok(page.data.length <= 2);
        seen.push(...page.data.map((d) => d.name));
        if (!page.has_more) break;
        cursor = page.data.at(-1)?.id ?? cursor;
      }
      assert.deepEqual(seen, ['Alice-Phone', 'bob laptop', 'a_b\\c', 'axb']);
      assert.deepEqual(await names(`search=a&after=${ids.get('a_b\\c')}`), ['axb']);
    });

    it('takes an empty search as none, and refuses one longer than an external id', async () => {
      assert.equal((await list('search=')).data.length, 6);
      const answer = await panel.app.inject({
        method: 'GET',
        url: `/api/v1/devices?search=${'x'.repeat(256)}`,
        headers: { authorization: `Bearer ${key}` },
      });
      assert.equal(answer.statusCode, 400);
      assert.equal(answer.json().error.code, 'bad_request');
    });
  });
}
