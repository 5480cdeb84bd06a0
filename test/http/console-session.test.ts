/**
 * The console's session (routes/console-session.ts) and the session cookie on /api/v1 (the auth hook),
 * in process on both databases: sign-in, its limits, the cookie's flags, what an admin and a viewer
 * reach, the CSRF check on writes, idle timeout, and sessions ended by a removal or a new password.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { ADMIN_ACTOR } from '../../src/domain/activity.ts';
import { ManualClock } from '../../src/domain/clock.ts';
import { SESSION_IDLE_MS } from '../../src/domain/console-users.ts';
import { addressBucket } from '../../src/domain/rate-limit.ts';
import { quietPublisher } from '../../src/services/changes.ts';
import { ConsoleUserService } from '../../src/services/console-users.ts';
import { PasswordHasher } from '../../src/services/passwords.ts';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';
import { parseScrape, sampleValue } from '../support/metrics.ts';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PASSWORD = 'correct horse battery';
const WRONG = { error: { code: 'unauthorized', message: 'wrong user name or password', fields: {} } };
const WRITE = { 'x-console-request': '1' };

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/**
 * A client address of its own (a random /64, which per-address limits count as one client), so that the
 * budgets of one test never meet another's, nor those of an earlier run kept in Redis.
 */
function someAddress(): string {
  const [a, b] = [randomBytes(2).toString('hex'), randomBytes(2).toString('hex')];
  return `2001:db8:${a}:${b}::1`;
}

async function call(
  t: AppUnderTest,
  method: Method,
  url: string,
  options: { cookie?: string; headers?: Record<string, string>; body?: unknown; address?: string } = {},
): Promise<LightMyRequestResponse> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.cookie !== undefined) headers.cookie = options.cookie;
  return t.app.inject({
    method,
    url,
    headers,
    ...(options.body === undefined ? {} : { payload: JSON.stringify(options.body) }),
    ...(options.body === undefined ? {} : { headers: { ...headers, 'content-type': 'application/json' } }),
    remoteAddress: options.address ?? '127.0.0.1',
  });
}

/** A sign-in from an address of its own unless `options.address` names one. */
function signIn(
  t: AppUnderTest,
  user: string,
  password: string,
  options: { headers?: Record<string, string>; address?: string } = {},
) {
  return call(t, 'POST', '/console/session', { body: { user, password }, address: someAddress(), ...options });
}

/** The `Set-Cookie` field of an answer that sets the cookie `name` (or `__Host-name`, over https). */
function setCookie(response: LightMyRequestResponse, name: string): string {
  const fields = [response.headers['set-cookie'] ?? []].flat();
  const field = fields.find((f) => f.startsWith(`${name}=`) || f.startsWith(`__Host-${name}=`));
  assert.ok(field !== undefined, `no ${name} cookie in ${JSON.stringify(fields)}`);
  return field;
}

/** The `vpn_panel_session=<token>` (`__Host-…` over https) a sign-in set, as the browser sends it back. */
function cookieOf(response: LightMyRequestResponse): string {
  assert.equal(response.statusCode, 204, response.body);
  const cookie = setCookie(response, 'vpn_panel_session').split(';')[0] ?? '';
  assert.match(cookie, /^(__Host-)?vpn_panel_session=[A-Za-z0-9_-]{43}$/);
  return cookie;
}

/** `vpn_panel_device=<id>.<proof>` of a sign-in's Set-Cookie: the browser's known-device token. */
function deviceOf(response: LightMyRequestResponse): string {
  assert.equal(response.statusCode, 204, response.body);
  const cookie = setCookie(response, 'vpn_panel_device').split(';')[0] ?? '';
  assert.match(cookie, /^vpn_panel_device=[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}$/);
  return cookie;
}

/** The digest of a user name that the limiters and the log show instead of the name. */
function nameDigest(name: string): string {
  return createHash('sha256').update(name.toLowerCase()).digest('hex').slice(0, 16);
}

