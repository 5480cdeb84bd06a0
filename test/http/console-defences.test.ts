/**
 * The console's defences of issue 30 items 6-8, in process: the session cookie is `__Host-` over https and two of
 * them are refused; the console's pages, its session and requests made with a session answer only at the panel's
 * own Host (no DNS rebinding), while API keys work at any; a user made in the console is a viewer unless told, and
 * common or blank passwords are refused there.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { isConsoleHost } from '../../src/http/console-hosts.ts';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';

const PASSWORD = 'correct horse battery';
const WRITE = { 'x-console-request': '1' };
const FOREIGN_HOST = {
  code: 'csrf_check_failed',
  message:
    'the console answers at an IP address, localhost, or the host name of PANEL_URL, PUBLIC_HOST or HOST; ' +
    'to open it by another name, set PANEL_URL to the URL people open',
  fields: { host: 'not a name of this panel' },
};

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

interface Call {
  cookie?: string;
  key?: string;
  headers?: Record<string, string>;
  body?: unknown;
  address?: string;
}

/** A client address of its own (a random /64), so that no sign-in spends another's budget. */
function someAddress(): string {
  return `2001:db8:${randomBytes(2).toString('hex')}:${randomBytes(2).toString('hex')}::1`;
}

/** A panel on a SQLite database of its own, with the admin alice, made before the tests of the describe. */
class PanelWithAlice {
  #db: TestDatabase | undefined;
  #t: AppUnderTest | undefined;

  constructor(env: Record<string, string> = {}) {
    before(async () => {
      this.#db = await createTestDatabase('sqlite');
      this.#t = await buildTestApp(this.#db, env);
      await this.#t.createUser('alice', 'admin', PASSWORD);
    });
    after(async () => {
      await this.#t?.close();
      await this.#db?.drop();
    });
  }

