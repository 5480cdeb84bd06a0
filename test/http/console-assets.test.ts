/**
 * The operator console as the panel serves it (src/http/routes/console.ts), in process: index.html for `/` and
 * the console's pages under a strict CSP, hashed assets cached for a year, answers compressed as the client
 * accepts, the paths of the API, the share page and the session left to their own routes, 503 without a
 * build, and the budget: every script and style of the build together under 200 KB compressed.
 *
 * Needs the build (`npm run build:console`; scripts/test makes it when console/ changed).
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify from 'fastify';
import { sendError } from '../../src/http/errors.ts';
import { BUILT_CONSOLE, CONSOLE_CSP, CONSOLE_PAGES, consoleRoutes } from '../../src/http/routes/console.ts';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';

/** Issue 14: the first page's compressed script and style stay under this. */
const BUDGET_BYTES = 200 * 1024;
const YEAR_IMMUTABLE = 'public, max-age=31536000, immutable';
/** XML namespace names in Preact and the icon: identifiers, never fetched. */
const NAMESPACES = new Set([
  'http://www.w3.org/2000/svg',
  'http://www.w3.org/1999/xhtml',
  'http://www.w3.org/1998/Math/MathML',
  'http://www.w3.org/1999/xlink',
]);

const ASSETS = join(BUILT_CONSOLE, 'assets');

/** The build's script and style files, by name. */
function builtAssets(extension: RegExp): string[] {
  return readdirSync(ASSETS).filter((name) => extension.test(name));
}

