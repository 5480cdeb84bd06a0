import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CompiledShape, type ReusedRows, ReusedShape } from '../../src/store/query-shapes.ts';
import { openStore, type Store } from '../../src/store/open.ts';
import { write } from '../../src/store/db.ts';
import { DATABASE_KINDS } from '../support/databases.ts';
import { openTestStore, type TestStore } from '../support/stores.ts';

/** Node names, oldest first: a list that may answer from memory while nothing changes. */
const nodeNames = new ReusedShape(
  (db, prefix: string | undefined) => {
    let query = db.selectFrom('nodes').select(['id', 'name']);
    if (prefix !== undefined) query = query.where('name', 'like', prefix);
    return query.orderBy('id');
  },
  ['\u0000prefix'],
);

/** The same list, read anew every time. */
const freshNodeNames = new CompiledShape((db) => db.selectFrom('nodes').select(['id', 'name']).orderBy('id'), []);

/** Reused rows are read-only to the type checker (nothing freezes them): `npm run typecheck` checks these lines. */
export function changeReusedRows(rows: ReusedRows<{ id: number; name: string }>): void {
  for (const row of rows.rows) {
    // @ts-expect-error: the rows of a reused read cannot be changed
    row.name = 'changed';
  }
  // @ts-expect-error: nor can their array
  rows.rows.push({ id: 0, name: 'added' });
}

for (const kind of DATABASE_KINDS) {
  describe(`compiled query shapes (${kind})`, () => {
    let opened: TestStore;
    let store: Store;
    /** Another process's connection, as the CLI or a second panel has. */
    let other: Store;

    const names = async (prefix?: string) => (await nodeNames.execute(store.db, prefix)).rows.map((row) => row.name);
    const addNode = (db: Store['db'], name: string) =>
      db
        .insertInto('nodes')
        .values({
          name,
          url: `http://${name}:7000`,
          token: 'x'.repeat(16),
          public_host: name,
          status: 'offline',
          created_at: '2026-01-01T00:00:00.000Z',
        })
        .execute();

    before(async () => {
      opened = await openTestStore(kind);
      store = opened.store;
      other = openStore({ databaseUrl: opened.database.env.DATABASE_URL, dataDir: opened.database.dataDir });
    });
    after(async () => {
      await other.close();
      await opened.close();
    });

    it("answers every change: its own writes at once, another connection's at the next request", async () => {
      assert.deepEqual(await names(), []);
      await addNode(store.db, 'a1');
      assert.deepEqual(await names(), ['a1']);
      await addNode(other.db, 'b1');
      store.requestBegins();
      assert.deepEqual(await names(), ['a1', 'b1'], 'a commit by another connection shows at the next request');
      assert.deepEqual(await names('b%'), ['b1'], 'a given filter is its own query');
      assert.deepEqual(await names(), ['a1', 'b1']);
      await other.db.deleteFrom('nodes').where('name', '=', 'a1').execute();
      store.requestBegins();
      assert.deepEqual(await names(), ['b1']);
      await other.db.updateTable('nodes').set({ name: 'b2' }).execute();
      store.requestBegins();
      assert.deepEqual(await names('b%'), ['b2']);
    });

    // SQLite's one connection: a read waits for the transaction holding it. On PostgreSQL a read takes another
    // connection of the pool and sees what was committed when it began.
    if (kind === 'sqlite') {
      it('waits for a transaction that holds the connection and then sees its commit', async () => {
        let release = () => {};
        const held = new Promise<void>((resolve) => {
          release = resolve;
        });
        let inserted = () => {};
        const insertedYet = new Promise<void>((resolve) => {
          inserted = resolve;
        });
        const transaction = write(store.db, async (tx) => {
          await addNode(tx, 'c1');
          inserted();
          await held;
        });
        await insertedYet;
        const read = names('c%');
        release();
        await transaction;
        assert.deepEqual(await read, ['c1']);
      });
    }

    // The reuse check reads the WAL-index header first and runs data_version only when it changed: a commit by
    // another process (the CLI), through its own mapping of the -shm file, must still show at the next request.
    if (kind === 'sqlite') {
      it("sees another process's commit at the next request, and keeps its rows while none came", async () => {
        const first = await nodeNames.execute(store.db, undefined);
        store.requestBegins();
        assert.equal(await nodeNames.execute(store.db, undefined), first, 'no commit: the same rows');
        const script =
          "import SQLite from 'better-sqlite3'; const db = new SQLite(process.argv[1]); " +
          "db.prepare(`update nodes set public_host = 'from-a-process'`).run(); db.close();";
        const path = join(opened.database.dataDir, 'vpn-panel.db');
        const child = spawnSync(process.execPath, ['--input-type=module', '-e', script, path], { encoding: 'utf8' });
        assert.equal(child.status, 0, child.stderr);
        store.requestBegins();
        const after = await nodeNames.execute(store.db, undefined);
        assert.notEqual(after, first, 'the commit of another process is seen by the next request');
        store.requestBegins();
        assert.equal(await nodeNames.execute(store.db, undefined), after, 'and then the rows are kept again');
      });
    }

    // The one difference between the databases (docs/architecture.md, "Reused reads"): SQLite answers a reused read
    // again while nothing is committed; PostgreSQL, whose writers are other panels too, runs every read.
    const same = kind === 'sqlite' ? 'gives the same rows object again' : 'reads anew every time';
    it(`${same} while nothing is committed`, async () => {
      await addNode(store.db, 'same');
      store.requestBegins();
      const first = await nodeNames.execute(store.db, undefined);
      const again = await nodeNames.execute(store.db, undefined);
      assert.deepEqual(again.rows, first.rows);
      if (kind === 'sqlite') assert.equal(again, first, 'the read is answered from memory');
      else assert.notEqual(again, first, 'every read is new on PostgreSQL');
      const fresh = await freshNodeNames.execute(store.db);
      assert.notEqual(await freshNodeNames.execute(store.db), fresh, 'a CompiledShape reads anew on both');
      await other.db.deleteFrom('nodes').where('name', '=', 'same').execute();
      store.requestBegins();
      assert.notEqual(await nodeNames.execute(store.db, undefined), again, 'and after a commit, on both');
    });

    if (kind === 'sqlite') {
      it('gives the same rows again while nothing is committed, and new ones after a commit', async () => {
        const first = await nodeNames.execute(store.db, undefined);
        const again = await nodeNames.execute(store.db, undefined);
        assert.equal(again, first, 'the read is answered from memory');
        await other.db.updateTable('nodes').set({ public_host: 'elsewhere' }).execute();
        store.requestBegins();
        assert.notEqual(
          await nodeNames.execute(store.db, undefined),
          first,
          'a commit elsewhere, even one that leaves the answer the same, is read again',
        );
        const before = await nodeNames.execute(store.db, undefined);
        await store.db.updateTable('nodes').set({ public_host: 'here' }).execute();
        assert.notEqual(await nodeNames.execute(store.db, undefined), before, 'so is a commit by this connection');
      });

      it("checks for other connections' commits once between two requests and within a turn of the loop", async () => {
        const first = await nodeNames.execute(store.db, undefined);
        await other.db.updateTable('nodes').set({ public_host: 'third' }).execute();
        assert.equal(
          await nodeNames.execute(store.db, undefined),
          first,
          'no request arrived and the turn goes on: the reading made for the first read holds',
        );
        await new Promise((resolve) => setImmediate(resolve));
        const nextTurn = await nodeNames.execute(store.db, undefined);
        assert.notEqual(nextTurn, first, 'the next turn of the event loop reads anew');
        await other.db.updateTable('nodes').set({ public_host: 'fourth' }).execute();
        store.requestBegins();
        assert.notEqual(await nodeNames.execute(store.db, undefined), nextTurn, 'so does a request that arrives');
      });
    }
  });
}

