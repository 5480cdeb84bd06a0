import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { claimLease, releaseLease } from '../../src/store/leases.ts';
import { openStore, type Store } from '../../src/store/open.ts';
import { DatabaseLease } from '../../src/workers/lease.ts';
import { DATABASE_KINDS } from '../support/databases.ts';
import { waitFor } from '../support/netns.ts';
import { openTestStore, type TestStore } from '../support/stores.ts';

const silent = pino({ level: 'silent' });

for (const kind of DATABASE_KINDS) {
  describe(`duty_leases rows (${kind})`, () => {
    let opened: TestStore;
    let store: Store;
    before(async () => {
      opened = await openTestStore(kind);
      store = opened.store;
    });
    after(async () => {
      await opened.close();
    });

    it('one holder at a time: it renews, others are refused until it releases', async () => {
      assert.equal(await claimLease(store.db, 'a', 'panel-1', 60_000), true, 'a free lease is taken');
      assert.equal(await claimLease(store.db, 'a', 'panel-2', 60_000), false, 'held by another');
      assert.equal(await claimLease(store.db, 'a', 'panel-1', 60_000), true, 'the holder renews');
      assert.equal(await claimLease(store.db, 'b', 'panel-2', 60_000), true, 'each name is its own lease');
      await releaseLease(store.db, 'a', 'panel-2');
      assert.equal(await claimLease(store.db, 'a', 'panel-2', 60_000), false, 'only the holder releases it');
      await releaseLease(store.db, 'a', 'panel-1');
      assert.equal(await claimLease(store.db, 'a', 'panel-2', 60_000), true, 'released: taken at once');
    });

    it('a lease not renewed lapses after its TTL on the database clock, and another takes it', async () => {
      const ttlMs = 400;
      const sentMs = Date.now();
      assert.equal(await claimLease(store.db, 'lapse', 'panel-1', ttlMs), true);
      assert.equal(await claimLease(store.db, 'lapse', 'panel-2', ttlMs), false);
      const takenMs = await waitFor(
        'panel-2 to take the lapsed lease',
        async () => ((await claimLease(store.db, 'lapse', 'panel-2', ttlMs)) ? Date.now() : undefined),
        5_000,
        20,
      );
      // The database runs on this machine's clock; its text has milliseconds.
      assert.ok(takenMs - sentMs >= ttlMs - 1, `taken ${takenMs - sentMs} ms after the claim, TTL ${ttlMs} ms`);
      assert.equal(await claimLease(store.db, 'lapse', 'panel-1', ttlMs), false, 'the old holder does not get it back');
    });

    it('of many panels claiming a free lease at once, exactly one gets it', async () => {
      const claims = await Promise.all(
        Array.from({ length: 12 }, (_, i) => claimLease(store.db, 'race', `panel-${i}`, 60_000)),
      );
      assert.equal(claims.filter((taken) => taken).length, 1, JSON.stringify(claims));
    });
  });
}

describe('DatabaseLease: two panels on one PostgreSQL', () => {
  let opened: TestStore;
  /** The second panel's own connections to the same database. */
  let other: Store;
  before(async () => {
    opened = await openTestStore('postgres');
    other = openStore({ databaseUrl: opened.database.env.DATABASE_URL, dataDir: opened.database.dataDir });
  });
  after(async () => {
    await other.close();
    await opened.close();
  });

  it(
    'one holds; when its database connection is gone it stops holding before the other takes over, ' +
      'within TTL + renewal',
    async () => {
      const options = { name: 'duties', ttlMs: 1_000, renewMs: 100 };
      const dying = openStore({ databaseUrl: opened.database.env.DATABASE_URL, dataDir: opened.database.dataDir });
      const first = new DatabaseLease(dying.db, silent, options);
      const second = new DatabaseLease(other.db, silent, options);
      assert.notEqual(first.holder, second.holder);
      let firstHeldWhenSecondGained: boolean | undefined;
      second.onGained(() => {
        firstHeldWhenSecondGained = first.held;
      });
      await first.start();
      await second.start();
      try {
        assert.equal(first.held, true, 'the first to claim holds it');
        assert.equal(second.held, false);
        // Renewals keep it well past its TTL.
        const keptUntil = Date.now() + 2 * options.ttlMs;
        await waitFor('two TTLs of renewals', async () => (Date.now() > keptUntil ? true : undefined), 5_000, 50);
        assert.equal(first.held, true, 'the holder keeps it by renewing');
        assert.equal(second.held, false);

        // As a panel cut off from the database: its claims fail from now on.
        const cutMs = Date.now();
        await dying.close();
        const takenMs = await waitFor(
          'the second panel to take over',
          async () => (second.held ? Date.now() : undefined),
          10_000,
          20,
        );
        assert.equal(
          firstHeldWhenSecondGained,
          false,
          'the first had stopped believing it held the lease when the second gained it',
        );
        const bound = options.ttlMs + options.renewMs;
        assert.ok(
          takenMs - cutMs <= bound + 500,
          `taken over ${takenMs - cutMs} ms after the cut (TTL + renewal: ${bound} ms)`,
        );
        assert.equal(first.held, false);
      } finally {
        await first.stop();
        await second.stop();
      }
      assert.equal(second.held, false, 'stopped: it gave the lease up');
      assert.equal(await claimLease(other.db, 'duties', 'a third panel', 60_000), true, 'released, so taken at once');
    },
  );
});