/** The panel's `console sign-in refused` log lines. */
function refusalLines(t: AppUnderTest): Record<string, unknown>[] {
  return t
    .output()
    .split('\n')
    .filter((line) => line.includes('console sign-in refused'))
    .map((line) => JSON.parse(line));
}

async function session(t: AppUnderTest, user: string, password = PASSWORD): Promise<string> {
  return cookieOf(await signIn(t, user, password));
}

function errorOf(response: LightMyRequestResponse): { code: string; message: string; fields: Record<string, string> } {
  return response.json().error;
}

async function activity(t: AppUnderTest, action: string) {
  return t.store.db
    .selectFrom('activity')
    .select(['actor', 'summary', 'request_id'])
    .where('action', '=', action)
    .execute();
}

for (const kind of DATABASE_KINDS) {
  describe(`console sign-in and sessions (${kind})`, () => {
    let db: TestDatabase;
    let t: AppUnderTest;

    before(async () => {
      db = await createTestDatabase(kind);
      t = await buildTestApp(db, { PANEL_TIMEZONE: 'Asia/Tokyo' });
      await t.createUser('alice', 'admin', PASSWORD);
      await t.createUser('victor', 'viewer', PASSWORD);
    });
    after(async () => {
      await t.close();
      await db.drop();
    });

    it(
      'signs in with the right password: 204 and an HttpOnly, ' + 'SameSite=Strict cookie without Secure over http',
      async () => {
        const response = await signIn(t, 'alice', PASSWORD);
        assert.equal(response.statusCode, 204);
        assert.equal(response.body, '');
        assert.match(
          setCookie(response, 'vpn_panel_session'),
          /^vpn_panel_session=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\/; Max-Age=604800$/,
        );
        assert.equal(
          setCookie(response, 'vpn_panel_device').replace(/^vpn_panel_device=[\w-]{22}\.[\w-]{43};/, '<token>;'),
          '<token>; HttpOnly; SameSite=Strict; Path=/console/session; Max-Age=31536000',
        );
        assert.equal(response.headers['cache-control'], 'no-store');
        const signedIn = await activity(t, 'console_user.signed_in');
        assert.deepEqual(signedIn.at(-1)?.actor, 'via console user alice');
      },
    );

    it(
      'answers a wrong password, an unknown user and a wrong-case ' + 'password with the same 401, and sets no cookie',
      async () => {
        for (const [user, password] of [
          ['alice', 'wrong password!'],
          ['mallory', PASSWORD],
          ['alice', PASSWORD.toUpperCase()],
        ] as const) {
          const response = await signIn(t, user, password, { address: someAddress() });
          assert.equal(response.statusCode, 401, `${user}`);
          assert.deepEqual(response.json(), WRONG);
          assert.equal(response.headers['set-cookie'], undefined);
        }
      },
    );

    it('takes the user name in any case, as a phone capitalises it', async () => {
      const cookie = await session(t, 'Alice');
      const me = await call(t, 'GET', '/console/session', { cookie });
      assert.equal(me.statusCode, 200);
      assert.deepEqual(me.json(), { user: { name: 'alice', role: 'admin' }, time_zone: 'Asia/Tokyo' });
    });

    it('GET /console/session names the user, role and panel time zone, or answers 401 unauthorized', async () => {
      const cookie = await session(t, 'victor');
      assert.deepEqual((await call(t, 'GET', '/console/session', { cookie })).json(), {
        user: { name: 'victor', role: 'viewer' },
        time_zone: 'Asia/Tokyo',
      });
      const address = someAddress();
      for (const bad of [
        undefined,
        'vpn_panel_session=',
        'vpn_panel_session=nope',
        `vpn_panel_session=${'A'.repeat(43)}`,
      ]) {
        const response = await call(t, 'GET', '/console/session', { cookie: bad, address });
        assert.equal(response.statusCode, 401, String(bad));
        assert.equal(errorOf(response).code, 'unauthorized');
      }
    });

    it('refuses a sign-in body with unknown or missing fields (422), before any password is hashed', async () => {
      const extra = await call(t, 'POST', '/console/session', {
        body: { user: 'alice', password: PASSWORD, remember: true },
      });
      assert.equal(extra.statusCode, 422);
      assert.deepEqual(errorOf(extra).fields, { remember: 'unknown field' });
      const missing = await call(t, 'POST', '/console/session', { body: { user: 'alice' } });
      assert.equal(missing.statusCode, 422);
      assert.deepEqual(errorOf(missing).fields, { password: 'required' });
    });

    it(
      'DELETE /console/session ends the session (row deleted) and ' + 'clears the cookie; 204 again without one',
      async () => {
        const cookie = await session(t, 'alice');
        const out = await call(t, 'DELETE', '/console/session', { cookie });
        assert.equal(out.statusCode, 204);
        assert.equal(out.headers['set-cookie'], 'vpn_panel_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0');
        const token = cookie.split('=')[1] ?? '';
        const { createHash } = await import('node:crypto');
        const hash = createHash('sha256').update(token).digest('hex');
        assert.equal(
          await t.store.db
            .selectFrom('console_sessions')
            .select('id')
            .where('token_hash', '=', hash)
            .executeTakeFirst(),
          undefined,
        );
        assert.equal((await call(t, 'GET', '/console/session', { cookie })).statusCode, 401);
        assert.equal((await call(t, 'GET', '/api/v1/servers', { cookie })).statusCode, 401);
        assert.equal((await call(t, 'DELETE', '/console/session', { cookie })).statusCode, 204);
        assert.equal((await call(t, 'DELETE', '/console/session')).statusCode, 204);
        const out2 = await activity(t, 'console_user.signed_out');
        assert.equal(out2.length, 1);
        assert.equal(out2[0]?.actor, 'via console user alice');
      },
    );

    it('a session reaches every /api/v1 read, with the rate-limit fields of a key', async () => {
      for (const user of ['alice', 'victor']) {
        const cookie = await session(t, user);
        for (const url of ['/api/v1/servers', '/api/v1/devices', '/api/v1/nodes', '/api/v1/events']) {
          const response = await call(t, 'GET', url, { cookie });
          assert.equal(response.statusCode, 200, `${user} ${url}: ${response.body}`);
          assert.equal(response.headers['ratelimit-policy'], '"default";q=60;w=6');
          assert.match(String(response.headers.ratelimit), /^"default";r=\d+;t=\d+$/);
        }
      }
    });

    it('a viewer reads and changes nothing: a write answers 403 insufficient_scope naming the scope', async () => {
      const cookie = await session(t, 'victor');
      const write = await call(t, 'POST', '/api/v1/servers', { cookie, headers: WRITE, body: { name: 'by-viewer' } });
      assert.equal(write.statusCode, 403);
      assert.equal(errorOf(write).code, 'insufficient_scope');
      assert.deepEqual(errorOf(write).fields, { scope: 'servers:write required' });
      assert.match(errorOf(write).message, /console user victor \(viewer\) lacks the scope servers:write/);
      const webhooks = await call(t, 'GET', '/api/v1/webhooks', { cookie });
      assert.equal(webhooks.statusCode, 403, 'webhooks (their URLs may hold secrets) take webhooks:write even to read');
      assert.equal((await call(t, 'GET', '/api/v1/servers?limit=200', { cookie })).json().data.length, 0);
    });

    it('an admin write needs X-Console-Request: 1, else 403 csrf_check_failed', async () => {
      const cookie = await session(t, 'alice');
      const without: Record<string, string>[] = [{}, { 'x-console-request': '0' }, { 'x-console-request': 'true' }];
      for (const headers of without) {
        const refused = await call(t, 'POST', '/api/v1/servers', { cookie, headers, body: { name: 'csrf' } });
        assert.equal(refused.statusCode, 403, JSON.stringify(headers));
        assert.equal(errorOf(refused).code, 'csrf_check_failed');
        assert.deepEqual(errorOf(refused).fields, { 'x-console-request': 'must be 1' });
      }
      const deleted = await call(t, 'DELETE', '/api/v1/devices/1', { cookie });
      assert.equal(errorOf(deleted).code, 'csrf_check_failed', 'DELETE too');
      assert.equal((await t.client().GET('/api/v1/servers', {})).response.status, 401, 'nothing was made');
    });

    it(
      'an admin write from another origin is refused; from the ' + 'request’s own origin (PANEL_URL unset) it lands',
      async () => {
        const cookie = await session(t, 'alice');
        for (const origin of ['https://evil.example', 'null', 'http://localhost:8081', 'https://localhost']) {
          const refused = await call(t, 'POST', '/api/v1/servers', {
            cookie,
            headers: { ...WRITE, origin },
            body: { name: 'foreign' },
          });
          assert.equal(refused.statusCode, 403, origin);
          assert.equal(errorOf(refused).code, 'csrf_check_failed');
          assert.deepEqual(errorOf(refused).fields, { origin: 'not the panel' });
        }
        const own = await call(t, 'POST', '/api/v1/servers', {
          cookie,
          headers: { ...WRITE, host: '127.0.0.1:8080', origin: 'http://127.0.0.1:8080' },
          body: { name: 'fra-1' },
        });
        assert.equal(own.statusCode, 201, own.body);
      },
    );

    it(
      'an admin write with the header (and no Origin) lands, and the ' + 'activity log and event name the console user',
      async () => {
        const cookie = await session(t, 'alice');
        const created = await call(t, 'POST', '/api/v1/servers', { cookie, headers: WRITE, body: { name: 'ams-1' } });
        assert.equal(created.statusCode, 201, created.body);
        const id = created.json().id;
        const rows = await t.store.db
          .selectFrom('activity')
          .select(['actor', 'request_id'])
          .where('action', '=', 'server.created')
          .where('resource_id', '=', String(id))
          .execute();
        assert.deepEqual(rows, [{ actor: 'via console user alice', request_id: created.headers['x-request-id'] }]);
        const events = await call(t, 'GET', `/api/v1/events?kind=server.created`, { cookie });
        assert.ok(
          events
            .json()
            .data.some(
              (e: { server_id: number; actor: string }) => e.server_id === id && e.actor === 'via console user alice',
            ),
        );
        const mail = await t.store.db
          .selectFrom('mail_outbox')
          .select('text_body')
          .where('subject', 'like', '%ams-1%')
          .execute();
        assert.ok(
          mail.some((m) => m.text_body.includes('via console user alice')),
          'the notification mail names the console user',
        );
      },
    );

    // The rule changed by design (issue 26): a session's Idempotency-Key was refused (400), now it is kept per user.
    it('takes Idempotency-Key with a session: a retry gets the first reply, the change made once', async () => {
      const cookie = await session(t, 'alice');
      const send = (name: string) =>
        call(t, 'POST', '/api/v1/servers', { cookie, headers: { ...WRITE, 'idempotency-key': 'k1' }, body: { name } });
      const first = await send('idem');
      assert.equal(first.statusCode, 201, first.body);
      const again = await send('idem');
      assert.equal(again.statusCode, 201, again.body);
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.equal(again.json().id, first.json().id, 'the stored reply, no second server');
      const other = await send('idem-2');
      assert.equal(other.statusCode, 422, 'the same key with another body is refused');
    });

    it('an Authorization header wins over the cookie; Bearer keys work as before', async () => {
      const key = await t.createKey('shop', 'all');
      const viewer = await session(t, 'victor');
      const withKey = await call(t, 'POST', '/api/v1/servers', {
        cookie: viewer,
        headers: { authorization: `Bearer ${key}` },
        body: { name: 'by-key' },
      });
      assert.equal(withKey.statusCode, 201, 'the key writes, with no console header');
      const row = await t.store.db
        .selectFrom('activity')
        .select('actor')
        .where('action', '=', 'server.created')
        .orderBy('id', 'desc')
        .executeTakeFirstOrThrow();
      assert.equal(row.actor, 'via API key shop');
      const admin = await session(t, 'alice');
      const badKey = await call(t, 'GET', '/api/v1/servers', {
        cookie: admin,
        headers: { authorization: 'Bearer vpnk_nope' },
        address: someAddress(),
      });
      assert.equal(badKey.statusCode, 401, 'a bad key is not rescued by a good cookie');
      const { response } = await t.client(key).GET('/api/v1/servers', {});
      assert.equal(response.status, 200);
      const none = await call(t, 'GET', '/api/v1/servers', { address: someAddress() });
      assert.equal(none.statusCode, 401);
      assert.equal(errorOf(none).message, 'send an API key as Authorization: Bearer <key>');
    });

    it('removing a user or changing their password ends their sessions at the next request', async () => {
      const now = { nowMs: () => Date.now() };
      const users = new ConsoleUserService(t.store.db, now, new PasswordHasher(), quietPublisher(t.store.db, now));
      await t.createUser('temp', 'admin', PASSWORD);
      const first = await session(t, 'temp');
      assert.equal((await call(t, 'GET', '/api/v1/servers', { cookie: first })).statusCode, 200);
      await users.setPassword('temp', 'another long password', ADMIN_ACTOR);
      assert.equal((await call(t, 'GET', '/api/v1/servers', { cookie: first })).statusCode, 401);
      assert.equal((await call(t, 'GET', '/console/session', { cookie: first })).statusCode, 401);
      const second = await session(t, 'temp', 'another long password');
      assert.equal((await call(t, 'GET', '/console/session', { cookie: second })).statusCode, 200);
      await users.remove('temp', ADMIN_ACTOR);
      assert.equal((await call(t, 'GET', '/api/v1/servers', { cookie: second })).statusCode, 401);
      assert.equal(
        (await call(t, 'POST', '/api/v1/servers', { cookie: second, headers: WRITE, body: { name: 'gone' } }))
          .statusCode,
        401,
      );
    });

    it('a flood of bad session cookies spends its address’s budget for failed credentials (429)', async () => {
      const address = someAddress();
      const cookie = `vpn_panel_session=${'B'.repeat(43)}`;
      const statuses: number[] = [];
      for (let i = 0; i < 31; i++)
        statuses.push((await call(t, 'GET', '/api/v1/servers', { cookie, address })).statusCode);
      assert.deepEqual(new Set(statuses.slice(0, 30)), new Set([401]));
      assert.equal(statuses[30], 429);
      const good = await session(t, 'alice');
      assert.equal(
        (await call(t, 'GET', '/api/v1/servers', { cookie: good, address })).statusCode,
        200,
        'a live session is not held back',
      );
    });

    it('refuses a sign-in, the session or a sign-out from another origin (403 csrf_check_failed)', async () => {
      const foreign = await signIn(t, 'alice', PASSWORD, { headers: { origin: 'https://evil.example' } });
      assert.equal(foreign.statusCode, 403);
      assert.equal(errorOf(foreign).code, 'csrf_check_failed');
      const cookie = await session(t, 'alice');
      const read = await call(t, 'GET', '/console/session', { cookie, headers: { origin: 'https://evil.example' } });
      assert.equal(read.statusCode, 403);
      assert.equal(errorOf(read).code, 'csrf_check_failed');
      const own = { host: '127.0.0.1:8080', origin: 'http://127.0.0.1:8080' };
      assert.equal((await call(t, 'GET', '/console/session', { cookie, headers: own })).statusCode, 200);
      const out = await call(t, 'DELETE', '/console/session', { cookie, headers: { origin: 'https://evil.example' } });
      assert.equal(out.statusCode, 403);
      assert.equal((await call(t, 'GET', '/console/session', { cookie })).statusCode, 200, 'still signed in');
    });
  });
}

