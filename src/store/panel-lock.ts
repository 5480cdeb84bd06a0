import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { preparePrivateDir, preparePrivateFile } from '../platform/private-files.ts';

/**
 * Every running panel holds this lock shared, for as long as it runs; a restore takes it
 * exclusively, so a restore never runs under a panel (whose caches and nodes would then disagree with
 * the database) and a panel never starts in the middle of a restore. On PostgreSQL it is an advisory
 * lock of the database; on SQLite a lock on a small file beside the database. The operating system or
 * the server drops it when its process ends, also after a crash.
 */
export interface PanelLock {
  release(): Promise<void>;
}

export interface LockOptions {
  databaseUrl: string | undefined;
  dataDir: string;
}

/** The lock is held the other way: the line says what runs and what to do. */
export class PanelLockError extends Error {}

export const LOCK_FILE = 'vpn-panel.lock';
/** 'vpnp': the advisory lock key of vpn-panel in its database. */
const ADVISORY_KEY = 0x76706e70;
/** A panel starting during a restore waits this long for it to finish. */
const PANEL_WAIT_MS = 10 * 60_000;

const RESTORE_RUNNING = 'a restore is running on this database; start the panel when it has finished';
const PANEL_RUNNING = 'a panel is running on this database: stop every panel that uses it, then restore';

function isBusy(error: unknown): boolean {
  return error instanceof Error && 'code' in error && (error.code === 'SQLITE_BUSY' || error.code === '55P03');
}

async function advisoryClient(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  // A lost connection drops the lock with it; the process goes on (without it) rather than crash.
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/** A lock on the lock file: the transaction `begin` starts holds it until `end` finishes it. */
interface FileLock {
  begin: string;
  end: string;
  /** How long to wait while the lock is held the other way. */
  waitMs: number;
  /** The PanelLockError's message when it is still held the other way. */
  heldMessage: string;
}

function holdLockFile(dataDir: string, lock: FileLock): PanelLock {
  preparePrivateDir(dataDir);
  const path = join(dataDir, LOCK_FILE);
  preparePrivateFile(path);
  const file = new SQLite(path);
  file.pragma(`busy_timeout = ${lock.waitMs}`);
  try {
    file.exec(lock.begin);
  } catch (error) {
    file.close();
    throw isBusy(error) ? new PanelLockError(lock.heldMessage) : error;
  }
  return {
    release: async () => {
      file.exec(lock.end);
      file.close();
    },
  };
}

/** Taken by `serve` before it opens the database; several panels hold it at once. */
export async function holdPanelLock(options: LockOptions): Promise<PanelLock> {
  if (options.databaseUrl) {
    const client = await advisoryClient(options.databaseUrl);
    try {
      await client.query(`set lock_timeout = ${PANEL_WAIT_MS}`);
      await client.query('select pg_advisory_lock_shared($1)', [ADVISORY_KEY]);
    } catch (error) {
      await client.end();
      throw isBusy(error) ? new PanelLockError(RESTORE_RUNNING) : error;
    }
    return { release: () => client.end() };
  }
  return holdLockFile(options.dataDir, {
    // A read transaction keeps a shared lock on the file until it ends.
    begin: 'BEGIN; SELECT count(*) FROM sqlite_master',
    end: 'COMMIT',
    waitMs: PANEL_WAIT_MS,
    heldMessage: RESTORE_RUNNING,
  });
}

/** Taken by `restore`; refused at once while any panel runs on the database. */
export async function takeRestoreLock(options: LockOptions): Promise<PanelLock> {
  if (options.databaseUrl) {
    const client = await advisoryClient(options.databaseUrl);
    const { rows } = await client.query<{ taken: boolean }>('select pg_try_advisory_lock($1) as taken', [ADVISORY_KEY]);
    if (rows[0]?.taken !== true) {
      await client.end();
      throw new PanelLockError(PANEL_RUNNING);
    }
    return { release: () => client.end() };
  }
  return holdLockFile(options.dataDir, {
    begin: 'BEGIN EXCLUSIVE',
    end: 'ROLLBACK',
    waitMs: 0,
    heldMessage: PANEL_RUNNING,
  });
}
