import assert from 'node:assert/strict';
import { once } from 'node:events';
import { request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { logged, type PanelProcess, startPanel } from '../support/panel.ts';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** docs/api.md "HTTP conventions": headers within 20 s, a whole request within 30 s, checked every 5 s. */
const HEADERS_TIMEOUT_S = 20;
const REQUEST_TIMEOUT_S = 30;
const CHECK_S = 5;
/** Scheduling slack of a loaded 2-core machine. */
const MARGIN_S = 10;
/** docs/api.md "Rate limits": 30 requests without a valid key from one address, then one a second. */
const UNAUTHENTICATED_BURST = 30;

interface Answer {
  status: number;
  json: ReturnType<typeof JSON.parse>;
  retryAfter: string | undefined;
}

interface CallOptions {
  key?: string;
  /** The loopback address the request comes from (all of 127/8 is loopback). */
  from?: string;
  forwardedFor?: string;
}

/** `GET path` on a connection of its own, from a chosen loopback address. */
function get(panel: PanelProcess, path: string, options: CallOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`;
  if (options.forwardedFor !== undefined) headers['x-forwarded-for'] = options.forwardedFor;
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${panel.url}${path}`, { headers, agent: false, localAddress: options.from }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        const isJson = (res.headers['content-type'] ?? '').startsWith('application/json');
        const json = isJson && text !== '' ? JSON.parse(text) : {};
        resolve({ status: res.statusCode ?? 0, json, retryAfter: res.headers['retry-after'] });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** `GET /api/v1/servers`, the route these tests knock on. */
function servers(panel: PanelProcess, options: CallOptions = {}): Promise<Answer> {
  return get(panel, '/api/v1/servers', options);
}

/** The head of a raw HTTP/1.1 request. */
function head(method: string, path: string, headers: Record<string, string | number>): string {
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
  return `${method} ${path} HTTP/1.1\r\nhost: panel\r\n${lines.join('')}\r\n`;
}

function json(length: number): Record<string, string | number> {
  return { 'content-type': 'application/json', 'content-length': length };
}

function rawConnection(panel: PanelProcess): Socket {
  return connect(Number(new URL(panel.url).port), '127.0.0.1');
}

/** A loopback address of its own for a test, so no two runs (or panels sharing Redis) count the same one. */
function randomLoopback(): string {
  const byte = () => 2 + Math.floor(Math.random() * 250);
  return `127.${byte()}.${byte()}.${byte()}`;
}

function assertRateLimited(answer: Answer, label: string): void {
  assert.equal(answer.status, 429, label);
  assert.equal(answer.json.error.code, 'rate_limited', label);
  assert.equal(typeof answer.json.error.message, 'string');
  assert.deepEqual(answer.json.error.fields, {});
  assert.match(answer.retryAfter ?? '', /^[1-9][0-9]*$/, `${label}: Retry-After in whole seconds`);
}

/**
 * Sends `probe` twice in a row after a flood: a token may refill (one a second) just before the first,
 * never before both. Asserts at least one is refused.
 */
async function assertProbeRefused(probe: () => Promise<Answer>, label: string): Promise<void> {
  const answers = [await probe(), await probe()];
  const refused = answers.filter((a) => a.status === 429);
  assert.ok(refused.length >= 1, `${label}: refused (got ${answers.map((a) => a.status).join(', ')})`);
  for (const a of refused) assertRateLimited(a, label);
}

const BAD_KEYS = [undefined, 'not-a-key', `vpnk_${'A'.repeat(38)}`];

/** Sends `count` requests with missing, malformed or unknown keys, one after another. */
async function flood(panel: PanelProcess, count: number, options: (i: number) => CallOptions): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (let i = 0; i < count; i++) {
    answers.push(await servers(panel, { key: BAD_KEYS[i % BAD_KEYS.length], ...options(i) }));
  }
  return answers;
}

/** The flood's 401s are at most the burst plus what refills (one a second) while it ran, then 429s. */
function assertCutAfterBurst(answers: Answer[], seconds: number): void {
  const unauthorized = answers.filter((a) => a.status === 401).length;
  assert.ok(unauthorized >= UNAUTHENTICATED_BURST, `the burst answers 401 (${unauthorized} did)`);
  const most = UNAUTHENTICATED_BURST + Math.ceil(seconds) + 1;
  assert.ok(unauthorized <= most, `${unauthorized} answered 401 in ${seconds.toFixed(1)} s`);
  const firstRefused = answers.findIndex((a) => a.status === 429);
  assert.ok(firstRefused >= UNAUTHENTICATED_BURST, 'refused only after the burst');
  for (const a of answers.slice(firstRefused)) assert.ok(a.status === 429 || a.status === 401, `got ${a.status}`);
  for (const a of answers.filter((x) => x.status === 429)) assertRateLimited(a, 'after the burst');
}

async function timed<T>(work: () => Promise<T>): Promise<{ result: T; seconds: number }> {
  const started = performance.now();
  const result = await work();
  return { result, seconds: (performance.now() - started) / 1000 };
}

/**
 * Opens a raw connection, sends `start` at once, then one more byte of `drip` (if any) every 5 s until
 * the panel closes the connection; gives up after `giveUpS` (the test then fails on the time).
 */
function trickle(panel: PanelProcess, start: string, drip: string, giveUpS: number) {
  const socket = rawConnection(panel);
  const started = performance.now();
  let received = '';
  let sent = 0;
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (received += chunk));
  socket.on('error', () => {}); // a reset is one way of being cut off
  if (start !== '') socket.write(start);
  const dripping = setInterval(() => {
    const byte = drip[sent++ % drip.length];
    if (byte !== undefined) socket.write(byte);
  }, 5_000);
  const giveUp = setTimeout(() => socket.destroy(), giveUpS * 1000);
  return new Promise<{ seconds: number; received: string }>((resolve) => {
    socket.on('close', () => {
      clearInterval(dripping);
      clearTimeout(giveUp);
      resolve({ seconds: (performance.now() - started) / 1000, received });
    });
  });
}