describe('console cookies behind https (PANEL_URL https://…)', () => {
  let db: TestDatabase;
  let t: AppUnderTest;

  before(async () => {
    db = await createTestDatabase('sqlite');
    t = await buildTestApp(db, { PANEL_URL: 'https://vpn.example.com/' });
    await t.createUser('alice', 'admin', PASSWORD);
  });
  after(async () => {
    await t.close();
    await db.drop();
  });

  it('marks the cookie Secure and names it __Host-, also when clearing it', async () => {
    const response = await signIn(t, 'alice', PASSWORD);
    assert.match(
      setCookie(response, 'vpn_panel_session'),
      /^__Host-vpn_panel_session=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\/; Max-Age=604800; Secure$/,
    );
    assert.match(setCookie(response, 'vpn_panel_device'), /; Path=\/console\/session; Max-Age=31536000; Secure$/);
    const out = await call(t, 'DELETE', '/console/session', { cookie: cookieOf(response) });
    assert.equal(
      out.headers['set-cookie'],
      '__Host-vpn_panel_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0; Secure',
    );
  });

  it("takes writes from PANEL_URL's origin only, whatever the Host says", async () => {
    const cookie = await session(t, 'alice');
    const own = await call(t, 'POST', '/api/v1/servers', {
      cookie,
      headers: { ...WRITE, origin: 'https://vpn.example.com' },
      body: { name: 'own' },
    });
    assert.equal(own.statusCode, 201, own.body);
    const host = await call(t, 'POST', '/api/v1/servers', {
      cookie,
      headers: { ...WRITE, host: 'panel.test', origin: 'http://panel.test' },
      body: { name: 'by-host' },
    });
    assert.equal(host.statusCode, 403);
    assert.equal(errorOf(host).code, 'csrf_check_failed');
  });
});