  get t(): AppUnderTest {
    assert.ok(this.#t !== undefined, 'the panel is made before the tests');
    return this.#t;
  }

  call(method: Method, url: string, options: Call = {}): Promise<LightMyRequestResponse> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.cookie !== undefined) headers.cookie = options.cookie;
    if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`;
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    return this.t.app.inject({
      method,
      url,
      headers,
      ...(options.body === undefined ? {} : { payload: JSON.stringify(options.body) }),
      remoteAddress: options.address ?? '127.0.0.1',
    });
  }

  signIn(user: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
    return this.call('POST', '/console/session', {
      body: { user, password: PASSWORD },
      headers,
      address: someAddress(),
    });
  }

  /** The `name=token` a sign-in's Set-Cookie holds, as the browser sends it back. */
  async session(user: string): Promise<string> {
    const response = await this.signIn(user);
    assert.equal(response.statusCode, 204, response.body);
    return String(response.headers['set-cookie']).split(';')[0] ?? '';
  }
}

function errorOf(response: LightMyRequestResponse, status: number) {
  assert.equal(response.statusCode, status, response.body);
  return response.json().error;
}

describe('the session cookie behind https (PANEL_URL https://…)', () => {
  const panel = new PanelWithAlice({ PANEL_URL: 'https://vpn.example.com/' });

  it('is __Host-vpn_panel_session, the only name read; sign-out ends the session by it', async () => {
    const cookie = await panel.session('alice');
    assert.match(cookie, /^__Host-vpn_panel_session=[A-Za-z0-9_-]{43}$/);
    assert.equal((await panel.call('GET', '/api/v1/servers', { cookie })).statusCode, 200);
    assert.equal((await panel.call('GET', '/console/session', { cookie })).statusCode, 200);
    // The same token under the name of plain http, as a neighbour over http could plant it: not read.
    const unprefixed = cookie.replace(/^__Host-/, '');
    errorOf(await panel.call('GET', '/api/v1/servers', { cookie: unprefixed }), 401);
    assert.equal((await panel.call('DELETE', '/console/session', { cookie })).statusCode, 204);
    assert.equal(errorOf(await panel.call('GET', '/console/session', { cookie }), 401).code, 'unauthorized');
  });

  it('refuses two of them (400), whichever is valid, also beside an unprefixed one', async () => {
    const cookie = await panel.session('alice');
    const other = `__Host-vpn_panel_session=${'A'.repeat(43)}`;
    for (const both of [`${cookie}; ${other}`, `${other}; ${cookie}`, `${cookie};${cookie}`]) {
      const error = errorOf(await panel.call('GET', '/api/v1/servers', { cookie: both }), 400);
      assert.equal(error.code, 'bad_request', both);
      assert.deepEqual(error.fields, { cookie: 'one __Host-vpn_panel_session at most' });
      assert.equal(errorOf(await panel.call('GET', '/console/session', { cookie: both }), 400).code, 'bad_request');
    }
    const beside = await panel.call('GET', '/api/v1/servers', { cookie: `vpn_panel_session=x; ${cookie}` });
    assert.equal(beside.statusCode, 200, beside.body);
  });

  it("answers the console at PANEL_URL's host, by X-Forwarded-Host only from a proxy TRUST_PROXY lists", async () => {
    assert.equal((await panel.signIn('alice', { host: 'vpn.example.com' })).statusCode, 204);
    assert.deepEqual(errorOf(await panel.signIn('alice', { host: 'vpn.example.net' }), 403), FOREIGN_HOST);
    // TRUST_PROXY is off here: the forwarded name is not read, the Host is.
    const forwarded = { host: 'localhost:8080', 'x-forwarded-host': 'evil.example' };
    assert.equal((await panel.signIn('alice', forwarded)).statusCode, 204);
  });
});

describe('the Host behind a proxy TRUST_PROXY lists', () => {
  const panel = new PanelWithAlice({ PANEL_URL: 'https://vpn.example.com', TRUST_PROXY: '127.0.0.1' });

  it("is the proxy's X-Forwarded-Host", async () => {
    const viaProxy = (forwardedHost: string) =>
      panel.call('POST', '/console/session', {
        body: { user: 'alice', password: PASSWORD },
        headers: { host: '127.0.0.1:8080', 'x-forwarded-host': forwardedHost, 'x-forwarded-for': someAddress() },
      });
    assert.equal((await viaProxy('vpn.example.com')).statusCode, 204);
    assert.deepEqual(errorOf(await viaProxy('rebound.example'), 403), FOREIGN_HOST);
  });
});

describe('the Host of console requests (PANEL_URL unset)', () => {
  const panel = new PanelWithAlice({ PUBLIC_HOST: 'VPN.Example.org' });
  let admin: string;
  let key: string;

  before(async () => {
    admin = await panel.session('alice');
    key = await panel.t.createKey('anywhere', 'servers:read');
  });

  it('refuses a sign-in, the session, the pages and the files at a foreign Host, with the error body', async () => {
    const host = { host: 'rebound.example:8080' };
    assert.deepEqual(errorOf(await panel.signIn('alice', host), 403), FOREIGN_HOST);
    assert.deepEqual(
      errorOf(await panel.call('GET', '/console/session', { cookie: admin, headers: host }), 403),
      FOREIGN_HOST,
    );
    assert.deepEqual(
      errorOf(await panel.call('DELETE', '/console/session', { cookie: admin, headers: host }), 403),
      FOREIGN_HOST,
    );
    for (const page of ['/', '/sign-in', '/devices/12', '/assets/index.js']) {
      assert.deepEqual(errorOf(await panel.call('GET', page, { headers: host }), 403), FOREIGN_HOST, page);
    }
    assert.equal((await panel.call('GET', '/console/session', { cookie: admin })).statusCode, 200, 'still signed in');
  });

  it('refuses a request made with a session at a foreign Host; an API key works at any', async () => {
    const host = { host: 'rebound.example' };
    const read = await panel.call('GET', '/api/v1/servers', { cookie: admin, headers: host });
    assert.deepEqual(errorOf(read, 403), FOREIGN_HOST);
    const write = await panel.call('POST', '/api/v1/servers', {
      cookie: admin,
      headers: { ...host, ...WRITE },
      body: { name: 'rebound' },
    });
    assert.deepEqual(errorOf(write, 403), FOREIGN_HOST);
    assert.equal((await panel.call('GET', '/api/v1/servers', { key, headers: host })).statusCode, 200);
    assert.equal((await panel.call('GET', '/healthz', { headers: host })).statusCode, 200);
  });

  it('answers at localhost, an IP address and PUBLIC_HOST, with any port and case', async () => {
    for (const host of [
      'localhost',
      'LocalHost:8080',
      'localhost.',
      '127.0.0.1:8080',
      '[::1]:8080',
      '10.1.2.3',
      'vpn.example.org:443',
    ]) {
      assert.equal(
        (await panel.call('GET', '/console/session', { cookie: admin, headers: { host } })).statusCode,
        200,
        host,
      );
      const page = await panel.call('GET', '/', { headers: { host } });
      assert.ok([200, 503].includes(page.statusCode), `${host}: the console or the note that it is not built`);
    }
    assert.equal((await panel.signIn('alice', { host: '[2001:db8::1]:8080' })).statusCode, 204);
  });
});

describe('which Hosts name the panel', () => {
  const names = new Set(['localhost', 'vpn.example.com']);

  it('takes IP addresses and the configured names, with or without a port; nothing else', () => {
    for (const host of ['localhost', 'localhost:8080', 'VPN.example.com', 'vpn.example.com.:443', '192.0.2.1', '[::1]'])
      assert.equal(isConsoleHost(host, names), true, host);
    for (const host of [
      '',
      'evil.example',
      'vpn.example.com.evil.example',
      'localhost@evil.example',
      'evil.example/localhost',
      'evil.example#localhost',
      'localhost:8080:80',
      '[localhost]',
      'sub.localhost',
    ])
      assert.equal(isConsoleHost(host, names), false, host);
  });
});

describe('console users made in the console', () => {
  const panel = new PanelWithAlice();
  let admin: string;

  before(async () => {
    admin = await panel.session('alice');
  });

  const add = (body: unknown) => panel.call('POST', '/api/v1/console-users', { cookie: admin, headers: WRITE, body });

  it('are viewers unless the role is given', async () => {
    const made = await add({ name: 'bob', password: 'bob password 123' });
    assert.equal(made.statusCode, 201, made.body);
    assert.equal(made.json().role, 'viewer');
    assert.equal((await add({ name: 'carol', role: 'admin', password: 'carol password 1' })).json().role, 'admin');
  });

  it('refuse passwords of only whitespace and common ones, whatever their case (422 naming password)', async () => {
    const weak: [string, string][] = [
      [' '.repeat(12), 'not only spaces'],
      ['\t \u00a0\u3000'.repeat(4), 'not only spaces'],
      ['password1234', 'too common'],
      ['PassWord1234', 'too common'],
      ['Qwerty123456!', 'too common'],
      ['P@ssw0rd2024!', 'too common'],
      ['123456789012', 'too common'],
      ['1qaz2wsx3edc', 'too common'],
      ['abcabcabcabc', 'too common'],
      ['iloveyou 2024', 'too common'],
    ];
    for (const [password, problem] of weak) {
      const error = errorOf(await add({ name: 'dave', password }), 422);
      assert.equal(error.code, 'validation_failed', password);
      assert.deepEqual(error.fields, { password: problem }, password);
    }
    const id = (await add({ name: 'erin', password: 'erin password 77' })).json().id;
    const renewed = await panel.call('PUT', `/api/v1/console-users/${id}/password`, {
      cookie: admin,
      headers: WRITE,
      body: { password: 'Password123456' },
    });
    assert.deepEqual(errorOf(renewed, 422).fields, { password: 'too common' });
  });
});