/** 80 share-page views at once with an unknown token: more than the per-address burst of 60. */
async function viewShareBurst(panel: PanelProcess, options: (i: number) => CallOptions): Promise<number[]> {
  const views = Array.from({ length: 80 }, (_, i) => get(panel, `/s/${'t'.repeat(43)}`, options(i)));
  return (await Promise.all(views)).map((a) => a.status);
}

/** The 408 the panel sends before it closes a connection whose request did not arrive in time. */
function assertTimedOut(received: string): void {
  const at = received.indexOf('HTTP/1.1 408 ');
  assert.ok(at >= 0, `a 408 arrives (got ${JSON.stringify(received.slice(0, 300))})`);
  const json = JSON.parse(received.slice(received.indexOf('\r\n\r\n', at) + 4));
  assert.equal(json.error.code, 'request_timeout');
  assert.deepEqual(json.error.fields, {});
}

function assertCutWithin(seconds: number, timeoutS: number): void {
  const bound = timeoutS + CHECK_S + MARGIN_S;
  assert.ok(seconds <= bound, `cut after ${seconds.toFixed(1)} s (bound ${bound} s)`);
  assert.ok(seconds >= timeoutS - 1, `not before the timeout of ${timeoutS} s (${seconds.toFixed(1)} s)`);
}