/** Nodes with their token, a sealed column. */
const nodeTokens = new ReusedShape(
  (db, name: string) => db.selectFrom('nodes').select(['name', 'token']).where('name', '=', name),
  ['\u0000name'],
);

for (const kind of DATABASE_KINDS) {
  describe(`compiled query shapes on a sealed store (${kind})`, () => {
    let opened: TestStore;
    before(async () => {
      opened = await openTestStore(kind, { sealed: true });
    });
    after(() => opened.close());

    it('opens sealed values read through a shape (read at once, they skip the plugin), and reads at once', async () => {
      const { db } = opened.store;
      await db
        .insertInto('nodes')
        .values({
          name: 'n1',
          url: 'http://n1:7000',
          token: 't'.repeat(16),
          public_host: 'n1',
          status: 'offline',
          created_at: '2026-01-01T00:00:00.000Z',
        })
        .execute();
      assert.deepEqual((await nodeTokens.execute(db, 'n1')).rows, [{ name: 'n1', token: 't'.repeat(16) }]);
      assert.deepEqual((await nodeTokens.execute(db, 'n1')).rows, [{ name: 'n1', token: 't'.repeat(16) }]);
      if (kind === 'sqlite') {
        const first = await nodeNames.execute(db, undefined);
        assert.equal(await nodeNames.execute(db, undefined), first, 'answered from memory: the read ran at once');
      }
    });
  });
}
