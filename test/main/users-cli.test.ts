/**
 * `vpn-panel users add|list|passwd|remove` as a person runs them, beside a running panel: the password
 * comes from stdin (never argv), and what the CLI changes a running panel honours at the next request.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';
import { type PanelProcess, ROOT, startPanel } from '../support/panel.ts';

const PASSWORD = 'correct horse battery';

interface ListedUser {
  id: number;
  name: string;
  role: string;
  createdAt: string;
  lastSignInAt: string | null;
}

for (const kind of DATABASE_KINDS) {
  describe(`vpn-panel users (${kind})`, () => {
    let db: TestDatabase;
    let panel: PanelProcess;

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await startPanel({ database: db });
    });
    after(async () => {
      await panel.stop();
      await db.drop();
    });

    async function signIn(user: string, password: string): Promise<Response> {
      return fetch(`${panel.url}/console/session`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ user, password }),
      });
    }

    async function cookie(user: string, password: string): Promise<string> {
      const response = await signIn(user, password);
      assert.equal(response.status, 204);
      return (response.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    }

    async function listed(): Promise<ListedUser[]> {
      const result = await panel.cli(['users', 'list', '--json']);
      assert.equal(result.code, 0, result.stderr);
      return JSON.parse(result.stdout);
    }

    const servers = async (sessionCookie: string) =>
      (await fetch(`${panel.url}/api/v1/servers`, { headers: { cookie: sessionCookie } })).status;

    it('users add reads the password from stdin (one line) and makes an admin by default', async () => {
      const added = await panel.cli(['users', 'add', '--name', 'alice'], `${PASSWORD}\nnot read\n`);
      assert.equal(added.code, 0, added.stderr);
      assert.match(added.stdout, /^added console user \d+ 'alice' \(admin\)\n$/);
      const viewer = await panel.cli(['users', 'add', '--name', 'victor', '--role', 'viewer'], `${PASSWORD}\r\n`);
      assert.equal(viewer.code, 0, viewer.stderr);
      assert.match(viewer.stdout, /'victor' \(viewer\)/);
      assert.equal((await signIn('victor', PASSWORD)).status, 204, 'a CRLF line ending is not part of the password');
      assert.equal((await signIn('alice', `${PASSWORD}\nnot read`)).status, 401);
    });

    it('refuses a password given as an argument (exit 2) and adds nothing', async () => {
      for (const args of [
        ['--name', 'bob', '--password', PASSWORD],
        ['--name', 'bob', `--password=${PASSWORD}`],
        ['--name', 'bob', PASSWORD],
      ]) {
        const result = await panel.cli(['users', 'add', ...args], `${PASSWORD}\n`);
        assert.equal(result.code, 2, args.join(' '));
        assert.match(result.stderr, /standard input|takes no argument/);
        assert.match(result.stderr, /usage: vpn-panel/);
      }
      assert.deepEqual(
        (await listed()).map((u) => u.name),
        ['alice', 'victor'],
      );
    });

    it('refuses a short or missing password, a taken name in any case, and an unknown role (exit 1 or 2)', async () => {
      const cases: [string[], string, number, RegExp][] = [
        [['--name', 'bob'], 'elevenchars\n', 1, /a console password is 12 to 1024 characters \(this one has 11\)/],
        [['--name', 'bob'], '', 2, /standard input \(one line\), and it was empty/],
        [['--name', 'ALICE'], `${PASSWORD}\n`, 1, /a console user named ALICE exists already/],
        [['--name', 'bob', '--role', 'root'], `${PASSWORD}\n`, 1, /role is admin or viewer/],
        [['--name', 'bo b'], `${PASSWORD}\n`, 1, /a console user name is 1 to 64/],
        [[], `${PASSWORD}\n`, 2, /users add needs --name/],
      ];
      for (const [args, input, code, message] of cases) {
        const result = await panel.cli(['users', 'add', ...args], input);
        assert.equal(result.code, code, `${args.join(' ')}: ${result.stderr}`);
        assert.match(result.stderr, message);
        assert.ok(
          !result.stderr.includes(PASSWORD) && !result.stdout.includes(PASSWORD),
          'the password is never printed',
        );
      }
      assert.equal((await listed()).length, 2);
    });

    it('users list shows name, role, created and last sign-in, never a hash', async () => {
      const before = await listed();
      assert.deepEqual(
        before.map((u) => [u.name, u.role, u.lastSignInAt]),
        [
          ['alice', 'admin', null],
          ['victor', 'viewer', before[1]?.lastSignInAt ?? 'signed in above'],
        ],
      );
      await cookie('Alice', PASSWORD);
      const table = await panel.cli(['users', 'list']);
      assert.equal(table.code, 0, table.stderr);
      const [head, ...rows] = table.stdout.trimEnd().split('\n');
      assert.match(head ?? '', /^ID\s+NAME\s+ROLE\s+CREATED\s+LAST SIGN-IN$/);
      assert.match(rows[0] ?? '', /^1\s+alice\s+admin\s+\d{4}-\d\d-\d\dT[\d:.]+Z\s+\d{4}-\d\d-\d\dT[\d:.]+Z$/);
      assert.doesNotMatch(table.stdout + JSON.stringify(await listed()), /scrypt|password/i);
    });

    it('users passwd ends the running panel’s sessions of the user at once; the new password works', async () => {
      const session = await cookie('alice', PASSWORD);
      const other = await cookie('victor', PASSWORD);
      assert.equal(await servers(session), 200);
      const changed = await panel.cli(['users', 'passwd', 'alice'], 'a brand new password\n');
      assert.equal(changed.code, 0, changed.stderr);
      assert.match(changed.stdout, /changed the password of console user 1 'alice'; their sessions have ended/);
      assert.equal(await servers(session), 401);
      assert.equal(await servers(other), 200, "another user's session goes on");
      assert.equal((await signIn('alice', PASSWORD)).status, 401);
      assert.equal(await servers(await cookie('alice', 'a brand new password')), 200);
      assert.equal((await panel.cli(['users', 'passwd', 'alice'], 'short\n')).code, 1);
      assert.equal((await panel.cli(['users', 'passwd', 'nobody'], `${PASSWORD}\n`)).code, 1);
      assert.equal((await panel.cli(['users', 'passwd'], `${PASSWORD}\n`)).code, 2);
      assert.equal((await panel.cli(['users', 'passwd', 'alice', '--password', PASSWORD])).code, 2);
    });

    it('users remove ends the user’s sessions at once and records who did what', async () => {
      const session = await cookie('victor', PASSWORD);
      assert.equal(await servers(session), 200);
      const removed = await panel.cli(['users', 'remove', 'VICTOR']);
      assert.equal(removed.code, 0, removed.stderr);
      assert.match(removed.stdout, /^removed console user 2 'victor'; their sessions have ended\n$/);
      assert.equal(await servers(session), 401);
      assert.equal((await signIn('victor', PASSWORD)).status, 401);
      const again = await panel.cli(['users', 'remove', 'victor']);
      assert.equal(again.code, 1);
      assert.match(again.stderr, /no console user named victor/);
      assert.deepEqual(
        (await listed()).map((u) => u.name),
        ['alice'],
      );
      const log = await panel.cli(['activity', '--resource', 'console_user', '--json', '--limit', '200']);
      assert.equal(log.code, 0, log.stderr);
      const actions = (JSON.parse(log.stdout).data as { actor: string; action: string; resource_id: string }[]).map(
        (e) => `${e.resource_id} ${e.action} ${e.actor}`,
      );
      for (const line of [
        '1 console_user.created admin',
        '2 console_user.created admin',
        '1 console_user.signed_in via console user alice',
        '1 console_user.password_changed admin',
        '2 console_user.deleted admin',
      ])
        assert.ok(actions.includes(line), `${line} in ${actions.join('\n')}`);
      const byAlice = await panel.cli(['activity', '--actor', 'via console user alice', '--json']);
      assert.ok(JSON.parse(byAlice.stdout).data.length > 0);
    });
  });
}

describe('vpn-panel users add at a terminal', () => {
  let db: TestDatabase;

  before(async () => {
    db = await createTestDatabase('sqlite');
  });
  after(() => db.drop());

  it('asks twice and never shows what is typed', async () => {
    // script(1) gives the command a pseudo-terminal; each answer is typed once its prompt is shown.
    const cli = `${process.execPath} ${join(ROOT, 'bin', 'vpn-panel.js')} users add --name tty`;
    const child = spawn('script', ['-qec', cli, '/dev/null'], {
      env: { ...process.env, ...db.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const shown = async (text: string) => {
      const deadline = Date.now() + 30_000;
      while (!output.includes(text)) {
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`no '${text}' in:\n${output}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    await shown('password for tty (at least 12 characters): ');
    child.stdin.write(`${PASSWORD}\r`);
    await shown('the same again: ');
    child.stdin.write(`${PASSWORD}\r`);
    await shown("added console user 1 'tty' (admin)");
    child.stdin.end();
    assert.ok(!output.includes(PASSWORD), `the password was shown:\n${output}`);
  });
});