describe('the operator console as served', () => {
  let db: TestDatabase;
  let panel: AppUnderTest;
  let indexHtml: string;

  before(async () => {
    assert.ok(
      existsSync(join(BUILT_CONSOLE, 'index.html')),
      `no console build in ${BUILT_CONSOLE}: run npm run build:console`,
    );
    indexHtml = readFileSync(join(BUILT_CONSOLE, 'index.html'), 'utf8');
    db = await createTestDatabase('sqlite');
    panel = await buildTestApp(db);
  });

  after(async () => {
    await panel?.close();
    await db?.drop();
  });

  const get = (url: string, headers: Record<string, string> = {}) => panel.app.inject({ method: 'GET', url, headers });

  /** The assets index.html loads: its module script, stylesheets and icon. */
  function linkedAssets(): string[] {
    const linked = [...indexHtml.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((match) => match[1] ?? '');
    assert.ok(
      linked.some((path) => path.endsWith('.js')),
      `index.html loads a script: ${indexHtml}`,
    );
    return linked;
  }

  it('GET / is the console: HTML, revalidated on every load, under the strict CSP', async () => {
    const answer = await get('/');
    assert.equal(answer.statusCode, 200);
    assert.equal(answer.headers['content-type'], 'text/html; charset=utf-8');
    assert.equal(answer.headers['cache-control'], 'no-cache');
    assert.equal(answer.headers['x-content-type-options'], 'nosniff');
    assert.equal(answer.headers['referrer-policy'], 'no-referrer');
    assert.equal(answer.body, indexHtml);
    const csp = String(answer.headers['content-security-policy']);
    assert.equal(csp, CONSOLE_CSP);
    const directives = new Map(
      csp.split(';').map((part) => {
        const [name = '', ...values] = part.trim().split(/\s+/);
        return [name, values.join(' ')];
      }),
    );
    assert.deepEqual(Object.fromEntries(directives), {
      'default-src': "'self'",
      'script-src': "'self'",
      'style-src': "'self'",
      'img-src': "'self' data: blob:",
      'connect-src': "'self'",
      'frame-ancestors': "'none'",
      'base-uri': "'none'",
      'form-action': "'self'",
    });
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
  });

  it('the HTML has no inline script or style for the CSP to refuse', () => {
    assert.doesNotMatch(indexHtml, /<script(?![^>]*\bsrc=)[^>]*>/, 'every script has a src');
    assert.doesNotMatch(indexHtml, /<style|\sstyle=|\son[a-z]+=/i, 'no inline style or handler');
  });

  it("each of the console's pages, at any depth, answers the same index.html", async () => {
    for (const name of CONSOLE_PAGES) {
      for (const url of [`/${name}`, `/${name}/12`, `/${name}/a%2Fb/`]) {
        const answer = await get(url);
        assert.equal(answer.statusCode, 200, url);
        assert.equal(answer.body, indexHtml, url);
        assert.equal(answer.headers['content-security-policy'], CONSOLE_CSP, url);
      }
    }
  });

  it('leaves the API, the session, the share page, /healthz and unknown paths to their own routes', async () => {
    const api = await get('/api/v1/servers');
    assert.equal(api.statusCode, 401);
    assert.match(String(api.headers['content-type']), /^application\/json/);
    const unknownApi = await get('/api/v1/nope');
    assert.equal(unknownApi.json().error.code, 'not_found');
    const health = await get('/healthz');
    assert.equal(health.json().status, 'ok');
    const share = await get(`/s/${'A'.repeat(43)}`);
    assert.equal(share.statusCode, 404);
    assert.match(String(share.headers['content-security-policy']), /default-src 'none'/, "the share page's own CSP");
    for (const url of ['/console/session', '/nope', '/devicesx', '/favicon.ico']) {
      const answer = await get(url);
      assert.notEqual(answer.body, indexHtml, `${url} is not the console`);
      assert.notEqual(answer.headers['content-security-policy'], CONSOLE_CSP, url);
    }
  });

  it('serves each asset index.html names with its type, cached for a year', async () => {
    for (const path of linkedAssets()) {
      const answer = await get(path);
      assert.equal(answer.statusCode, 200, path);
      assert.equal(answer.headers['cache-control'], YEAR_IMMUTABLE, path);
      assert.equal(answer.headers['x-content-type-options'], 'nosniff', path);
      const type = String(answer.headers['content-type']);
      if (path.endsWith('.js')) assert.equal(type, 'text/javascript; charset=utf-8', path);
      if (path.endsWith('.css')) assert.equal(type, 'text/css; charset=utf-8', path);
      assert.deepEqual(answer.rawPayload, readFileSync(join(BUILT_CONSOLE, path)), path);
    }
  });

  it('compresses as the client accepts: brotli, else gzip, else none; varies on Accept-Encoding', async () => {
    const script = linkedAssets().find((path) => path.endsWith('.js')) ?? '';
    const identity = readFileSync(join(BUILT_CONSOLE, script));
    for (const url of [script, '/']) {
      const plain = url === '/' ? Buffer.from(indexHtml) : identity;
      const br = await get(url, { 'accept-encoding': 'gzip, deflate, br, zstd' });
      assert.equal(br.headers['content-encoding'], 'br', url);
      assert.equal(br.headers.vary, 'accept-encoding', url);
      assert.deepEqual(brotliDecompressSync(br.rawPayload), plain, url);
      assert.ok(br.rawPayload.length < plain.length, url);

      for (const accepted of ['gzip', 'br;q=0, gzip;q=0.8', '*;q=0.5, br;q=0']) {
        const gzip = await get(url, { 'accept-encoding': accepted });
        assert.equal(gzip.headers['content-encoding'], 'gzip', `${url} with ${accepted}`);
        assert.deepEqual(gunzipSync(gzip.rawPayload), plain, url);
      }
      for (const accepted of ['', 'identity', 'gzip;q=0, br;q=0']) {
        const none = await get(url, { 'accept-encoding': accepted });
        assert.equal(none.headers['content-encoding'], undefined, `${url} with '${accepted}'`);
        assert.deepEqual(none.rawPayload, plain, url);
      }
    }
  });

  it('answers 304 to a copy it still has (ETag)', async () => {
    const first = await get('/');
    const etag = String(first.headers.etag);
    assert.match(etag, /^"[\w-]+"$/);
    const again = await get('/', { 'if-none-match': etag });
    assert.equal(again.statusCode, 304);
    assert.equal(again.body, '');
  });

  it('HEAD / answers the headers without the body', async () => {
    const answer = await panel.app.inject({ method: 'HEAD', url: '/' });
    assert.equal(answer.statusCode, 200);
    assert.equal(answer.headers['content-security-policy'], CONSOLE_CSP);
    assert.equal(answer.body, '');
  });

  it('an asset the build does not have is a 404, also for a path that leaves the folder', async () => {
    for (const url of ['/assets/nope.js', '/assets/../index.html', '/assets/%2e%2e/index.html', '/assets/']) {
      const answer = await get(url);
      assert.equal(answer.statusCode, 404, url);
      assert.notEqual(answer.body, indexHtml, url);
    }
  });

  it('keeps every script and style of the build, served compressed, under 200 KB together', async () => {
    const files = builtAssets(/\.(?:js|css)$/);
    assert.ok(files.length >= 2, `a script and a style: ${files.join(', ')}`);
    let brotli = 0;
    let gzip = 0;
    for (const name of files) {
      brotli += (await get(`/assets/${name}`, { 'accept-encoding': 'br' })).rawPayload.length;
      gzip += (await get(`/assets/${name}`, { 'accept-encoding': 'gzip' })).rawPayload.length;
    }
    // Every chunk counts, the chart's loaded later too, and gzip (what a client without brotli gets).
    assert.ok(gzip < BUDGET_BYTES, `gzip: ${gzip} bytes`);
    assert.ok(brotli < gzip, `brotli ${brotli} < gzip ${gzip}`);
  });

  it('names no other host in any built file: nothing loads from a CDN or another site', () => {
    const files = [
      join(BUILT_CONSOLE, 'index.html'),
      ...builtAssets(/\.(?:js|css|svg|html)$/).map((n) => join(ASSETS, n)),
    ];
    const foreign: string[] = [];
    for (const file of files) {
      const text = readFileSync(file, 'utf8');
      for (const [url] of text.matchAll(/(?:[a-z][a-z0-9+.-]*:)?\/\/[a-z0-9-]+(?:\.[a-z0-9-]+)+[^\s"'`)<>]*/gi))
        if (!NAMESPACES.has(url)) foreign.push(`${file}: ${url}`);
    }
    assert.deepEqual(foreign, []);
  });
});

describe('the operator console before it is built', () => {
  it('GET / answers 503 saying how to build it; an asset is a 404', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'vpn-panel-console-'));
    const app = Fastify().withTypeProvider<TypeBoxTypeProvider>();
    app.setErrorHandler((error, request, reply) => sendError(error, request, reply));
    consoleRoutes(app, empty);
    try {
      for (const url of ['/', '/devices/3']) {
        const answer = await app.inject({ method: 'GET', url });
        assert.equal(answer.statusCode, 503, url);
        assert.equal(answer.headers['content-type'], 'text/plain; charset=utf-8');
        assert.equal(answer.headers['cache-control'], 'no-store');
        assert.match(answer.body, /npm run build:console/);
      }
      assert.equal((await app.inject({ method: 'GET', url: '/assets/index.js' })).statusCode, 404);
    } finally {
      await app.close();
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