// Each part has a panel of its own. Two run at a time: the long timeouts beside the rest, one after
// another (more panels starting at once miss their start-up deadline on a loaded 2-core machine).
describe('HTTP hardening', { concurrency: 2 }, () => {
  describe('request timeouts', { concurrency: true }, () => {
    let db: TestDatabase;
    let panel: PanelProcess;
    let key: string;
    const giveUpS = REQUEST_TIMEOUT_S + CHECK_S + MARGIN_S + 5;
    before(async () => {
      db = await createTestDatabase('sqlite');
      panel = await startPanel({ database: db });
      key = await panel.createKey('slow', 'all');
    });
    after(async () => {
      await panel.stop();
      await db.drop();
    });

    it('cuts a body that trickles in a byte every 5 s, sent without a key, within the request timeout', async () => {
      const start = head('POST', '/api/v1/devices', json(1000));
      const { seconds, received } = await trickle(panel, start, '{"server_id":1,', giveUpS);
      assertCutWithin(seconds, REQUEST_TIMEOUT_S);
      assert.match(received, /^HTTP\/1\.1 401 /, 'the missing key is answered at once');
      assertTimedOut(received);
    });

    it('cuts headers that trickle in a byte every 5 s within the headers timeout', async () => {
      const start = 'GET /api/v1/servers HTTP/1.1\r\nhost: panel\r\nx-slow: ';
      const { seconds, received } = await trickle(panel, start, 'abcdefgh', giveUpS);
      assertCutWithin(seconds, HEADERS_TIMEOUT_S);
      assertTimedOut(received);
    });

    it('cuts a connection that sends nothing at all within the headers timeout', async () => {
      const { seconds } = await trickle(panel, '', '', giveUpS);
      assertCutWithin(seconds, HEADERS_TIMEOUT_S);
    });

    it('lets a slow client whose request arrives within the timeout through, and serves others meanwhile', async () => {
      const body = '{"name":"slow-client"}';
      const socket = rawConnection(panel);
      let received = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (received += chunk));
      socket.write(head('POST', '/api/v1/servers', { authorization: `Bearer ${key}`, ...json(body.length) }));
      // The body over ~15 s, half the request timeout, as a very slow link would send it.
      for (const part of [body.slice(0, 8), body.slice(8, 16), body.slice(16)]) {
        await new Promise((r) => setTimeout(r, 5_000));
        socket.write(part);
        assert.equal((await get(panel, '/healthz')).status, 200, 'others are served meanwhile');
      }
      while (!received.includes('\r\n\r\n{')) await once(socket, 'data');
      socket.destroy();
      assert.match(received, /^HTTP\/1\.1 201 /);
    });
  });

  describe('per-address limits (failed keys, share page), TRUST_PROXY off', () => {
    let db: TestDatabase;
    let panel: PanelProcess;
    before(async () => {
      db = await createTestDatabase('sqlite');
      panel = await startPanel({ database: db, env: { LOCAL_NODE: 'off' } });
    });
    after(async () => {
      await panel.stop();
      await db.drop();
    });

    it('answers 429 and Retry-After after a burst of bad keys, also on loopback; a known key passes', async () => {
      const from = randomLoopback();
      const known = await panel.createKey('known', 'servers:read');
      // Its first use is a lookup (and counts), so it comes from elsewhere; the flood's address starts full.
      assert.equal((await servers(panel, { key: known, from: randomLoopback() })).status, 200);
      const { result: answers, seconds } = await timed(() => flood(panel, 60, () => ({ from })));
      assertCutAfterBurst(answers, seconds);
      assert.equal((await servers(panel, { key: known, from })).status, 200, 'a key known valid costs nothing');
      assert.equal((await servers(panel, { from: randomLoopback() })).status, 401, 'another address is not refused');
    });

    it('keeps a key found valid working from a flooded address after the keys change (a key revoked)', async () => {
      const from = randomLoopback();
      const known = await panel.createKey('known-across-changes', 'servers:read');
      assert.equal((await servers(panel, { key: known, from: randomLoopback() })).status, 200);
      const revoked = await panel.createKey('revoked-meanwhile', 'servers:read');
      assert.equal((await servers(panel, { key: revoked, from: randomLoopback() })).status, 200);
      // A change to the keys empties the panel's memory of them (the flood's first request sees it), so the
      // known key is looked up again, right after the flood emptied its address's budget.
      assert.equal((await panel.cli(['keys', 'revoke', 'revoked-meanwhile'])).code, 0);
      await flood(panel, UNAUTHENTICATED_BURST + 5, () => ({ from }));
      assert.equal((await servers(panel, { key: known, from })).status, 200, 'the key found valid still passes');
      const after = await servers(panel, { key: revoked, from: randomLoopback() });
      assert.equal(after.status, 401, 'a revoked key found valid before is refused');
    });

    it('looks up no key for a refused address: a valid key not seen yet waits, or passes once known', async () => {
      const from = randomLoopback();
      const fresh = await Promise.all(['fresh-1', 'fresh-2', 'fresh-3'].map((n) => panel.createKey(n, 'servers:read')));
      await flood(panel, UNAUTHENTICATED_BURST + 5, () => ({ from }));
      const probes: Answer[] = [];
      for (const key of fresh) probes.push(await servers(panel, { key, from }));
      // At most one token refills (one a second) while the three go out; the others are not looked up.
      const refused = fresh.filter((_, i) => probes[i]?.status === 429);
      assert.ok(refused.length >= 2, `valid keys not seen yet are refused (${probes.map((a) => a.status).join(', ')})`);
      for (const a of probes.filter((p) => p.status === 429)) assertRateLimited(a, 'a valid key not seen yet');
      const [waiting = '', later = ''] = refused;
      assert.equal((await servers(panel, { key: waiting, from: randomLoopback() })).status, 200, 'the key elsewhere');
      assert.equal((await servers(panel, { key: waiting, from })).status, 200, 'once known valid, it passes here too');

      const retryAfterS = Number(probes.find((p) => p.status === 429)?.retryAfter ?? 1);
      const deadline = Date.now() + (retryAfterS + 5) * 1000;
      let status = 0;
      while (status !== 200 && Date.now() < deadline) {
        status = (await servers(panel, { key: later, from })).status;
        if (status !== 200) await new Promise((r) => setTimeout(r, 200));
      }
      assert.equal(status, 200, 'after Retry-After, a valid key not seen yet passes');
    });

    it('takes no address from X-Forwarded-For when TRUST_PROXY is off', async () => {
      const from = randomLoopback();
      const forged = (i: number) => ({ from, forwardedFor: `198.51.100.${i + 1}` });
      const { result: answers, seconds } = await timed(() => flood(panel, 45, forged));
      assertCutAfterBurst(answers, seconds);
    });

    it('counts share-page views by the connection, whatever X-Forwarded-For says, with TRUST_PROXY off', async () => {
      const from = randomLoopback();
      const statuses = await viewShareBurst(panel, (i) => ({ from, forwardedFor: `198.51.100.${i + 1}` }));
      assert.ok(statuses.includes(429), `one address for all (${statuses.filter((x) => x === 429).length} refused)`);
    });
  });

  describe('per-address limits behind a trusted proxy (TRUST_PROXY)', () => {
    let db: TestDatabase;
    let panel: PanelProcess;
    before(async () => {
      db = await createTestDatabase('sqlite');
      panel = await startPanel({ database: db, env: { LOCAL_NODE: 'off', TRUST_PROXY: '127.0.0.0/8' } });
    });
    after(async () => {
      await panel.stop();
      await db.drop();
    });

    it('counts the client X-Forwarded-For names, not the proxy; prepending addresses does not escape', async () => {
      const proxy = randomLoopback();
      const client = { from: proxy, forwardedFor: '198.51.100.7' };
      const { result: answers, seconds } = await timed(() => flood(panel, 45, () => client));
      assertCutAfterBurst(answers, seconds);
      const forged = { from: proxy, forwardedFor: '203.0.113.9, 198.51.100.7' };
      await assertProbeRefused(() => servers(panel, forged), 'a forged entry left of the one the proxy wrote');
      const other = { from: proxy, forwardedFor: '198.51.100.8' };
      assert.equal((await servers(panel, other)).status, 401, 'another client behind the proxy');
      assert.equal((await servers(panel, { from: proxy })).status, 401, 'the proxy itself');
    });

    it('counts share-page views by the client X-Forwarded-For names', async () => {
      const proxy = randomLoopback();
      const statuses = await viewShareBurst(panel, () => ({ from: proxy, forwardedFor: '198.51.100.20' }));
      assert.ok(statuses.includes(429), 'one client past the burst is refused');
      const other = await get(panel, `/s/${'t'.repeat(43)}`, { from: proxy, forwardedFor: '198.51.100.21' });
      assert.equal(other.status, 404, 'another client behind the same proxy is not');
    });

    it('counts an IPv6 client by its /64', async () => {
      const proxy = randomLoopback();
      await flood(panel, UNAUTHENTICATED_BURST + 5, (i) => ({ from: proxy, forwardedFor: `2001:db8:1:2::${i + 1}` }));
      const sameNet = { from: proxy, forwardedFor: '2001:db8:1:2:ffff::1' };
      await assertProbeRefused(() => servers(panel, sameNet), 'the same /64');
      const nextNet = { from: proxy, forwardedFor: '2001:db8:1:3::1' };
      assert.equal((await servers(panel, nextNet)).status, 401, 'the next /64');
    });
  });

  describe('failed authentication shared through Redis by two panels', () => {
    let db: TestDatabase;
    let panels: PanelProcess[];
    before(async () => {
      db = await createTestDatabase('postgres');
      panels = [
        await startPanel({ database: db, env: { REDIS_URL, LOCAL_NODE: 'off' } }),
        await startPanel({ database: db, env: { REDIS_URL, LOCAL_NODE: 'off' } }),
      ];
    });
    after(async () => {
      for (const panel of panels) await panel.stop();
      await db.drop();
    });

    it('refuses an address after one burst over both panels together', async () => {
      const from = randomLoopback();
      const { result: answers, seconds } = await timed(async () => {
        const all: Answer[] = [];
        for (let i = 0; i < 60; i++) {
          const panel = panels[i % 2];
          if (!panel) throw new Error('no panel');
          all.push(await servers(panel, { key: BAD_KEYS[i % BAD_KEYS.length], from }));
        }
        return all;
      });
      assertCutAfterBurst(answers, seconds);
      const refusedBy = new Set(answers.flatMap((a, i) => (a.status === 429 ? [i % 2] : [])));
      assert.deepEqual([...refusedBy].sort(), [0, 1], 'both panels refuse the address');
    });

    it('spends one of the budget per panel for a burst with a new valid key, not one a request', async () => {
      const from = randomLoopback();
      const [first] = panels;
      if (!first) throw new Error('no panel');
      const key = await first.createKey('new-in-a-burst', 'servers:read');
      const toBoth = (i: number) => servers(panels[i % 2] ?? first, { key, from });
      const burst = await Promise.all(Array.from({ length: 50 }, (_, i) => toBoth(i)));
      assert.deepEqual(new Set(burst.map((a) => a.status)), new Set([200]), 'every request of the burst passes');
      const answers = await flood(first, UNAUTHENTICATED_BURST, () => ({ from }));
      const unauthorized = answers.filter((a) => a.status === 401).length;
      assert.ok(unauthorized >= UNAUTHENTICATED_BURST - 2, `the budget is nearly whole (${unauthorized} answered 401)`);
    });
  });

  describe('connection cap (HTTP_MAX_CONNECTIONS)', () => {
    const CAP = 20;
    let db: TestDatabase;
    let panel: PanelProcess;
    const sockets: Socket[] = [];
    before(async () => {
      db = await createTestDatabase('sqlite');
      panel = await startPanel({ database: db, env: { LOCAL_NODE: 'off', HTTP_MAX_CONNECTIONS: String(CAP) } });
    });
    after(async () => {
      for (const socket of sockets) socket.destroy();
      await panel.stop();
      await db.drop();
    });

    /** A keep-alive connection that got its answer (it stays open), or null if the panel closed it unanswered. */
    function holdConnection(): Promise<Socket | null> {
      const socket = rawConnection(panel);
      let received = '';
      socket.setEncoding('utf8');
      socket.on('error', () => {});
      socket.write(head('GET', '/healthz', {}));
      return new Promise((resolve) => {
        socket.on('data', (chunk: string) => {
          received += chunk;
          if (received.startsWith('HTTP/1.1 200 ') && received.includes('\r\n\r\n')) resolve(socket);
        });
        socket.on('close', () => resolve(null));
      });
    }

    it('closes connections beyond the cap at once, logs it, and takes new ones when a slot is free', async () => {
      const held = await Promise.all(Array.from({ length: CAP + 5 }, () => holdConnection()));
      for (const socket of held) if (socket !== null) sockets.push(socket);
      // The fetch that waited for /healthz at start may still hold one pooled connection.
      assert.ok(sockets.length <= CAP && sockets.length >= CAP - 1, `${sockets.length} held with a cap of ${CAP}`);
      assert.equal(await holdConnection(), null, 'one more is closed unanswered');
      const message = 'connection cap reached: new connections are closed';
      await logged(panel, (line) => line.msg === message && line.maxConnections === CAP);

      sockets.pop()?.destroy();
      const deadline = Date.now() + 5_000;
      let again: Socket | null = null;
      while (again === null && Date.now() < deadline) again = await holdConnection();
      assert.ok(again !== null, 'a freed slot takes a new connection');
      sockets.push(again);
    });
  });

  describe('413 answers reach the client', () => {
    let db: TestDatabase;
    let panel: PanelProcess;
    let key: string;
    const big = JSON.stringify({ server_id: 1, name: 'x'.repeat(3 * 1024 * 1024) });
    const tooLarge = { status: 413, code: 'payload_too_large' };
    before(async () => {
      db = await createTestDatabase('sqlite');
      panel = await startPanel({ database: db, env: { LOCAL_NODE: 'off' } });
      key = await panel.createKey('big', 'all', ['--no-rate-limit']);
    });
    after(async () => {
      await panel.stop();
      await db.drop();
    });

    async function post(body: BodyInit): Promise<{ status: number; code: string }> {
      // A stream body needs `duplex` (undici), which the DOM's RequestInit does not name.
      const init: RequestInit & { duplex: 'half' } = {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body,
        duplex: 'half',
      };
      const response = await fetch(`${panel.url}/api/v1/devices`, init);
      const json = await response.json();
      return { status: response.status, code: json.error?.code };
    }

    it('gives fetch the 413 payload_too_large body for a 3 MB body, 20 times out of 20', async () => {
      for (let i = 0; i < 20; i++) assert.deepEqual(await post(big), tooLarge, `attempt ${i + 1}`);
    });

    it('gives fetch the 413 for a 3 MB body streamed without a length, 20 times out of 20', async () => {
      // Still sending when the 413 comes: before the fix most of these ended in EPIPE.
      const chunk = new TextEncoder().encode(big.slice(0, 64 * 1024));
      for (let i = 0; i < 20; i++) {
        let sent = 0;
        const stream = new ReadableStream<Uint8Array>({
          pull(controller) {
            if (sent++ >= 48) controller.close();
            else controller.enqueue(chunk);
          },
        });
        assert.deepEqual(await post(stream), tooLarge, `attempt ${i + 1}`);
      }
    });

    it('reads the rest of a 3 MB body sent slowly on a raw socket, answers 413, keeps the connection', async () => {
      const socket = rawConnection(panel);
      let received = '';
      let failure: Error | undefined;
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (received += chunk));
      socket.on('error', (error) => (failure = error));
      socket.write(head('POST', '/api/v1/devices', { authorization: `Bearer ${key}`, ...json(big.length) }));
      for (let at = 0; at < big.length && failure === undefined && !socket.destroyed; at += 64 * 1024) {
        if (!socket.write(big.slice(at, at + 64 * 1024))) await once(socket, 'drain');
        await new Promise((r) => setTimeout(r, 2));
      }
      assert.equal(failure, undefined, 'the whole body could be sent');
      assert.equal(socket.destroyed, false, 'the panel did not close the connection mid-body');
      assert.match(received, /^HTTP\/1\.1 413 /);
      assert.match(received, /"code":"payload_too_large"/);

      received = '';
      socket.write(head('GET', '/healthz', {}));
      while (!received.includes('\r\n\r\n')) await once(socket, 'data');
      socket.destroy();
      assert.match(received, /^HTTP\/1\.1 200 /, 'the same connection answers the next request');
    });
  });
});
