import assert from 'node:assert/strict';
import { it } from 'node:test';
import { sql } from 'kysely';
import { openTestStore } from '../support/stores.ts';

it("a SQLite store keeps SQLite's own page cache (2 MB), not better-sqlite3's 16 MB", async () => {
  const { store, close } = await openTestStore('sqlite');
  try {
    const { rows } = await sql<{ cache_size: number }>`PRAGMA cache_size`.execute(store.db);
    assert.deepEqual(rows, [{ cache_size: -2000 }], 'a walk of a large panel would keep 16 MB of pages in the process');
  } finally {
    await close();
  }
});