describe('console sessions on a clock', () => {
  let db: TestDatabase;
  let t: AppUnderTest;
  const clock = new ManualClock(Date.parse('2026-05-01T08:00:00Z'));

  before(async () => {
    db = await createTestDatabase('sqlite');
    t = await buildTestApp(db, {}, clock);
    await t.createUser('alice', 'admin', PASSWORD);
  });
  after(async () => {
    await t.close();
    await db.drop();
  });

  it('ends a session idle for 12 h; a request within that keeps it', async () => {
    const cookie = await session(t, 'alice');
    clock.advance(SESSION_IDLE_MS - 60_000);
    assert.equal((await call(t, 'GET', '/api/v1/servers', { cookie })).statusCode, 200);
    clock.advance(SESSION_IDLE_MS - 60_000);
    assert.equal((await call(t, 'GET', '/api/v1/servers', { cookie })).statusCode, 200, 'the last request slid it');
    clock.advance(SESSION_IDLE_MS);
    const ended = await call(t, 'GET', '/api/v1/servers', { cookie });
    assert.equal(ended.statusCode, 401);
    assert.equal(errorOf(ended).message, 'the console session has ended; sign in again');
    assert.equal((await call(t, 'GET', '/console/session', { cookie })).statusCode, 401);
  });

  it(
    'limits sign-in attempts per user name from one address: 10, then one a minute (429, Retry-After); ' +
      'the user elsewhere is not held back, and each refusal is counted and logged at most once a minute',
    async () => {
      const refused = async () => {
        assert.ok(t.metrics, 'metrics are on by default');
        const scrape = parseScrape(await t.metrics.scrape());
        return sampleValue(scrape, 'vpn_panel_console_sign_in_refusals_total', { budget: 'name_address' }) ?? 0;
      };
      const before = await refused();
      const stranger = someAddress();
      for (let i = 0; i < 10; i++)
        assert.equal((await signIn(t, 'alice', `wrong password ${i}`, { address: stranger })).statusCode, 401);
      const refusal = await signIn(t, 'ALICE', PASSWORD, { address: stranger });
      assert.equal(refusal.statusCode, 429);
      assert.equal(errorOf(refusal).code, 'rate_limited');
      assert.match(errorOf(refusal).message, /for this user name from this address/);
      assert.equal(refusal.headers['retry-after'], '60');
      for (let i = 0; i < 2; i++)
        assert.equal((await signIn(t, 'alice', PASSWORD, { address: stranger })).statusCode, 429);
      const elsewhere = await signIn(t, 'alice', PASSWORD, { address: someAddress() });
      assert.equal(elsewhere.statusCode, 204, 'a stranger spent only their own budget for the name');
      clock.advance(60_000);
      assert.equal((await signIn(t, 'alice', PASSWORD, { address: stranger })).statusCode, 204, 'one a minute');
      for (let i = 0; i < 10; i++) {
        const again = await signIn(t, 'alice', `wrong again ${i}`, { address: stranger });
        assert.equal(again.statusCode, 401, 'a success gave the name its 10 back there');
      }
      assert.equal((await signIn(t, 'alice', PASSWORD, { address: stranger })).statusCode, 429);

      assert.equal((await refused()) - before, 4, 'every refusal counts');
      const lines = refusalLines(t).filter((line) => line.budget === 'name_address');
      assert.deepEqual(
        lines.map(({ level, user, address, retryAfterSeconds, refusedSinceLastLine }) => ({
          level,
          user,
          address,
          retryAfterSeconds,
          refusedSinceLastLine,
        })),
        [
          {
            level: 40,
            user: nameDigest('alice'),
            address: addressBucket(stranger),
            retryAfterSeconds: 60,
            refusedSinceLastLine: 0,
          },
          {
            level: 40,
            user: nameDigest('alice'),
            address: addressBucket(stranger),
            retryAfterSeconds: 60,
            refusedSinceLastLine: 2,
          },
        ],
        'a warn line at the first refusal, the next a minute later with the two between',
      );
      assert.doesNotMatch(JSON.stringify(lines), /alice|wrong|horse/i, 'neither the name nor a password');
    },
  );

  it('limits sign-in attempts per address: 30, then ten a minute, whatever the names', async () => {
    clock.advance(3600_000);
    const address = '203.0.113.7';
    // 10 hashed attempts spend the name's budget, 20 more are refused for the name: 30 from the address.
    for (let i = 0; i < 30; i++) await signIn(t, 'mallory', `guess number ${i}`, { address });
    const refused = await signIn(t, 'alice', PASSWORD, { address });
    assert.equal(refused.statusCode, 429);
    assert.match(errorOf(refused).message, /from this address/);
    assert.equal(refused.headers['retry-after'], '6');
    assert.equal((await signIn(t, 'alice', PASSWORD, { address: '203.0.113.8' })).statusCode, 204, 'another address');
    clock.advance(6_000);
    assert.equal((await signIn(t, 'alice', PASSWORD, { address })).statusCode, 204);
  });
  it(
    'a browser that signed in as the user before skips the budgets strangers can spend, ' +
      'for one of its own, until the password changes',
    async () => {
      const spent = '203.0.113.7'; // by the test above: 30 attempts, then one more a while later
      const strangers = await signIn(t, 'alice', PASSWORD, { address: spent });
      assert.equal(strangers.statusCode, 429, 'the address has no budget left');
      const device = deviceOf(await signIn(t, 'alice', PASSWORD, { address: '203.0.113.9' }));
      const known = await signIn(t, 'alice', PASSWORD, { address: spent, headers: { cookie: device } });
      assert.equal(known.statusCode, 204, known.body);
      assert.equal(deviceOf(known), device, 'the browser keeps its id');
      for (let i = 0; i < 10; i++) {
        const guess = await signIn(t, 'alice', `wrong password ${i}`, { address: spent, headers: { cookie: device } });
        assert.equal(guess.statusCode, 401);
      }
      const own = await signIn(t, 'alice', PASSWORD, { address: spent, headers: { cookie: device } });
      assert.equal(own.statusCode, 429, 'its own budget: 10, then one a minute');
      assert.match(errorOf(own).message, /for this user name from this browser/);

      await t.createUser('bea', 'viewer', PASSWORD);
      const otherName = await signIn(t, 'bea', PASSWORD, { address: spent, headers: { cookie: device } });
      assert.match(errorOf(otherName).message, /from this address/, 'known for alice only');
      const forged = `${device.slice(0, -4)}AAAA`;
      const forgery = await signIn(t, 'alice', PASSWORD, { address: spent, headers: { cookie: forged } });
      assert.match(errorOf(forgery).message, /from this address/, 'a token the panel did not make is no proof');
      const users = new ConsoleUserService(t.store.db, clock, new PasswordHasher(), quietPublisher(t.store.db, clock));
      await users.setPassword('alice', 'another long password', ADMIN_ACTOR);
      const forgotten = await signIn(t, 'alice', 'another long password', {
        address: spent,
        headers: { cookie: device },
      });
      assert.match(errorOf(forgotten).message, /from this address/, 'a new password forgets the devices');
    },
  );
});

