import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';
import { type PanelProcess, startPanel } from '../support/panel.ts';

for (const kind of DATABASE_KINDS) {
  describe(`paging with after and limit (${kind})`, () => {
    let db: TestDatabase;
    let panel: PanelProcess;
    let key: string;
    const created: number[] = [];

    async function page(query: string): Promise<{ data: { id: number }[]; has_more: boolean }> {
      const response = await fetch(`${panel.url}/api/v1/servers${query}`, { headers: { authorization: `Bearer ${key}` } });
      assert.equal(response.status, 200);
      return response.json();
    }

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await startPanel({ database: db });
      key = await panel.createKey('pager', 'servers:read,servers:write', ['--no-rate-limit']);
      for (let i = 0; i < 7; i++) {
        const response = await fetch(`${panel.url}/api/v1/servers`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name: `s${i}`, country: i % 2 === 0 ? 'DE' : 'NL' }),
        });
        created.push((await response.json()).id);
      }
    });
    after(async () => {
      await panel.stop();
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
