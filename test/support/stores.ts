import { openMigratedStore } from '../../src/main/store.ts';
import { openStore, type Store } from '../../src/store/open.ts';
import { migrate } from '../../src/store/migrate.ts';
import { createTestDatabase, type DatabaseKind, type TestDatabase } from './databases.ts';

export interface TestStore {
  readonly store: Store;
  readonly database: TestDatabase;
  /** Closes the store and drops its database. */
  close(): Promise<void>;
}

export interface TestStoreOptions {
  /**
   * Open it as the panel does, its encrypted columns sealed with a new panel secret in the data dir
   * (`openMigratedStore`). Without it the columns are kept in plain, as a store that only migrated.
   */
  sealed?: boolean;
}

/** A store on a new test database of the kind, its schema migrated to the latest version. */
export async function openTestStore(kind: DatabaseKind, options: TestStoreOptions = {}): Promise<TestStore> {
  const database = await createTestDatabase(kind);
  const config = { dataDir: database.dataDir, databaseUrl: database.env.DATABASE_URL, panelSecret: undefined };
  let store: Store;
  try {
    if (options.sealed) {
      store = await openMigratedStore(config);
    } else {
      store = openStore(config);
      await migrate(store).catch(async (error: unknown) => {
        await store.close();
        throw error;
      });
    }
  } catch (error) {
    await database.drop();
    throw error;
  }
  return {
    store,
    database,
    async close() {
      await store.close();
      await database.drop();
    },
  };
}
