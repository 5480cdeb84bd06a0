/**
 * The public share page `/s/{token}` in a real browser: Debian's headless Chromium, driven by
 * playwright-core (its own browser downloads are not used). A panel (SQLite, dry-run driver) gets a
 * server and a device with a data limit and an expiry through the API, and a share link; the page
 * must show the device, a QR code that the browser really loads under the page's strict CSP (and that
 * decodes to the current config), the remaining data and the expiry, offer the `.conf` download, log
 * no console error or CSP violation, follow a move of the device, and answer 404 "not available"
 * once the link is deleted.
 *
 * A screenshot of the live page is written to SCREENSHOT (overwritten by every run, kept after it)
 * so a human can look; its path is printed as a test diagnostic.
 *
 * Chromium must be at /usr/bin/chromium (`apt-get install chromium`). When it is missing the file is
 * skipped, except under CI (`CI` set), where that is a failure; a Chromium that is there but does not
 * start is always a failure. Chromium only ever loads pages from 127.0.0.1: the flags below keep it
 * from calling home, which this machine (and CI) refuses.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import type { components } from '../support/api-types.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { endLab, LabPanel } from '../support/lab-panel.ts';
import type { ApiClient } from '../support/panel.ts';
import { decodeQr, needsTool } from '../support/tools.ts';

type Device = components['schemas']['Device'];

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const SCREENSHOT = join(tmpdir(), 'vpn-panel-share-page.png');
/** Launch, panel start and all steps together stay far below this; a hang fails instead of blocking CI. */
const SUITE_TIMEOUT_MS = 90_000;

const DATA_LIMIT = 1_500_000_000;
const EXPIRES_AT = '2099-06-30T12:00:00Z';

const chromiumMissing = !existsSync(CHROMIUM);
const skip =
  chromiumMissing && process.env.CI === undefined
    ? `needs Debian's Chromium at ${CHROMIUM}: apt-get install chromium`
    : false;

const noZbarimg = needsTool('zbarimg', 'zbar-tools');

/** The data of an openapi-fetch answer, or a failed assertion naming the call and the answer. */
function ok<T>(result: { data?: T; error?: unknown; response: Response }, what: string): T {
  assert.ok(result.data !== undefined, `${what}: ${result.response.status} ${JSON.stringify(result.error)}`);
  return result.data;
}

