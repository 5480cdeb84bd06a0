import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { labNodeEnv } from '../support/lab-panel.ts';
import { NetLab, requireRoot } from '../support/netns.ts';
import { callApi, type PanelProcess, ROOT, runCli, startPanel } from '../support/panel.ts';

/** The panel's JSON log line whose message starts with `start`, waiting up to 5 s for it. */
async function line(panel: PanelProcess, start: string): Promise<Record<string, unknown>> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const found = panel
      .output()
      .split('\n')
      .filter((text) => text.startsWith('{'))
      .map((text): Record<string, unknown> => JSON.parse(text))
      .find((entry) => String(entry.msg).startsWith(start));
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`no '${start}' line; the panel printed:\n${panel.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('the lines a panel prints at start', () => {
  let db: TestDatabase;
  let panel: PanelProcess | undefined;
  before(async () => {
    db = await createTestDatabase('sqlite');
  });
  after(async () => {
    await panel?.stop();
    await db.drop();
  });

  it('say where it listens, the local node driver, and a key command that works as printed', async () => {
    panel = await startPanel({ database: db, env: { LOG_LEVEL: 'info', NODE_DRIVER: 'dry-run' } });
    const ready = await line(panel, 'panel ready: ');
    assert.equal(ready.listen, panel.url);
    assert.equal(ready.driver, 'dry-run');
    assert.equal(ready.msg, `panel ready: listening on ${panel.url} (API under /api/v1), local node driver dry-run`);

    const { command } = await line(panel, 'make an API key with: ');
    // Run from the checkout's root (as the quick start does), with the panel's DATA_DIR.
    assert.equal(command, `DATA_DIR=${db.dataDir} scripts/vpn-panel keys create --name NAME --scopes all`);
    assert.ok(existsSync(join(ROOT, 'scripts', 'vpn-panel')));
    const [, ...args] = String(command).replace(`DATA_DIR=${db.dataDir} `, '').replace('NAME', 'first').split(' ');
    const made = await runCli(args, { DATA_DIR: db.dataDir });
    assert.equal(made.code, 0, made.stderr);
    const key = made.stdout.trim().split('\n').at(-1);
    assert.equal((await callApi(panel.url, key, 'GET', '/servers')).status, 200);
  });

  it('say when there is no local node', async () => {
    const other = await createTestDatabase('sqlite');
    const remoteOnly = await startPanel({ database: other, env: { LOG_LEVEL: 'info', LOCAL_NODE: 'off' } });
    try {
      assert.equal((await line(remoteOnly, 'panel ready: ')).driver, 'none (LOCAL_NODE=off)');
    } finally {
      await remoteOnly.stop();
      await other.drop();
    }
  });
});

const skip = requireRoot();
describe('the start-up line of a panel whose local node runs WireGuard (root)', { skip }, () => {
  let db: TestDatabase;
  let lab: NetLab;
  let panel: PanelProcess | undefined;
  before(async () => {
    db = await createTestDatabase('sqlite');
    lab = await NetLab.create();
  });
  after(async () => {
    await panel?.stop();
    const problems = await lab.cleanup();
    await db.drop();
    assert.deepEqual(problems, []);
  });

  it('names the wireguard driver', async () => {
    panel = await startPanel({ database: db, env: { LOG_LEVEL: 'info', ...labNodeEnv(lab) } });
    assert.equal((await line(panel, 'panel ready: ')).driver, 'wireguard');
  });
});
