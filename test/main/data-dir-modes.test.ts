import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { openStore } from '../../src/store/open.ts';
import { createTestDatabase, type DatabaseKind, type TestDatabase } from '../support/databases.ts';
import { freePort, ROOT, runCli, startPanel } from '../support/panel.ts';

const CLI = join(ROOT, 'bin', 'vpn-panel.js');
const SQLITE_FILES = ['vpn-panel.db', 'vpn-panel.db-wal', 'vpn-panel.db-shm', 'vpn-panel.lock', 'panel.secret'];

const modeOf = (path: string) => `0${(statSync(path).mode & 0o777).toString(8)}`;

/** DATA_DIR is 0700 and every file of the panel in it that exists is 0600; returns the files seen. */
function assertPrivate(dataDir: string): string[] {
  assert.equal(modeOf(dataDir), '0700', `DATA_DIR ${dataDir}`);
  const present = SQLITE_FILES.filter((f) => existsSync(join(dataDir, f)));
  for (const file of present) assert.equal(modeOf(join(dataDir, file)), '0600', file);
  return present;
}

/** A database of SQLite in `dataDir`, left for the test's own cleanup to remove. */
function sqliteIn(dataDir: string): TestDatabase {
  return { kind: 'sqlite', dataDir, env: { DATA_DIR: dataDir }, drop: async () => {} };
}

/**
 * With umask 0 in this process (and so in the panels and commands it starts), only modes given
 * explicitly at creation keep anything private: the defaults would be 0777 and 0666 (SQLite 0644).
 */
describe('DATA_DIR and its files are private to the panel user, whoever makes them first', () => {
  const databases: TestDatabase[] = [];
  let umask = 0;
  before(() => {
    umask = process.umask(0);
  });
  after(async () => {
    process.umask(umask);
    for (const db of databases) await db.drop();
  });

  /** A DATA_DIR path that does not exist yet (two levels, both to be made), with the database of the kind. */
  async function fresh(kind: DatabaseKind): Promise<{ env: Record<string, string>; dataDir: string }> {
    const db = await createTestDatabase(kind);
    databases.push(db);
    const dataDir = join(db.dataDir, 'new', 'data');
    return { dataDir, env: { ...db.env, DATA_DIR: dataDir } };
  }

  // A backup of a database that nothing has set up yet fails, but it has made the database file by then.
  const firstCommands = [
    [['keys', 'create', '--name', 'k', '--scopes', 'all'], 0],
    [['nodes', 'list'], 0],
    [['backup', 'first.vpb'], 1],
  ] as const;
  for (const [first, exitCode] of firstCommands) {
    it(`vpn-panel ${first.slice(0, 2).join(' ')} on a fresh SQLite DATA_DIR, then serve on it`, async () => {
      const { env, dataDir } = await fresh('sqlite');
      const result = await runCli(first, env);
      assert.equal(result.code, exitCode, result.stderr);
      assert.ok(assertPrivate(dataDir).includes('vpn-panel.db'));

      const panel = await startPanel({ database: sqliteIn(dataDir) });
      try {
        assert.deepEqual(assertPrivate(dataDir), SQLITE_FILES, 'every file there while the panel runs (WAL)');
      } finally {
        await panel.stop();
      }
    });
  }

  it('serve on a fresh SQLite DATA_DIR; restore into another fresh one', async () => {
    const { env, dataDir } = await fresh('sqlite');
    const panel = await startPanel({ database: sqliteIn(dataDir) });
    try {
      assert.deepEqual(assertPrivate(dataDir), SQLITE_FILES);
    } finally {
      await panel.stop();
    }
    const file = join(dataDir, '..', 'moved.vpb');
    assert.equal((await runCli(['backup', file], env)).code, 0);
    assert.equal(modeOf(file), '0600');
    const target = await fresh('sqlite');
    const secret = readFileSync(join(dataDir, 'panel.secret'), 'utf8').trim();
    const restored = await runCli(['restore', file], { ...target.env, PANEL_SECRET: secret });
    assert.equal(restored.code, 0, restored.stderr);
    assert.ok(assertPrivate(target.dataDir).includes('vpn-panel.db'));
  });

  it('on PostgreSQL, DATA_DIR holds the panel secret, made private by the first CLI command', async () => {
    const { env, dataDir } = await fresh('postgres');
    assert.equal((await runCli(['keys', 'create', '--name', 'k', '--scopes', 'all'], env)).code, 0);
    assert.deepEqual(assertPrivate(dataDir), ['panel.secret']);
  });

  it('vpn-panel node makes its DATA_DIR private too', async () => {
    const { dataDir } = await fresh('sqlite');
    const port = await freePort();
    const agent: ChildProcess = spawn(process.execPath, [CLI, 'node'], {
      env: {
        ...process.env,
        AGENT_PORT: String(port),
        AGENT_HOST: '127.0.0.1',
        AGENT_TOKEN: 'files-test-token-0123456789',
        AGENT_TLS: 'off',
        NODE_DRIVER: 'dry-run',
        LOG_LEVEL: 'warn',
        DATA_DIR: dataDir,
        // No metrics listener: another test's process may hold the default port.
        METRICS_PORT: '0',
      },
      stdio: 'ignore',
    });
    try {
      const deadline = Date.now() + 30_000;
      while (
        !(await fetch(`http://127.0.0.1:${port}/v1/status`).then(
          () => true,
          () => false,
        ))
      ) {
        assert.ok(Date.now() < deadline && agent.exitCode === null, 'the agent did not answer');
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(modeOf(dataDir), '0700');
    } finally {
      agent.kill('SIGTERM');
      if (agent.exitCode === null) await once(agent, 'exit');
    }
  });

  it("an earlier version's 0644 files become 0600; a wider DATA_DIR is left as it is, with a warning", async () => {
    const { env, dataDir } = await fresh('sqlite');
    const store = openStore({ databaseUrl: undefined, dataDir });
    await store.close();
    assert.equal((await runCli(['keys', 'list'], env)).code, 0);
    chmodSync(dataDir, 0o755);
    for (const file of ['vpn-panel.db', 'panel.secret']) chmodSync(join(dataDir, file), 0o644);
    const result = await runCli(['keys', 'list'], env);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(modeOf(dataDir), '0755', 'not changed: it may be shared with other programs');
    assert.match(result.stderr, new RegExp(`DATA_DIR ${dataDir} is mode 0755: .*chmod 700 ${dataDir}`));
    for (const file of ['vpn-panel.db', 'panel.secret']) assert.equal(modeOf(join(dataDir, file)), '0600', file);
  });
});
