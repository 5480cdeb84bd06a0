/**
 * Issue 27, chaos: the panel's DATA_DIR (SQLite) on a small tmpfs of the test's own, filled up. Writes are
 * refused with the error body and no 500, reads still work, `PRAGMA integrity_check` says ok, and once space
 * is back writes work again without a restart. Needs root (mount).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import SQLite from 'better-sqlite3';
import {
  type Answered,
  forbiddenServerErrors,
  type PanelPair,
  record,
  startPanelPair,
} from '../support/chaos-store.ts';
import type { TestDatabase } from '../support/databases.ts';

const isRoot = process.getuid?.() === 0;
let mountPoint: string;
let mounted = false;
let pair: PanelPair | undefined;
let outcome: Outcome | undefined;

/** Fills the filesystem with files of 64 KiB until it refuses one. */
function fill(dir: string): void {
  const chunk = Buffer.alloc(64 * 1024, 1);
  for (let i = 0; ; i++) {
    try {
      writeFileSync(join(dir, `filler-${i}`), chunk);
    } catch {
      return;
    }
  }
}

before(async () => {
  if (!isRoot) return;
  mountPoint = mkdtempSync(join(tmpdir(), 'chaos-store-disk-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=16m,mode=0700', 'tmpfs', mountPoint]);
  mounted = true;
  const database: TestDatabase = {
    kind: 'sqlite',
    dataDir: join(mountPoint, 'data'),
    env: { DATA_DIR: join(mountPoint, 'data') },
    drop: async () => undefined,
  };
  // One panel: SQLite is for one.
  pair = await startPanelPair([database]);
  outcome = await runFull(pair);
});

after(async () => {
  await pair?.stop();
  if (mounted) execFileSync('umount', [mountPoint]);
  if (mountPoint !== undefined) rmSync(mountPoint, { recursive: true, force: true });
});

/** What the panel answered with its disk full, and after. */
interface Outcome {
  readonly log: Answered[];
  readonly refused: (number | undefined)[];
  readonly read: number | undefined;
  readonly integrity: unknown;
  readonly again: number | undefined;
}

/** Fills DATA_DIR's filesystem, tries writes and a read, checks the file, frees the space and writes again. */
async function runFull({ panels, key, serverId }: PanelPair): Promise<Outcome> {
  const [panel] = panels;
  assert.ok(panel !== undefined);
  const log: Answered[] = [];
  const create = (name: string) => record(log, panel.url, key, 'POST', '/devices', { server_id: serverId, name });
  assert.equal((await create('before'))?.status, 201);
  const fillers = join(mountPoint, 'fill');
  mkdirSync(fillers);
  fill(fillers);
  const refused: (number | undefined)[] = [];
  for (let i = 0; i < 20; i++) refused.push((await create(`full-${i}`))?.status);
  const read = (await record(log, panel.url, key, 'GET', '/devices?limit=200'))?.status;
  const file = new SQLite(join(mountPoint, 'data', 'vpn-panel.db'), { readonly: true });
  const integrity = file.pragma('integrity_check', { simple: true });
  file.close();

  rmSync(fillers, { recursive: true, force: true });
  const started = Date.now();
  let again = await create('after');
  while (again?.status !== 201 && Date.now() - started < 10_000) again = await create('after');
  process.stdout.write(
    `# full: creates answered ${[...new Set(refused)].join(', ')}; ` +
      `a write worked ${Date.now() - started} ms after space was back\n`,
  );
  return { log, refused, read, integrity, again: again?.status };
}

const needsRoot = isRoot ? false : 'needs root (mount)';

test('DATA_DIR full: reads work, the file passes integrity_check, writes work again once space is back', {
  skip: needsRoot,
}, () => {
  assert.ok(outcome !== undefined);
  assert.equal(outcome.read, 200, 'reads work while the disk is full');
  assert.equal(outcome.integrity, 'ok', 'PRAGMA integrity_check');
  assert.ok(
    outcome.refused.every((s) => s !== undefined && s !== 201),
    `writes refused: ${outcome.refused.join(', ')}`,
  );
  assert.equal(outcome.again, 201, 'writes work again without a restart');
});

test('DATA_DIR full: writes refused with 503 and the error body, no 500', {
  skip: needsRoot,
}, () => {
  assert.ok(outcome !== undefined);
  assert.deepEqual(forbiddenServerErrors(outcome.log), [], 'no 5xx but 503 with the error body');
  assert.ok(
    outcome.refused.every((s) => s === 503),
    `writes refused with 503: ${outcome.refused.join(', ')}`,
  );
});
