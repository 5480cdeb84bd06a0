import { withEncryption } from '../store/encryption.ts';
import { migrate } from '../store/migrate.ts';
import { openStore, type Store } from '../store/open.ts';
import { unlockSecrets } from '../store/panel-secret.ts';
import type { StoreConfig } from './config.ts';

/**
 * Opens the database, brings its schema up to date and unlocks its encrypted columns with the panel
 * secret (the panel and the CLI both start here). Apart from src/main/panel.ts, so a CLI command that only opens
 * the store loads neither the HTTP server nor the workers.
 */
export async function openMigratedStore(config: StoreConfig): Promise<Store> {
  const store = openStore(config);
  try {
    await migrate(store);
    return withEncryption(store, await unlockSecrets(store, config));
  } catch (error) {
    await store.close();
    throw error;
  }
}
