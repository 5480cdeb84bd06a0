import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';

for (const kind of DATABASE_KINDS) {
  describe(`paging with after and limit (${kind}, in process)`, () => {
    let db: TestDatabase;
    let panel: AppUnderTest;
    let key: string;
    const created: number[] = [];

    async function page(query: string): Promise<{ data: { id: number }[]; has_more: boolean }> {
      const response = await panel.app.inject({
        method: 'GET',
        url: `/api/v1/servers${query}`,
        headers: { authorization: `Bearer ${key}` },
      });
      assert.equal(response.statusCode, 200);
      return response.json();
    }

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await buildTestApp(db);
      key = await panel.createKey('pager', 'servers:read,servers:write', { rateLimitExempt: true });
      const api = panel.client(key);
      for (let i = 0; i < 7; i++) {
        const { data } = await api.POST('/api/v1/servers', {
          body: { name: `s${i}`, country: i % 2 === 0 ? 'DE' : 'NL' },
        });
        assert.ok(data !== undefined, 'the server is created');
        created.push(data.id);
      }
    });
    after(async () => {
      await panel.close();
      await db.drop();
    });

    it('walks every item once, oldest first, with has_more false on the last page', async () => {
      const seen: number[] = [];
      let after = 0;
      for (;;) {
        const p = await page(`?limit=3&after=${after}`);
        assert.ok(p.data.length <= 3);
        seen.push(...p.data.map((s) => s.id));
        if (!p.has_more) break;
        after = p.data.at(-1)?.id ?? after;
      }
      assert.deepEqual(seen, created);
    });

    it('defaults to 50 and accepts the bounds 1 and 200', async () => {
      assert.equal((await page('')).data.length, 7);
      const one = await page('?limit=1');
      assert.equal(one.data.length, 1);
      assert.equal(one.has_more, true);
      assert.equal((await page('?limit=200')).has_more, false);
      assert.deepEqual(await page(`?after=${created.at(-1)}`), { data: [], has_more: false });
    });

    it('filters by country before paging', async () => {
      const de = await page('?country=de&limit=2');
      assert.equal(de.data.length, 2);
      assert.equal(de.has_more, true);
      const all = await page('?country=DE');
      assert.equal(all.data.length, 4);
    });
  });
}