describe('console sign-in limits shared through Redis by two panels', () => {
  let db: TestDatabase;
  let panels: AppUnderTest[] = [];

  before(async () => {
    db = await createTestDatabase('postgres');
    panels = [
      await buildTestApp(db, { REDIS_URL, LOCAL_NODE: 'off' }),
      await buildTestApp(db, { REDIS_URL, LOCAL_NODE: 'off' }),
    ];
  });
  after(async () => {
    for (const panel of panels) await panel.close();
    await db.drop();
  });

  it(
    "a user name's attempts from an address on one panel count on the other, and " +
      'a session made on one works on the other',
    async () => {
      const [one, two] = panels;
      assert.ok(one && two);
      // Redis outlives the test: a name of this run alone, so earlier runs' attempts do not count.
      const name = `user-${randomBytes(6).toString('hex')}`;
      await one.createUser(name, 'viewer', PASSWORD);
      const cookie = cookieOf(await signIn(two, name, PASSWORD, { address: someAddress() }));
      assert.equal((await call(one, 'GET', '/console/session', { cookie, address: someAddress() })).statusCode, 200);
      const address = someAddress();
      const attempt = (panel: AppUnderTest, password: string) => signIn(panel, name, password, { address });
      for (let i = 0; i < 9; i++)
        assert.equal((await attempt(i % 2 === 0 ? one : two, 'wrong password!')).statusCode, 401);
      assert.equal(
        (await attempt(one, PASSWORD)).statusCode,
        204,
        'the 10th attempt, and it gives the name its 10 back',
      );
      for (let i = 0; i < 10; i++)
        assert.equal((await attempt(i % 2 === 0 ? two : one, 'wrong password!')).statusCode, 401);
      assert.equal(
        (await attempt(one, PASSWORD)).statusCode,
        429,
        'the 11th from that address since the success, 5 of them on each panel',
      );
      const elsewhere = await signIn(two, name, PASSWORD, { address: someAddress() });
      assert.equal(elsewhere.statusCode, 204, 'from another address the user is not held back');
      await call(two, 'DELETE', '/console/session', { cookie, address: someAddress() });
      const after = await call(one, 'GET', '/console/session', { cookie, address: someAddress() });
      assert.equal(after.statusCode, 401, 'signed out on both');
    },
  );
});