describe('the public share page in headless Chromium (sqlite)', { skip, timeout: SUITE_TIMEOUT_MS }, () => {
  let db: TestDatabase | undefined;
  let panel: LabPanel | undefined;
  let browser: Browser | undefined;
  let context: BrowserContext;
  let page: Page;
  let api: ApiClient;
  let work: string;
  const servers: number[] = [];
  let device: Device;
  /** The link as the API gave it, and the same path on the panel under test (see `before`). */
  let linkUrl: string;
  let pageUrl: string;
  /** Console errors, uncaught page errors and failed requests of `page`, in order. */
  const problems: string[] = [];

  /** The device's config as the API serves it now (`GET /devices/{id}/config`). */
  async function currentConfig(): Promise<string> {
    const result = await api.GET('/api/v1/devices/{id}/config', {
      params: { path: { id: device.id }, query: { format: 'conf' } },
      parseAs: 'text',
    });
    return ok(result, 'GET /devices/{id}/config');
  }

  /** Clicks the download link; returns the file's name and content. */
  async function download(): Promise<{ name: string; url: string; text: string }> {
    const [file] = await Promise.all([page.waitForEvent('download'), page.locator('a#download').click()]);
    assert.equal(await file.failure(), null, 'the download completed');
    return { name: file.suggestedFilename(), url: file.url(), text: readFileSync(await file.path(), 'utf8') };
  }

  /** What the QR image currently shows, as the browser drew it, decoded by zbarimg. */
  async function decodeShownQr(name: string): Promise<string> {
    const path = join(work, `${name}.png`);
    await page.locator('#qr').screenshot({ path });
    return decodeQr(path);
  }

  before(async () => {
    if (chromiumMissing)
      throw new Error(`${CHROMIUM} is missing; CI must install Debian's chromium (apt-get install chromium)`);
    work = mkdtempSync(join(tmpdir(), 'vpn-panel-share-browser-'));
    try {
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: CHROMIUM_ARGS,
        headless: true,
        timeout: 30_000,
      });
    } catch (error) {
      throw new Error(
        `could not launch ${CHROMIUM} with playwright-core: ${error instanceof Error ? error.message : String(error)}`,
        { cause: error },
      );
    }

    db = await createTestDatabase('sqlite');
    // startPanel picks the port itself and gives no way to know it before the start, so PANEL_URL
    // keeps its default, http://localhost:PORT: the link names this panel's port, and the browser
    // opens the same path on 127.0.0.1, where the panel listens. The page's own links are relative.
    panel = await LabPanel.start(db, 'share-browser', { NODE_DRIVER: 'dry-run', PANEL_URL: undefined });
    api = panel.api;
    for (const name of ['fra-1', 'ams-1'])
      servers.push(ok(await api.POST('/api/v1/servers', { body: { name } }), 'POST /servers').id);
    const first = servers[0];
    assert.ok(first !== undefined);
    device = ok(
      await api.POST('/api/v1/devices', {
        body: { server_id: first, name: "Anna's phone", data_limit: DATA_LIMIT, expires_at: EXPIRES_AT },
      }),
      'POST /devices',
    );
    linkUrl = ok(
      await api.POST('/api/v1/devices/{id}/share', { params: { path: { id: device.id } }, body: {} }),
      'POST /devices/{id}/share',
    ).url;
    const link = new URL(linkUrl);
    assert.equal(link.port, new URL(panel.url).port, `the link ${linkUrl} points at this panel`);
    assert.match(link.pathname, /^\/s\/[A-Za-z0-9_-]{43}$/);
    pageUrl = new URL(link.pathname, panel.url).toString();

    context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console error: ${message.text()} (${message.location().url})`);
    });
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('requestfailed', (request) =>
      problems.push(`request failed: ${request.url()} ${request.failure()?.errorText ?? ''}`),
    );
  });

  after(async () => {
    await browser?.close().catch(() => {});
    const problems = await endLab({ panel, database: db });
    if (work !== undefined) rmSync(work, { recursive: true, force: true });
    assert.deepEqual(problems, [], 'the panel stopped on SIGTERM');
  });

  it('shows the device, its QR code (loaded under the CSP), the remaining data and the expiry; no console error', async (t) => {
    problems.length = 0;
    const response = await page.goto(pageUrl, { waitUntil: 'load' });
    assert.equal(response?.status(), 200);
    assert.match(
      response.headers()['content-security-policy'] ?? '',
      /default-src 'none'/,
      "the CSP under test is the page's own",
    );

    assert.equal(await page.title(), "VPN access: Anna's phone");
    const heading = page.getByRole('heading', { level: 1 });
    assert.equal(await heading.textContent(), "VPN access: Anna's phone");
    assert.ok(await heading.isVisible());

    const qr = page.getByRole('img', { name: 'QR code of the WireGuard configuration' });
    assert.ok(await qr.isVisible(), 'the QR code is visible');
    const shown = await qr.evaluate((img) =>
      img instanceof HTMLImageElement
        ? { complete: img.complete, natural: img.naturalWidth, width: img.getBoundingClientRect().width }
        : undefined,
    );
    assert.ok(shown?.complete && shown.natural > 0, `the QR image loaded: ${JSON.stringify(shown)}`);
    assert.ok(shown.width >= 200, `the QR code is drawn big enough to scan: ${shown.width}px`);

    assert.equal(await page.locator('#remaining').textContent(), '1.50 GB of 1.50 GB this month');
    assert.ok(await page.getByText('Data left').isVisible());
    assert.equal(await page.locator('#expires time').getAttribute('datetime'), device.expires_at);
    assert.equal(await page.locator('#expires').textContent(), '30 June 2099 at 12:00 UTC');
    assert.equal(device.expires_at, '2099-06-30T12:00:00.000Z');
    assert.ok(await page.getByText('Access expires').isVisible());
    assert.equal(await page.locator('#status').textContent(), 'Active');

    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    t.diagnostic(`screenshot of the live page: ${SCREENSHOT}`);
    assert.deepEqual(problems, [], 'no console error, CSP violation, page error or failed request');
  });

  it('the QR code the browser shows decodes to the current config', { skip: noZbarimg }, async () => {
    // zbarimg ends the decoded symbol with a newline of its own, after the config's trailing newline.
    assert.equal(await decodeShownQr('qr-live'), `${await currentConfig()}\n`);
  });

  it('the download link gives the current config as a .conf file', async () => {
    problems.length = 0;
    const link = page.getByRole('link', { name: /^Download .+\.conf$/ });
    assert.ok(await link.isVisible());
    const file = await download();
    assert.equal(file.url, `${pageUrl}/config`, "the link stays on the page's own origin");
    assert.match(file.name, /\.conf$/);
    assert.equal(file.text, await currentConfig());
    assert.equal(file.text, device.config, 'nothing changed since the device was made');
    assert.deepEqual(problems, []);
  });

  it('after a move, the page shows the new config (QR code and download)', async () => {
    problems.length = 0;
    const before = await page.locator('#qr').getAttribute('src');
    const target = servers[1];
    assert.ok(target !== undefined);
    const moved = ok(
      await api.POST('/api/v1/devices/{id}/move', { params: { path: { id: device.id } }, body: { server_id: target } }),
      'POST /devices/{id}/move',
    );
    assert.notEqual(moved.config, device.config);

    assert.equal((await page.reload())?.status(), 200);
    assert.notEqual(await page.locator('#qr').getAttribute('src'), before, 'the QR code changed');
    if (noZbarimg === false) assert.equal(await decodeShownQr('qr-moved'), `${moved.config}\n`);
    assert.equal((await download()).text, moved.config);
    assert.deepEqual(problems, []);
  });

  it('a CSP violation would be seen: the page blocks an image from another source, and Chromium logs it', async () => {
    // The control for the "no console error" checks above: the same listener sees a violation.
    const probe = await context.newPage();
    const errors: string[] = [];
    probe.on('console', (message) => {
      if (message.type() === 'error') errors.push(message.text());
    });
    try {
      await probe.goto(pageUrl);
      const logged = probe.waitForEvent('console', {
        predicate: (message) => message.type() === 'error',
        timeout: 5000,
      });
      await probe.evaluate((src) => {
        const img = document.createElement('img');
        img.src = src;
        document.body.append(img);
      }, new URL('/healthz', pageUrl).toString());
      await logged;
      assert.ok(
        errors.some((text) => text.includes('Content Security Policy')),
        `Chromium logged the violation: ${JSON.stringify(errors)}`,
      );
    } finally {
      await probe.close();
    }
  });

  it('after DELETE /devices/{id}/share the page is gone: 404 "not available", no QR, no download', async () => {
    const deleted = await api.DELETE('/api/v1/devices/{id}/share', { params: { path: { id: device.id } } });
    assert.equal(deleted.response.status, 204);

    problems.length = 0;
    const response = await page.goto(pageUrl);
    assert.equal(response?.status(), 404);
    assert.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'This link is not available');
    assert.equal(await page.title(), 'Link not available');
    assert.equal(await page.locator('#qr').count(), 0);
    assert.equal(await page.locator('a#download').count(), 0);
    assert.equal(
      await page
        .locator('body')
        .textContent()
        .then((text) => text?.includes('Anna') ?? false),
      false,
      'nothing of the device is shown',
    );
    // Chromium reports the 404 of the document itself as a console error; nothing else may appear.
    assert.deepEqual(
      problems.filter(
        (p) =>
          !/^console error: Failed to load resource: the server responded with a status of 404 \(Not Found\)/.test(p),
      ),
      [],
    );

    const config = await page.request.get(`${pageUrl}/config`);
    assert.equal(config.status(), 404, 'the config download is gone too');
  });
});
