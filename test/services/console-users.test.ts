/**
 * Console users and their sessions (services/console-users.ts, console-sessions.ts) on both databases:
 * what is stored, what a sign-in answers, when a session ends.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ADMIN_ACTOR } from '../../src/domain/activity.ts';
import { ManualClock } from '../../src/domain/clock.ts';
import { SESSION_IDLE_MS, SESSION_LIFETIME_MS } from '../../src/domain/console-users.ts';
import { AppError } from '../../src/domain/errors.ts';
import { hashSecretToken } from '../../src/domain/secret-tokens.ts';
import { type ChangePublisher, quietPublisher } from '../../src/services/changes.ts';
import { ConsoleSessionService } from '../../src/services/console-sessions.ts';
import { ConsoleUserService } from '../../src/services/console-users.ts';
import { type HashPriority, PasswordHasher } from '../../src/services/passwords.ts';
import { DATABASE_KINDS } from '../support/databases.ts';
import { openTestStore, type TestStore } from '../support/stores.ts';

const PASSWORD = 'correct horse battery';
const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;

/** Keeps the stored hash each verify was given (undefined: no such user) and its queue, as a sign-in passes them. */
class RecordingHasher extends PasswordHasher {
  readonly verified: (string | undefined)[] = [];
  readonly priorities: (HashPriority | undefined)[] = [];
  override verify(password: string, stored: string | undefined, priority?: HashPriority): Promise<boolean> {
    this.verified.push(stored);
    this.priorities.push(priority);
    return super.verify(password, stored, priority);
  }
}

/**
 * Holds each sign-in between its password check and its session: the window in which a new password or a
 * removal may land. `reached` resolves once a check is done; `release()` lets it go on.
 */
class HeldHasher extends PasswordHasher {
  readonly #reached = Promise.withResolvers<void>();
  readonly #released = Promise.withResolvers<void>();
  readonly reached = this.#reached.promise;

  release(): void {
    this.#released.resolve();
  }

  override async verify(password: string, stored: string | undefined): Promise<boolean> {
    const matches = await super.verify(password, stored);
    this.#reached.resolve();
    await this.#released.promise;
    return matches;
  }
}

