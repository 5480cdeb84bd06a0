/**
 * Pages kept per reused rows (keptPages): the same page object only for the very same rows array and limit, so a
 * list never shows a page of rows read before a commit (a reused read answers a new array after one).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { keptPages, keptPerRow } from '../../src/services/row-views.ts';

interface Row {
  id: number;
}

describe('keptPages', () => {
  const rows: readonly Row[] = [{ id: 1 }, { id: 2 }, { id: 3 }];
  let views = 0;
  const pageOf = keptPages(
    keptPerRow((row: Row) => {
      views++;
      return { id: row.id, label: `row ${row.id}` };
    }),
  );

  it('pages the rows as toPage does, each view made once per row', () => {
    const page = pageOf(rows, { afterId: 0, limit: 2 });
    assert.deepEqual(page, {
      data: [
        { id: 1, label: 'row 1' },
        { id: 2, label: 'row 2' },
      ],
      has_more: true,
    });
    assert.deepEqual(pageOf(rows, { afterId: 0, limit: 3 }).has_more, false);
    assert.equal(views, 3);
  });

  it('gives the same frozen page for the same rows array and limit, a new one for new rows or a new limit', () => {
    const page = pageOf(rows, { afterId: 0, limit: 3 });
    assert.equal(pageOf(rows, { afterId: 0, limit: 3 }), page);
    assert.ok(Object.isFrozen(page) && Object.isFrozen(page.data));
    assert.notEqual(pageOf(rows, { afterId: 0, limit: 2 }), page);
    const after = pageOf([...rows, { id: 4 }], { afterId: 0, limit: 3 });
    assert.notEqual(after, page);
    assert.equal(after.has_more, true);
    assert.deepEqual(
      pageOf([{ id: 5 }], { afterId: 0, limit: 3 }).data.map((view) => view.id),
      [5],
    );
  });
});
