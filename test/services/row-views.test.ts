/**
 * Pages kept per reused rows (keptPages, KeptPages): the same page object only for the very same rows object and
 * limit, so a list never shows a page of rows read before a commit (a reused read answers a new object after one).
 * On both databases: SQLite answers the same rows again while nothing is committed, so its list is the same page;
 * PostgreSQL reads anew every time, so every call makes its page (docs/architecture.md, "Reused reads").
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KeptPages, keptPages } from '../../src/services/row-views.ts';
import { ReusedShape } from '../../src/store/query-shapes.ts';
import { DATABASE_KINDS } from '../support/databases.ts';
import { migratedStoreForSuite, seedNode } from '../support/usage-fixtures.ts';

/** Node names, oldest first. */
const nodeNames = new ReusedShape((db) => db.selectFrom('nodes').select(['id', 'name']).orderBy('id'), []);

for (const kind of DATABASE_KINDS) {
  describe(`pages kept per reused rows (${kind})`, () => {
    const suite = migratedStoreForSuite(kind);
    let views = 0;
    const pageOf = keptPages((row: { id: number; name: string }) => {
      views++;
      return { id: row.id, label: `node ${row.name}` };
    });
    const addNode = (name: string) => seedNode(suite.store.db, name, '2026-01-01T00:00:00.000Z');
    const read = () => {
      // A request arrives (SQLite checks for other processes' commits once per request).
      suite.store.requestBegins();
      return nodeNames.execute(suite.store.db);
    };

    it('pages the rows as toPage does, each view made once per rows object', async () => {
      for (const name of ['a', 'b', 'c']) await addNode(name);
      const rows = await read();
      views = 0;
      assert.deepEqual(pageOf(rows, { afterId: 0, limit: 2 }), {
        data: [
          { id: 1, label: 'node a' },
          { id: 2, label: 'node b' },
        ],
        has_more: true,
      });
      assert.equal(views, 2);
      assert.equal(pageOf(rows, { afterId: 0, limit: 3 }).has_more, false, 'another limit, another page');
      assert.equal(pageOf(rows, { afterId: 0, limit: 3 }), pageOf(rows, { afterId: 0, limit: 3 }));
      assert.equal(views, 5);
    });

    const same = kind === 'sqlite' ? 'the same page' : 'a new page every time';
    it(`is ${same} while nothing is committed, and a new one after a commit`, async () => {
      const request = { afterId: 0, limit: 50 };
      const first = pageOf(await read(), request);
      const again = pageOf(await read(), request);
      assert.deepEqual(again, first);
      if (kind === 'sqlite') assert.equal(again, first, 'the same rows object, so the same page');
      else assert.notEqual(again, first, 'PostgreSQL reads anew, so the page is made anew');
      await addNode('d');
      const after = pageOf(await read(), request);
      assert.notEqual(after, again);
      assert.deepEqual(
        after.data.map((view) => view.label),
        ['node a', 'node b', 'node c', 'node d'],
      );
    });

    it('keeps a page only between the instants given with it', async () => {
      const pages = new KeptPages<{ id: number; name: string }, string>();
      const rows = await read();
      const request = { afterId: 0, limit: 50 };
      const page = pages.keep(rows, request, { data: ['x'], has_more: false }, 1_000, 2_000);
      assert.equal(pages.kept(rows, request, 1_000), page);
      assert.equal(pages.kept(rows, request, 1_999), page);
      assert.equal(pages.kept(rows, request, 2_000), undefined, 'its time ran out');
      assert.equal(pages.kept(rows, request, 999), undefined, 'before it was made');
      assert.equal(pages.kept(rows, { afterId: 0, limit: 2 }, 1_500), undefined, 'another limit');
    });
  });
}