async function refusal(work: Promise<unknown>): Promise<AppError> {
  const error = await work.then(
    () => assert.fail('not refused'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof AppError, String(error));
  return error;
}

for (const kind of DATABASE_KINDS) {
  describe(`console users and sessions (${kind})`, () => {
    let t: TestStore;
    const clock = new ManualClock(Date.parse('2026-05-01T08:00:00Z'));
    const hasher = new RecordingHasher();
    let users: ConsoleUserService;
    let sessions: ConsoleSessionService;
    let changes: ChangePublisher;
    let admitted = 0;
    const admit = () => {
      admitted++;
    };
    const sessionCount = async () =>
      Number(
        (
          await t.store.db
            .selectFrom('console_sessions')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const actions = async (userId: number) =>
      (
        await t.store.db
          .selectFrom('activity')
          .select(['action', 'actor'])
          .where('resource', '=', 'console_user')
          .where('resource_id', '=', String(userId))
          .orderBy('id')
          .execute()
      ).map((r) => `${r.action} ${r.actor}`);

    before(async () => {
      t = await openTestStore(kind);
      changes = quietPublisher(t.store.db, clock);
      users = new ConsoleUserService(t.store.db, clock, hasher, changes);
      sessions = new ConsoleSessionService(t.store.db, clock, hasher, changes);
    });
    after(() => t.close());

    it('adds a user and keeps only a scrypt hash of the password', async () => {
      const alice = await users.add({ name: 'alice', role: 'admin', password: PASSWORD }, ADMIN_ACTOR);
      assert.equal(alice.role, 'admin');
      assert.equal(alice.lastSignInAt, null);
      const row = await t.store.db
        .selectFrom('console_users')
        .selectAll()
        .where('id', '=', alice.id)
        .executeTakeFirstOrThrow();
      assert.match(row.password_hash, /^scrypt\$N=32768,r=8,p=3\$/);
      assert.doesNotMatch(JSON.stringify(row), /horse/);
      assert.deepEqual(Object.keys((await users.list())[0] ?? {}).sort(), [
        'createdAt',
        'id',
        'lastSignInAt',
        'name',
        'role',
      ]);
      assert.deepEqual(await actions(alice.id), ['console_user.created admin']);
    });

    it('refuses a taken name (any case), a bad role, a short, blank or common password, naming the field', async () => {
      await users.add({ name: 'bob', role: 'viewer', password: PASSWORD }, ADMIN_ACTOR);
      const taken = await refusal(users.add({ name: 'BOB', password: PASSWORD }, ADMIN_ACTOR));
      assert.equal(taken.code, 'name_taken');
      assert.deepEqual(taken.fields, { name: 'taken' });
      assert.deepEqual(
        (await refusal(users.add({ name: 'carol', role: 'root', password: PASSWORD }, ADMIN_ACTOR))).fields,
        {
          role: 'admin or viewer',
        },
      );
      const short = await refusal(users.add({ name: 'carol', password: 'elevenchars' }, ADMIN_ACTOR));
      assert.equal(short.code, 'validation_failed');
      assert.ok(short.fields.password);
      const weak: [string, string][] = [
        [' '.repeat(12), 'not only spaces'],
        ['Password1234', 'too common'],
      ];
      for (const [password, problem] of weak) {
        assert.deepEqual((await refusal(users.add({ name: 'carol', password }, ADMIN_ACTOR))).fields, {
          password: problem,
        });
        assert.deepEqual((await refusal(users.setPassword('bob', password, ADMIN_ACTOR))).fields, {
          password: problem,
        });
      }
      assert.deepEqual(
        (await users.list()).map((u) => `${u.name} ${u.role}`),
        ['alice admin', 'bob viewer'],
      );
    });

    it('a database refuses two names that differ only in case, whoever writes them', async () => {
      const row = { role: 'viewer' as const, password_hash: 'x', created_at: 'T', updated_at: 'T' };
      await assert.rejects(
        t.store.db
          .insertInto('console_users')
          .values({ ...row, name: 'ALICE' })
          .execute(),
      );
    });

    it('signs in with the right password, whatever the case of the name, keeping only the token hash', async () => {
      const signedIn = await sessions.signIn('Alice', PASSWORD);
      assert.deepEqual(signedIn.user, { name: 'alice', role: 'admin' });
      const rows = await t.store.db.selectFrom('console_sessions').selectAll().execute();
      assert.equal(rows.length, 1);
      assert.equal(rows[0]?.token_hash, hashSecretToken(signedIn.token));
      assert.doesNotMatch(JSON.stringify(rows), new RegExp(signedIn.token));
      assert.equal((await users.list())[0]?.lastSignInAt, new Date(clock.nowMs()).toISOString());
      const principal = await sessions.authenticate(signedIn.token, admit, undefined);
      assert.equal(principal.actor, 'via console user alice');
      assert.equal(principal.role, 'admin');
    });

    it('knows the browser of an earlier sign-in as the user, checks its password first and keeps its id', async () => {
      const first = await sessions.signIn('alice', PASSWORD);
      const deviceId = await sessions.knownDevice('ALICE', first.device);
      assert.ok(deviceId !== undefined, 'known for the name, whatever its case');
      assert.equal(await sessions.knownDevice('bob', first.device), undefined, 'for that name only');
      assert.equal(
        await sessions.knownDevice('alice', `${deviceId}.${'A'.repeat(43)}`),
        undefined,
        'made by the panel',
      );
      hasher.priorities.length = 0;
      const again = await sessions.signIn('alice', PASSWORD, deviceId);
      await sessions.signIn('alice', PASSWORD);
      assert.deepEqual(hasher.priorities, ['first', 'queued']);
      assert.equal(again.device, first.device, 'the same browser, the same token');
    });

    it('answers a wrong password and an unknown user alike, after hashing for both', async () => {
      hasher.verified.length = 0;
      for (const [name, password] of [
        ['alice', 'wrong password!'],
        ['nobody', PASSWORD],
        ['', ''],
      ]) {
        const error = await refusal(sessions.signIn(name ?? '', password ?? ''));
        assert.equal(error.code, 'unauthorized');
        assert.equal(error.message, 'wrong user name or password');
        assert.deepEqual(error.fields, {});
      }
      // One scrypt each: the known user's hash, and for the unknown ones the hash no password matches.
      assert.equal(hasher.verified.length, 3);
      assert.match(hasher.verified[0] ?? '', /^scrypt\$/);
      assert.deepEqual(hasher.verified.slice(1), [undefined, undefined]);
    });

    it('ends a session 12 h after its last use, writing that use at most once a minute', async () => {
      const { token } = await sessions.signIn('bob', PASSWORD);
      const lastUsed = async () =>
        (
          await t.store.db
            .selectFrom('console_sessions')
            .select('last_used_at')
            .where('token_hash', '=', hashSecretToken(token))
            .executeTakeFirstOrThrow()
        ).last_used_at;
      const signedInAt = await lastUsed();
      clock.advance(30_000);
      await sessions.authenticate(token, admit, undefined);
      assert.equal(await lastUsed(), signedInAt, 'not written again within a minute');
      clock.advance(MINUTE_MS);
      await sessions.authenticate(token, admit, undefined);
      assert.equal(await lastUsed(), new Date(clock.nowMs()).toISOString());
      clock.advance(SESSION_IDLE_MS - 1);
      assert.equal((await sessions.authenticate(token, admit, undefined)).name, 'bob', 'still live 1 ms before');
      clock.advance(SESSION_IDLE_MS);
      const ended = await refusal(sessions.authenticate(token, admit, undefined));
      assert.equal(ended.code, 'unauthorized');
      assert.equal(
        await t.store.db
          .selectFrom('console_sessions')
          .select('id')
          .where('token_hash', '=', hashSecretToken(token))
          .executeTakeFirst(),
        undefined,
        'the ended session is deleted',
      );
    });

    it('ends a session 7 days after sign-in however busy it is', async () => {
      const { token } = await sessions.signIn('bob', PASSWORD);
      for (let used = 0; used + 11 * HOUR_MS < SESSION_LIFETIME_MS; used += 11 * HOUR_MS) {
        await sessions.authenticate(token, admit, undefined);
        clock.advance(11 * HOUR_MS);
      }
      clock.advance(SESSION_LIFETIME_MS % (11 * HOUR_MS));
      assert.equal((await refusal(sessions.authenticate(token, admit, undefined))).code, 'unauthorized');
    });

    it('deletes ended sessions of anyone at the next sign-in', async () => {
      await sessions.signIn('bob', PASSWORD);
      await sessions.signIn('alice', PASSWORD);
      clock.advance(SESSION_IDLE_MS);
      assert.equal(await sessionCount(), 2);
      await sessions.signIn('bob', PASSWORD);
      assert.equal(await sessionCount(), 1);
    });

    it('spends the budget for guesses on a token not found valid before, never on one that was', async () => {
      const { token } = await sessions.signIn('alice', PASSWORD);
      const other = new ConsoleSessionService(t.store.db, clock, hasher, changes);
      admitted = 0;
      await other.authenticate(token, admit, undefined);
      assert.equal(admitted, 1, 'a panel that had not seen it counts it once');
      await other.authenticate(token, admit, undefined);
      assert.equal(admitted, 1);
      for (const guess of [undefined, 'malformed', 'A'.repeat(43)]) {
        await refusal(other.authenticate(guess, admit, undefined));
      }
      assert.equal(admitted, 4);
      const refuse = () => {
        throw new AppError('rate_limited', 'slow down');
      };
      assert.equal((await refusal(other.authenticate('A'.repeat(43), refuse, undefined))).code, 'rate_limited');
      assert.equal(
        (await other.authenticate(token, refuse, undefined)).name,
        'alice',
        'a known session is not refused',
      );
    });

    it('a new password ends every session of the user at once, and only theirs', async () => {
      const a1 = await sessions.signIn('alice', PASSWORD);
      const a2 = await sessions.signIn('alice', PASSWORD);
      const b = await sessions.signIn('bob', PASSWORD);
      await users.setPassword('ALICE', 'a new password, long', ADMIN_ACTOR);
      for (const { token } of [a1, a2]) {
        assert.equal((await refusal(sessions.authenticate(token, admit, undefined))).code, 'unauthorized');
      }
      assert.equal((await sessions.authenticate(b.token, admit, undefined)).name, 'bob');
      assert.equal((await refusal(sessions.signIn('alice', PASSWORD))).code, 'unauthorized');
      await sessions.signIn('alice', 'a new password, long');
      assert.equal((await refusal(users.setPassword('alice', 'short', ADMIN_ACTOR))).code, 'validation_failed');
      assert.equal((await refusal(users.setPassword('nobody', PASSWORD, ADMIN_ACTOR))).code, 'not_found');
    });

    it('removing a user ends their sessions and records it', async () => {
      const b = await sessions.signIn('bob', PASSWORD);
      const bob = (await users.list()).find((u) => u.name === 'bob');
      assert.ok(bob);
      await users.remove('bob', ADMIN_ACTOR);
      assert.equal((await refusal(sessions.authenticate(b.token, admit, undefined))).code, 'unauthorized');
      assert.equal((await refusal(sessions.signIn('bob', PASSWORD))).code, 'unauthorized');
      assert.equal((await refusal(users.remove('bob', ADMIN_ACTOR))).code, 'not_found');
      const rows = await t.store.db.selectFrom('console_sessions').select('user_id').execute();
      assert.ok(rows.every((r) => r.user_id !== bob.id));
      const log = await actions(bob.id);
      assert.equal(log[0], 'console_user.created admin');
      assert.ok(log.includes('console_user.signed_in via console user bob'));
      assert.equal(log.at(-1), 'console_user.deleted admin');
    });

    it('a new password or a removal while a sign-in checks the old password leaves no session (401)', async () => {
      const racer = await users.add({ name: 'racer', role: 'viewer', password: PASSWORD }, ADMIN_ACTOR);
      const races = [
        { password: PASSWORD, change: () => users.setPassword('racer', 'a new password, long', ADMIN_ACTOR) },
        { password: 'a new password, long', change: () => users.remove('racer', ADMIN_ACTOR) },
      ];
      for (const { password, change } of races) {
        const held = new HeldHasher();
        const signIn = new ConsoleSessionService(t.store.db, clock, held, changes).signIn('racer', password);
        await held.reached;
        await change();
        held.release();
        const error = await refusal(signIn);
        assert.equal(error.code, 'unauthorized', error.message);
        assert.equal(error.message, 'wrong user name or password');
        const left = await t.store.db
          .selectFrom('console_sessions')
          .select('id')
          .where('user_id', '=', racer.id)
          .execute();
        assert.deepEqual(left, [], 'no session made with the old password, nor for a removed user');
      }
      assert.ok(!(await actions(racer.id)).includes('console_user.signed_in via console user racer'));
    });

    it('signing out deletes the session and records it once', async () => {
      const { token } = await sessions.signIn('alice', 'a new password, long');
      const principal = await sessions.authenticate(token, admit, undefined);
      await sessions.signOut(principal);
      await sessions.signOut(principal);
      assert.equal((await refusal(sessions.authenticate(token, admit, undefined))).code, 'unauthorized');
      const log = await actions(principal.userId);
      assert.equal(log.filter((a) => a === 'console_user.signed_out via console user alice').length, 1);
      assert.ok(log.includes('console_user.password_changed admin'));
    });

    it('changes a role by name as `users role` does, and keeps the last admin (last_admin)', async () => {
      // alice is the only admin left here.
      const carol = await users.add({ name: 'carol', role: 'viewer', password: PASSWORD }, ADMIN_ACTOR);
      assert.equal((await refusal(users.setRole('alice', 'viewer', ADMIN_ACTOR))).code, 'last_admin');
      assert.equal((await refusal(users.remove('ALICE', ADMIN_ACTOR))).code, 'last_admin');
      assert.equal((await refusal(users.setRole('carol', 'owner', ADMIN_ACTOR))).code, 'validation_failed');
      assert.equal((await refusal(users.setRole('nobody', 'admin', ADMIN_ACTOR))).code, 'not_found');
      assert.equal((await users.setRole('carol', 'admin', ADMIN_ACTOR)).role, 'admin');
      assert.equal((await users.setRole(carol.id, 'admin', ADMIN_ACTOR)).role, 'admin', 'by id; no change, no entry');
      assert.equal((await users.setRole('alice', 'viewer', ADMIN_ACTOR)).role, 'viewer');
      assert.equal((await refusal(users.remove(carol.id, ADMIN_ACTOR))).code, 'last_admin');
      assert.deepEqual(
        (await actions(carol.id)).filter((a) => a.startsWith('console_user.role_changed')),
        ['console_user.role_changed admin'],
      );
    });
  });
}
