import assert from 'node:assert/strict';
import {
  chmodSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ExecRunner } from '../../src/agent/commands.ts';

/**
 * The node (root) writes each long-running child's stderr to CHILD_DIR/<cmd>-<last arg>.log. Someone
 * who could plant a link there must never get root to write through it: the runner removes whatever
 * is at the path (the link itself, never its target) and makes the file anew, owner-only.
 */
describe('child logs of the node never follow a planted link', () => {
  let work: string;
  let logs: string;
  /** A file outside the log directory that a planted link points at. */
  let target: string;
  const precious = 'root:the-hash-of-a-password:19000:0:99999:7:::\n';

  before(() => {
    work = mkdtempSync(join(tmpdir(), 'vpn-panel-child-logs-'));
    logs = join(work, 'data', 'children');
    target = join(work, 'shadow');
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  /** Starts `sh` writing `text` to stderr; its log is `sh-NAME.log`. */
  async function startChild(runner: ExecRunner, name: string, text: string) {
    const child = runner.start('sh', ['-c', `echo ${text} >&2; exit 3`, name]);
    const exit = await child.exited;
    return { exit, tail: child.stderrTail(), log: join(logs, `sh-${name}.log`) };
  }

  it('makes its directory 0700 and each log 0600', async () => {
    const { exit, tail, log } = await startChild(new ExecRunner(logs), 'plain', 'hello');
    assert.equal(exit.code, 3);
    assert.equal(tail, 'hello');
    assert.equal(statSync(logs).mode & 0o777, 0o700);
    assert.equal(statSync(log).mode & 0o777, 0o600);
  });

  for (const kind of ['symlink', 'dangling symlink', 'hard link'] as const) {
    it(`replaces a ${kind} planted at the log's path; the target stays untouched`, async () => {
      const name = kind.replace(/ /g, '-');
      const path = join(logs, `sh-${name}.log`);
      mkdirSync(logs, { recursive: true, mode: 0o700 });
      const pointedAt = kind === 'dangling symlink' ? join(work, 'created-by-root') : target;
      if (kind !== 'dangling symlink') writeFileSync(target, precious, { mode: 0o644 });
      if (kind === 'hard link') linkSync(target, path);
      else symlinkSync(pointedAt, path);

      const { exit, tail } = await startChild(new ExecRunner(logs), name, 'written-by-the-child');
      assert.equal(exit.code, 3, 'the child ran');
      assert.equal(tail, 'written-by-the-child', 'into its own new log');
      assert.ok(lstatSync(path).isFile() && lstatSync(path).nlink === 1, 'the log is a file of its own now');
      assert.equal(lstatSync(path).mode & 0o777, 0o600);
      if (kind === 'dangling symlink') {
        assert.throws(() => lstatSync(pointedAt), /ENOENT/, 'nothing made where the link pointed');
      } else {
        assert.equal(readFileSync(target, 'utf8'), precious, 'the target is untouched');
        assert.equal(statSync(target).mode & 0o777, 0o644);
      }
    });
  }

  it('refuses a log directory that is a link, and starts nothing', async () => {
    const elsewhere = join(work, 'elsewhere');
    mkdirSync(elsewhere);
    const linked = join(work, 'linked-children');
    symlinkSync(elsewhere, linked);
    const child = new ExecRunner(linked).start('sh', ['-c', 'exit 0', 'refused']);
    assert.equal(child.pid, -1, 'no child started');
    assert.deepEqual(await child.exited, { code: null, signal: null });
    assert.match(child.stderrTail(), /is not a directory \(a link\?\)/);
    assert.throws(() => lstatSync(join(elsewhere, 'sh-refused.log')), /ENOENT/);
  });

  it('takes the group and other bits off a log directory of its own', async () => {
    chmodSync(logs, 0o777);
    await startChild(new ExecRunner(logs), 'tightened', 'x');
    assert.equal(statSync(logs).mode & 0o777, 0o700);
  });
});
