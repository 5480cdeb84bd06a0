import { messageOf } from '../domain/errors.ts';
import { resolve } from 'node:path';
import { isoAt, systemClock } from '../domain/clock.ts';
import { storeConfig } from '../main/config.ts';
import { BackupError, verifyBackupFile } from '../store/backup-file.ts';
import { loadBackup, restoreLevel, writeBackup } from '../store/backup.ts';
import { openStore } from '../store/open.ts';
import { executedMigrations } from '../store/introspect.ts';
import { migrate } from '../store/migrate.ts';
import { takeRestoreLock } from '../store/panel-lock.ts';
import { SECRET_FILE, secretFor, unlockSecrets } from '../store/panel-secret.ts';
import { parseCommandArgs, UsageError } from './usage.ts';

function oneFile(args: string[], command: string, options: { replace?: { type: 'boolean' } } = {}) {
  const { values, positionals } = parseCommandArgs(args, options);
  const [file] = positionals;
  if (file === undefined || positionals.length !== 1) throw new UsageError(`${command} takes one FILE`);
  return { file, path: resolve(file), replace: values.replace === true };
}

/** `vpn-panel backup FILE`: a consistent snapshot of the whole state, taken while panels go on running. */
export async function backupCommand(args: string[]): Promise<number> {
  const { file, path } = oneFile(args, 'backup');
  const store = openStore(storeConfig(process.env));
  try {
    const summary = await writeBackup(store, path, isoAt(systemClock.nowMs()));
    console.log(
      `backed up ${summary.rows} rows of ${summary.tables} tables (schema ${summary.migration}) to ${file}, sha256 ${summary.sha256}`,
    );
    console.log(
      `its private keys are encrypted: restoring it needs this panel's secret too (DATA_DIR/${SECRET_FILE} or PANEL_SECRET)`,
    );
    return 0;
  } finally {
    await store.close();
  }
}

/**
 * `vpn-panel restore FILE [--replace]`: checks the whole file, the panel secret and that no panel
 * runs on the database before it touches anything; then loads the backup in one transaction.
 */
export async function restoreCommand(args: string[]): Promise<number> {
  const { file, path, replace } = oneFile(args, 'restore', { replace: { type: 'boolean' } });
  const config = storeConfig(process.env);
  const header = await refusing(() => verifyBackupFile(path));
  const lock = await refusing(() => {
    restoreLevel(header.migrations, []);
    secretFor(header.secret_fingerprint ?? undefined, config);
    return takeRestoreLock(config);
  });
  const store = openStore(config);
  try {
    const summary = await refusing(async () => {
      await migrate(store, restoreLevel(header.migrations, await executedMigrations(store.db, store.dialect)));
      return loadBackup(store, path, header, { replace });
    });
    await migrate(store);
    await unlockSecrets(store, config);
    console.log(
      `restored ${summary.rows} rows of ${summary.tables} tables from ${file} (backup of ${header.created_at}, schema ${header.migrations.at(-1) ?? ''})`,
    );
    console.log('the panel hands every node the restored state when it starts: its first round resyncs each node');
    return 0;
  } finally {
    await store.close();
    await lock.release();
  }
}

/** Runs a step of a restore before anything is changed: its failure says so. */
async function refusing<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (error) {
    throw new BackupError(`nothing was restored: ${messageOf(error)}`);
  }
}
