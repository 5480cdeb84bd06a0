import { messageOf } from '../domain/errors.ts';
import type { Kysely } from 'kysely';
import { type Migration, type MigrationProvider, Migrator } from 'kysely/migration';
import type { Dialect } from './db.ts';
import type { Store } from './open.ts';
import type { MigrationContext } from './migration-context.ts';
import * as m001 from './migrations/001-foundation.ts';
import * as m002 from './migrations/002-nodes-servers-events.ts';
import * as m003 from './migrations/003-devices.ts';
import * as m004 from './migrations/004-share-links.ts';
import * as m005 from './migrations/005-webhooks.ts';
import * as m006 from './migrations/006-device-page-index.ts';
import * as m007 from './migrations/007-usage.ts';
import * as m008 from './migrations/008-activity.ts';
import * as m009 from './migrations/009-mail-outbox.ts';
import * as m010 from './migrations/010-panel-settings.ts';
import * as m011 from './migrations/011-server-client-to-client.ts';
import * as m012 from './migrations/012-node-cert-pin.ts';
import * as m013 from './migrations/013-share-token-hashes.ts';
import * as m014 from './migrations/014-duty-leases.ts';
import * as m015 from './migrations/015-console-users.ts';
import * as m016 from './migrations/016-usage-fillfactor.ts';
import * as m017 from './migrations/017-dual-stack-addresses.ts';
import * as m018 from './migrations/018-server-device-count.ts';
import * as m019 from './migrations/019-fleet-usage-and-search.ts';
import * as m020 from './migrations/020-usage-months-from-days.ts';
import * as m021 from './migrations/021-device-day-in-row.ts';
import * as m022 from './migrations/022-activity-redaction.ts';
import * as m023 from './migrations/023-server-protocols.ts';
import * as m024 from './migrations/024-plans.ts';
import * as m025 from './migrations/025-device-plans.ts';
import * as m026 from './migrations/026-top-ups.ts';
import * as m027 from './migrations/027-expiry-reminders.ts';
import * as m028 from './migrations/028-usage-thresholds.ts';
import * as m029 from './migrations/029-delivery-device.ts';
import * as m030 from './migrations/030-idempotency-owners.ts';

interface MigrationModule {
  up(db: Kysely<unknown>, context: MigrationContext): Promise<void>;
}

/** Every migration in order; a new one is appended here and never edited once released. */
const MIGRATIONS: Record<string, MigrationModule> = {
  '001-foundation': m001,
  '002-nodes-servers-events': m002,
  '003-devices': m003,
  '004-share-links': m004,
  '005-webhooks': m005,
  '006-device-page-index': m006,
  '007-usage': m007,
  '008-activity': m008,
  '009-mail-outbox': m009,
  '010-panel-settings': m010,
  '011-server-client-to-client': m011,
  '012-node-cert-pin': m012,
  '013-share-token-hashes': m013,
  '014-duty-leases': m014,
  '015-console-users': m015,
  '016-usage-fillfactor': m016,
  '017-dual-stack-addresses': m017,
  '018-server-device-count': m018,
  '019-fleet-usage-and-search': m019,
  '020-usage-months-from-days': m020,
  '021-device-day-in-row': m021,
  '022-activity-redaction': m022,
  '023-server-protocols': m023,
  '024-plans': m024,
  '025-device-plans': m025,
  '026-top-ups': m026,
  '027-expiry-reminders': m027,
  '028-usage-thresholds': m028,
  '029-delivery-device': m029,
  '030-idempotency-owners': m030,
};

function provider(dialect: Dialect): MigrationProvider {
  // SQLite's INTEGER PRIMARY KEY is the rowid, auto-numbered; PostgreSQL needs a sequence.
  const context: MigrationContext =
    dialect === 'sqlite'
      ? { dialect, idType: 'integer', id: (c) => c.primaryKey().autoIncrement() }
      : { dialect, idType: 'bigserial', id: (c) => c.primaryKey() };
  return {
    async getMigrations() {
      const out: Record<string, Migration> = {};
      for (const [name, module] of Object.entries(MIGRATIONS)) out[name] = { up: (db) => module.up(db, context) };
      return out;
    },
  };
}

/** Every migration this code knows, in the order they run (kysely's Migrator sorts them by name). */
export const MIGRATION_NAMES: readonly string[] = Object.keys(MIGRATIONS).sort();

/**
 * Brings the schema up to date, or up to `upTo` and no further (a restore loads a backup at the level
 * it was made); safe to run at every start, also by several processes at once.
 */
export async function migrate(store: Store, upTo?: string): Promise<void> {
  const migrator = new Migrator({ db: store.db, provider: provider(store.dialect) });
  const { error, results } = upTo === undefined ? await migrator.migrateToLatest() : await migrator.migrateTo(upTo);
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName;
    throw new Error(`database migration ${failed ?? ''} failed: ${messageOf(error)}`);
  }
}
