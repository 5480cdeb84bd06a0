import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

/** Every storage-touching test runs on both. */
export const DATABASE_KINDS = ['sqlite', 'postgres'] as const;
export type DatabaseKind = (typeof DATABASE_KINDS)[number];

/** The PostgreSQL server of the machine and CI (trust auth); a test makes its own database in it. */
const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export interface TestDatabase {
  kind: DatabaseKind;
  /** DATA_DIR and, for PostgreSQL, DATABASE_URL. */
  env: { DATA_DIR: string; DATABASE_URL?: string };
  dataDir: string;
  drop(): Promise<void>;
}

async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** A new empty database of the kind: a SQLite file in a temp dir, or a new PostgreSQL database. */
export async function createTestDatabase(kind: DatabaseKind): Promise<TestDatabase> {
  const dataDir = mkdtempSync(join(tmpdir(), 'vpn-panel-test-'));
  if (kind === 'sqlite') {
    return {
      kind,
      dataDir,
      env: { DATA_DIR: dataDir },
      drop: async () => rmSync(dataDir, { recursive: true, force: true }),
    };
  }
  const name = `vp_test_${randomBytes(6).toString('hex')}`;
  await admin((c) => c.query(`CREATE DATABASE ${name}`));
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    kind,
    dataDir,
    env: { DATA_DIR: dataDir, DATABASE_URL: url.toString() },
    drop: async () => {
      rmSync(dataDir, { recursive: true, force: true });
      await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}
