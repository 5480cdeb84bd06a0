/**
 * The operator console (issue 14) in Debian's headless Chromium against `vpn-panel serve` (SQLite, dry-run
 * driver), the panel the README starts, serving the build of console/ (`npm run build:console`; scripts/test
 * makes it).
 *
 * Signed out, always: the sign-in page renders under the console's CSP with its labelled fields, a wrong
 * sign-in says so, axe-core finds no serious or critical violation (light and dark), it fits a 390 px phone
 * without sideways scrolling, it is reachable by keyboard, and no page asks another host for anything or
 * breaks the CSP (a control shows a violation would be seen).
 *
 * Signed in, every page is toured with data made through the API, on a desktop and on a phone: axe-core on
 * each, no sideways scrolling, no console error; a server and a device are made in the console, the QR code
 * the browser shows is scanned (zbarimg) and compared with the API's config, the config downloads, an API
 * error is shown at its field, the device page refreshes by itself, and a viewer gets no write control.
 * The browser signs in as console users made with `vpn-panel users add`: sign-in wrong then right,
 * sign-out, the viewer's 403 and the activity naming the console user are checked too.
 *
 * Screenshots of every page go to test-output/console/ (kept, overwritten each run) for a person to look at.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { components } from '../../console/src/api-types.ts';
import { systemClock } from '../../src/domain/clock.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { quietPublisher } from '../../src/services/changes.ts';
import { UsageService } from '../../src/services/usage.ts';
import { openStore } from '../../src/store/open.ts';
import { chromiumSkip, launchChromium } from '../support/chromium.ts';
import { seriousViolations, signInThroughForm } from '../support/console-browser.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { endLab, LabPanel, need, ok } from '../support/lab-panel.ts';
import { ROOT } from '../support/panel.ts';
import { decodeQr, needsTool } from '../support/tools.ts';

type Device = components['schemas']['Device'];

const CLI = join(ROOT, 'bin', 'vpn-panel.js');
const BUILT = join(ROOT, 'dist', 'console', 'index.html');
const SCREENSHOTS = join(ROOT, 'test-output', 'console');
const DESKTOP = { width: 1280, height: 900 };
const PHONE = { width: 390, height: 844 };
/** Launch, panel start, two tours and the checks stay far below this; a hang fails instead of blocking CI. */
const SUITE_TIMEOUT_MS = 240_000;
const NAVIGATION = ['Overview', 'Servers', 'Devices', 'Groups', 'Plans', 'Webhooks', 'API keys', 'Activity', 'Users'];
const ADMIN = 'console-admin';
const VIEWER = 'console-viewer';
const ADMIN_PASSWORD = 'staple the battery, correct horse';
const VIEWER_PASSWORD = 'viewer password 12345';
/** The names of every control that changes something: none of them is drawn for a viewer. */
const WRITE_CONTROLS = new RegExp(
  '^(New server|New device|New webhook|Create.*|Save.*|Delete.*|Disable.*|Enable.*|Reset usage|Move|Ping|' +
    'Make share link|Replace share link|Revoke share link|Set expiry|New plan|Change .*|Renew|Top up)$',
);

const noZbarimg = needsTool('zbarimg', 'zbar-tools');

/** What a page did wrong: console errors, page errors, failed requests, other hosts, CSP violations. */
class Problems {
  readonly list: string[] = [];
  readonly #origin: string;

  constructor(origin: string) {
    this.#origin = origin;
  }

  /** Watches every page of `context`; a CSP violation is reported by the page itself (an init script). */
  async watch(context: BrowserContext): Promise<void> {
    await context.addInitScript(() => {
      document.addEventListener('securitypolicyviolation', (event) =>
        console.error(`CSP violation: ${event.violatedDirective} blocked ${event.blockedURI}`),
      );
    });
    context.on('request', (request) => {
      const url = new URL(request.url());
      if (url.protocol !== 'data:' && url.protocol !== 'blob:' && url.origin !== this.#origin)
        this.list.push(`request to another host: ${request.url()}`);
    });
    context.on('requestfailed', (request) => {
      // A download's navigation is cancelled by Chromium once the file is taken: not a failure.
      if (request.failure()?.errorText !== 'net::ERR_ABORTED')
        this.list.push(`request failed: ${request.url()} ${request.failure()?.errorText ?? ''}`);
    });
    context.on('console', (message) => {
      if (message.type() !== 'error') return;
      // Chromium logs every 4xx as a console error: signed out, the session asked for is a 401 (404 before
      // the session backend), and a device without a share link is a 404. Anything else counts.
      const path = new URL(message.location().url || this.#origin).pathname;
      const expected =
        message.text().startsWith('Failed to load resource') &&
        (path === '/console/session' || /^\/api\/v1\/devices\/\d+\/share$/.test(path));
      if (!expected) this.list.push(`console error: ${message.text()} (${message.location().url})`);
    });
    context.on('weberror', (error) => this.list.push(`page error: ${error.error().message}`));
  }

  /** Asserts none since the last call, naming them. */
  none(where: string): void {
    const seen = this.list.splice(0);
    assert.deepEqual(seen, [], `${where}: no console error, CSP violation, failed request or other host`);
  }
}

async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

/** How far the page reaches past the viewport's right edge (0: no sideways scrolling). */
function overflow(page: Page): Promise<number> {
  return page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
}

/** Runs `vpn-panel ARGS` with the panel's environment and `input` on standard input. */
function cliWithInput(panel: LabPanel, args: readonly string[], input: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...panel.process.env }, cwd: ROOT });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(output) : reject(new Error(`vpn-panel ${args.join(' ')}: ${code}\n${output}`)),
    );
    child.stdin.end(input);
  });
}

describe('the operator console in headless Chromium (sqlite)', {
  skip: chromiumSkip,
  timeout: SUITE_TIMEOUT_MS,
}, () => {
  let db: TestDatabase | undefined;
  let panel: LabPanel | undefined;
  let browser: Browser | undefined;
  let origin: string;
  let problems: Problems;

  /** A new browser context at `viewport` (light unless asked), watched for problems. */
  async function newContext(
    viewport: { width: number; height: number },
    colorScheme: 'light' | 'dark' = 'light',
  ): Promise<BrowserContext> {
    const context = await need(browser, 'a browser').newContext({ viewport, colorScheme, acceptDownloads: true });
    await problems.watch(context);
    return context;
  }

  /** The heading of the page shown, once it is there. */
  async function heading(page: Page, name: string | RegExp): Promise<void> {
    await page.getByRole('heading', { level: 1, name }).waitFor({ timeout: 15_000 });
  }

  before(async () => {
    assert.ok(existsSync(BUILT), `no console build at ${BUILT}: run npm run build:console`);
    mkdirSync(SCREENSHOTS, { recursive: true });
    browser = await launchChromium();
    db = await createTestDatabase('sqlite');
    // A webhook to a closed local port: its deliveries fail at once, for the overview to count.
    panel = await LabPanel.start(db, 'console-browser', { NODE_DRIVER: 'dry-run', WEBHOOK_ALLOW_PRIVATE: 'true' });
    origin = new URL(panel.url).origin;
    problems = new Problems(origin);
  });

  after(async () => {
    await browser?.close().catch(() => {});
    const left = await endLab({ panel, database: db });
    assert.deepEqual(left, [], 'the panel stopped on SIGTERM');
  });

  describe('signed out', () => {
    let context: BrowserContext;
    let page: Page;

    before(async () => {
      context = await newContext(DESKTOP);
      page = await context.newPage();
    });

    after(() => context?.close());

    it('shows the sign-in form (User, Password, Sign in) under the CSP, with nothing from another host', async () => {
      const response = await page.goto(`${origin}/`);
      assert.equal(response?.status(), 200);
      const csp = response.headers()['content-security-policy'] ?? '';
      assert.match(csp, /script-src 'self'(;|$)/);
      assert.match(csp, /frame-ancestors 'none'/);
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
      await page.getByRole('button', { name: 'Sign in' }).waitFor();
      assert.ok(await page.getByLabel('User', { exact: true }).isVisible());
      assert.equal(await page.getByLabel('Password', { exact: true }).getAttribute('type'), 'password');
      assert.equal(await page.title(), 'Sign in · vpn-panel');
      await screenshot(page, 'sign-in');
      problems.none('the sign-in page');
    });

    it('says a wrong sign-in was wrong, and stays on the form', async () => {
      await page.getByLabel('User', { exact: true }).fill('nobody');
      await page.getByLabel('Password', { exact: true }).fill('not the password at all');
      await page.getByRole('button', { name: 'Sign in' }).click();
      const alert = page.getByRole('alert').filter({ hasText: /\S/ });
      await alert.waitFor();
      assert.match((await alert.textContent()) ?? '', /wrong user name or password/i);
      assert.ok(await page.getByRole('button', { name: 'Sign in' }).isVisible());
      await screenshot(page, 'sign-in-wrong');
      problems.none('a wrong sign-in');
    });

    it('has no serious or critical axe-core violation, light or dark', async () => {
      for (const colorScheme of ['light', 'dark'] as const) {
        await page.emulateMedia({ colorScheme });
        await page.reload();
        await page.getByRole('button', { name: 'Sign in' }).waitFor();
        assert.deepEqual(await seriousViolations(page), [], colorScheme);
        await screenshot(page, `sign-in-${colorScheme}`);
      }
      await page.emulateMedia({ colorScheme: 'light' });
      problems.none('axe');
    });

    it('is usable by keyboard: Tab goes to User, Password, Sign in', async () => {
      await page.reload();
      await page.getByRole('button', { name: 'Sign in' }).waitFor();
      const focused = async () =>
        page.evaluate(() => {
          const element = document.activeElement;
          if (element instanceof HTMLInputElement) return element.labels?.[0]?.textContent ?? element.name;
          return element?.textContent ?? '';
        });
      await page.evaluate(() => document.activeElement instanceof HTMLElement && document.activeElement.blur());
      const order: string[] = [];
      for (let i = 0; i < 3; i++) {
        await page.keyboard.press('Tab');
        order.push(await focused());
      }
      assert.deepEqual(order, ['User', 'Password', 'Sign in']);
    });

    it('fits a 390 px phone without sideways scrolling', async () => {
      const phone = await newContext(PHONE);
      try {
        const small = await phone.newPage();
        await small.goto(`${origin}/devices/1`);
        await small.getByRole('button', { name: 'Sign in' }).waitFor();
        assert.equal(await overflow(small), 0);
        const box = await small.getByRole('button', { name: 'Sign in' }).boundingBox();
        assert.ok(box !== null && box.x >= 0 && box.x + box.width <= PHONE.width, JSON.stringify(box));
        await screenshot(small, 'sign-in-phone');
      } finally {
        await phone.close();
      }
      problems.none('the phone');
    });

    it('a CSP violation would be seen: an inline script is refused and reported', async () => {
      // The control for every "no CSP violation" above: the same watcher sees one.
      const reported = page.waitForEvent('console', { predicate: (message) => /CSP violation/.test(message.text()) });
      await page.evaluate(() => {
        const script = document.createElement('script');
        script.textContent = 'document.title = "inline ran"';
        document.body.append(script);
      });
      await reported;
      assert.notEqual(await page.title(), 'inline ran');
      const seen = problems.list.splice(0);
      assert.ok(
        seen.some((line) => /CSP violation: script-src/.test(line)),
        `the violation was reported: ${JSON.stringify(seen)}`,
      );
    });
  });

  describe('signed in', () => {
    let admin: BrowserContext;
    let page: Page;
    let serverId: number;
    let device: Device;

    /** Signs `context` in as `user` through the form. */
    async function signIn(context: BrowserContext, user: string, password: string) {
      const signing = await context.newPage();
      await signInThroughForm(signing, origin, user, password);
      return signing;
    }

    before(async () => {
      const lab = need(panel, 'the panel');
      await cliWithInput(lab, ['users', 'add', '--name', ADMIN, '--role', 'admin'], `${ADMIN_PASSWORD}\n`);
      await cliWithInput(lab, ['users', 'add', '--name', VIEWER, '--role', 'viewer'], `${VIEWER_PASSWORD}\n`);
      const api = lab.api;
      serverId = ok(
        await api.POST('/api/v1/servers', { body: { name: 'fra-1', country: 'DE', city: 'Frankfurt' } }),
        'POST /servers',
      ).id;
      device = ok(
        await api.POST('/api/v1/devices', {
          body: { server_id: serverId, name: "Anna's phone", external_id: 'customer-7', data_limit: 50_000_000_000 },
        }),
        'POST /devices',
      );
      const plan = ok(await api.POST('/api/v1/plans', { body: { name: 'Family', max_devices: 5 } }), 'POST /plans');
      ok(
        await api.POST('/api/v1/devices', {
          body: { server_id: serverId, name: 'Anna laptop', external_id: 'customer-7', plan_id: plan.id },
        }),
        'POST /devices',
      );
      ok(
        await api.POST('/api/v1/webhooks', {
          body: { url: 'http://127.0.0.1:9/hook', events: ['device.created'], description: 'shop' },
        }),
        'POST /webhooks',
      );
      admin = await newContext(DESKTOP);
    });

    after(() => admin?.close());

    it('signs in: a wrong password is refused, the right one opens the overview', async () => {
      page = await admin.newPage();
      await page.goto(`${origin}/`);
      await page.getByLabel('User', { exact: true }).fill(ADMIN);
      await page.getByLabel('Password', { exact: true }).fill('wrong password, long enough');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByText(/wrong user name or password/i).waitFor();
      await page.getByLabel('Password', { exact: true }).fill(ADMIN_PASSWORD);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await heading(page, 'Overview');
      problems.none('signing in');
    });

    it('shows the navigation, exactly, with Users for an admin', async () => {
      const links = await page.getByRole('navigation', { name: 'Main' }).getByRole('link').allTextContents();
      assert.deepEqual(links, NAVIGATION);
      assert.ok(await page.getByRole('button', { name: 'Sign out' }).isVisible());
      problems.none('the overview');
    });

    /** Every page, reached as a person would (navigation, then a link), with what each must show. */
    async function tour(on: Page, size: string): Promise<void> {
      const nav = on.getByRole('navigation', { name: 'Main' });
      const visit = async (name: string, title: string | RegExp, shows: string | RegExp) => {
        await heading(on, title);
        await on.getByText(shows).first().waitFor({ timeout: 15_000 });
        assert.equal(await on.getByText(/^Could not (load|refresh)/).count(), 0, `${name} loaded`);
        assert.deepEqual(await seriousViolations(on), [], `axe on ${name} (${size})`);
        assert.equal(await overflow(on), 0, `${name} does not scroll sideways (${size})`);
        await screenshot(on, size === 'desktop' ? name : `${name}-${size}`);
        problems.none(`${name} (${size})`);
      };
      await on.goto(`${origin}/`);
      await visit('overview', 'Overview', 'fra-1');
      await nav.getByRole('link', { name: 'Servers' }).click();
      await visit('servers', 'Servers', 'Frankfurt, DE');
      await on.getByRole('link', { name: 'fra-1' }).click();
      await visit('server', 'fra-1', "Anna's phone");
      await nav.getByRole('link', { name: 'Devices' }).click();
      await visit('devices', 'Devices', 'Anna laptop');
      await on.getByRole('link', { name: "Anna's phone" }).click();
      await visit('device', "Anna's phone", '50 GB a month');
      await on.getByRole('img', { name: /QR/ }).waitFor();
      await nav.getByRole('link', { name: 'Groups' }).click();
      await visit('groups', 'Groups', 'external ID');
      await on.getByLabel('External ID').fill('customer-7');
      await on.getByRole('button', { name: 'Open group' }).click();
      // The slots load apart from the group; the page is checked once they are drawn.
      await on.getByText('2 / 5 used').waitFor({ timeout: 15_000 });
      await visit('group', 'Group customer-7', 'Anna laptop');
      await nav.getByRole('link', { name: 'Plans' }).click();
      await visit('plans', 'Plans', 'at most 5 devices per customer');
      await nav.getByRole('link', { name: 'Webhooks' }).click();
      await visit('webhooks', 'Webhooks', 'http://127.0.0.1:9/hook');
      await on.getByRole('link', { name: 'http://127.0.0.1:9/hook' }).click();
      await visit('webhook', 'Webhook', 'Deliveries');
      await nav.getByRole('link', { name: 'API keys' }).click();
      await visit('api-keys', 'API keys', /let programs/);
      await nav.getByRole('link', { name: 'Activity' }).click();
      await visit('activity', 'Activity', 'Anna laptop');
      const users = nav.getByRole('link', { name: 'Users' });
      if ((await users.count()) > 0) {
        await users.click();
        await visit('users', 'Users', VIEWER);
      }
    }

    it('every page renders with the data made through the API: axe clean, no problem (desktop)', async () => {
      await tour(page, 'desktop');
    });

    it('every page fits a 390 px phone without sideways scrolling (phone, dark theme)', async () => {
      const phone = await newContext(PHONE, 'dark');
      try {
        const small = await signIn(phone, ADMIN, ADMIN_PASSWORD);
        await tour(small, 'phone');
      } finally {
        await phone.close();
      }
    });

    it('shows times in the browser zone, with a zone named on hover', async () => {
      await page.goto(`${origin}/devices/${device.id}`);
      const created = page.locator('time').filter({ hasText: /\d/ }).first();
      await created.waitFor();
      assert.match((await created.getAttribute('title')) ?? '', /\(.+\)$/);
      assert.match((await created.getAttribute('datetime')) ?? '', /^\d{4}-\d\d-\d\dT/);
    });

    it('the QR code the browser shows decodes to the API config; the download is the same config', async (t) => {
      await page.goto(`${origin}/devices/${device.id}`);
      const qr = page.getByRole('img', { name: /QR/ });
      await qr.waitFor();
      const config = ok(
        await need(panel, 'the panel').api.GET('/api/v1/devices/{id}/config', {
          params: { path: { id: device.id } },
          parseAs: 'text',
        }),
        'GET /devices/{id}/config',
      );
      if (noZbarimg === false) {
        const work = mkdtempSync(join(tmpdir(), 'vpn-panel-console-qr-'));
        try {
          const shot = join(work, 'qr.png');
          await qr.screenshot({ path: shot });
          // zbarimg ends the decoded symbol with a newline of its own, after the config's trailing newline.
          assert.equal(decodeQr(shot), `${config}\n`);
        } finally {
          rmSync(work, { recursive: true, force: true });
        }
      } else t.diagnostic(`QR not scanned: ${noZbarimg}`);
      const link = page.getByRole('link', { name: 'Download config' });
      assert.equal(await link.getAttribute('download'), '');
      const [file] = await Promise.all([page.waitForEvent('download'), link.click()]);
      assert.equal(readFileSync(await file.path(), 'utf8'), config);
      assert.match(file.suggestedFilename(), /\.conf$/);
      problems.none('the QR code and the download');
    });

    it('refreshes the device page by itself (online state), without a reload', async () => {
      await page.goto(`${origin}/devices/${device.id}`);
      await heading(page, "Anna's phone");
      await page.waitForRequest((request) => request.url().endsWith(`/api/v1/devices/${device.id}`), {
        timeout: 15_000,
      });
    });

    it('makes a server and a device in the console', async () => {
      await page.goto(`${origin}/servers`);
      await page.getByRole('link', { name: 'New server' }).click();
      await heading(page, 'New server');
      await page.getByLabel('Name', { exact: true }).fill('ams-1');
      const [post] = await Promise.all([
        page.waitForRequest((request) => request.method() === 'POST' && request.url().endsWith('/api/v1/servers')),
        page.getByRole('button', { name: 'Create server' }).click(),
      ]);
      assert.equal(post.headers()['x-console-request'], '1', 'a write of the console says so');
      assert.equal(post.headers().authorization, undefined, 'the console itself sends no key');
      await heading(page, 'ams-1');
      const servers = ok(await need(panel, 'the panel').api.GET('/api/v1/servers'), 'GET /servers').data;
      const made = servers.find((server) => server.name === 'ams-1');
      assert.ok(made !== undefined && made.status === 'running', JSON.stringify(servers));

      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Devices' }).click();
      await heading(page, 'Devices');
      await page.getByRole('button', { name: 'New device' }).click();
      const form = page.getByRole('form', { name: 'New device' });
      // The form takes the focus: typing goes to its first field, Name (once it has it: the form draws first).
      const nameField = await form.getByLabel('Name', { exact: true }).elementHandle();
      await page.waitForFunction((field) => document.activeElement === field, nameField);
      await page.keyboard.type('Console laptop');
      await form.getByLabel('Server', { exact: true }).selectOption({ label: 'ams-1 (0/253)' });
      await screenshot(page, 'new-device');
      await form.getByRole('button', { name: 'Create' }).click();
      await heading(page, 'Console laptop');
      const list = ok(
        await need(panel, 'the panel').api.GET('/api/v1/devices', { params: { query: { server_id: made.id } } }),
        'GET /devices',
      ).data;
      assert.deepEqual(
        list.map((one) => one.name),
        ['Console laptop'],
      );
      problems.none('making a server and a device');
    });

    it("shows the API's error next to the field it names", async () => {
      await page.goto(`${origin}/devices?new=1`);
      const form = page.getByRole('form', { name: 'New device' });
      await form.getByLabel('Name', { exact: true }).fill('Bad limit');
      await form.getByLabel('Data limit (GB)').fill('lots');
      await form.getByRole('button', { name: 'Create' }).click();
      const field = form.locator('.field', { has: page.getByLabel('Data limit (GB)') });
      await field.locator('.field-error').waitFor();
      assert.equal(await form.getByLabel('Data limit (GB)').getAttribute('aria-invalid'), 'true');
      assert.equal(await form.locator('.field-error').count(), 1, 'only the named field shows an error');
      await screenshot(page, 'field-error');
      // The refused POST is a 422, which Chromium logs: that line, and only it.
      const seen = problems.list.splice(0);
      assert.deepEqual(
        seen.filter((line) => !line.includes(`(${origin}/api/v1/devices)`)),
        [],
        'no other problem',
      );
    });

    it('makes an API key with chosen scopes, shown once, that works', async () => {
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'API keys' }).click();
      await page.getByRole('button', { name: 'New key' }).click();
      await page.getByLabel('Name', { exact: true }).fill('console-made');
      await page.getByRole('checkbox', { name: 'servers:read' }).check();
      await page.getByRole('button', { name: 'Create key' }).click();
      const key = await page.getByLabel('API key', { exact: true }).inputValue();
      assert.match(key, /^vpnk_/);
      assert.deepEqual(await seriousViolations(page), [], 'axe on the key shown once');
      await screenshot(page, 'api-key-made');
      const read = await fetch(`${origin}/api/v1/servers`, { headers: { authorization: `Bearer ${key}` } });
      assert.equal(read.status, 200);
      const write = await fetch(`${origin}/api/v1/servers`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'nope' }),
      });
      assert.equal(write.status, 403);
      // Done: the key is gone from the page for good; the list names it, and Revoke stops it at once.
      await page.getByRole('button', { name: 'Done' }).click();
      assert.equal(await page.getByLabel('API key', { exact: true }).count(), 0);
      await page.getByRole('cell', { name: 'console-made' }).waitFor();
      const row = page.getByRole('row').filter({ hasText: 'console-made' });
      await row.getByRole('button', { name: 'Revoke' }).click();
      await row.getByRole('button', { name: 'Revoke console-made' }).click();
      await row.getByText(/^Revoked/).waitFor();
      const revoked = await fetch(`${origin}/api/v1/servers`, { headers: { authorization: `Bearer ${key}` } });
      assert.equal(revoked.status, 401, 'a revoked key stops at once');
      problems.none('making and revoking a key');
    });

    it('adds a console user (the refused password shown at its field), makes them an admin, removes them', async () => {
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Users' }).click();
      await heading(page, 'Users');
      await page.getByRole('button', { name: 'New user' }).click();
      const form = page.getByRole('form', { name: 'New user' });
      await form.getByLabel('Name', { exact: true }).fill('console-made-user');
      await form.getByLabel('Password', { exact: true }).fill('short');
      await form.getByRole('button', { name: 'Create user' }).click();
      // The API's refusal is shown at the password field.
      await form
        .locator('.field', { has: page.getByLabel('Password', { exact: true }) })
        .locator('.field-error')
        .waitFor();
      await form.getByLabel('Password', { exact: true }).fill('a long enough password');
      await form.getByRole('button', { name: 'Create user' }).click();
      const row = page.getByRole('row').filter({ hasText: 'console-made-user' });
      await row.waitFor();
      await row.getByRole('button', { name: /^Make admin/ }).click();
      await row.getByRole('cell', { name: 'admin', exact: true }).waitFor();
      await row.getByRole('button', { name: 'New password for console-made-user' }).click();
      await row.getByLabel('New password for console-made-user').fill('another long password');
      await row.getByRole('button', { name: 'Save password' }).click();
      await row.getByRole('button', { name: 'New password for console-made-user' }).waitFor();
      const log = await page.request.get(`${origin}/api/v1/activity?resource=console_user&limit=200`);
      const actions = ((await log.json()) as { data: { action: string; summary: string }[] }).data;
      assert.ok(
        actions.some((one) => one.action === 'console_user.password_changed' && /console-made-user/.test(one.summary)),
        'the new password is in the activity log',
      );
      await screenshot(page, 'users-changed');
      await row.getByRole('button', { name: 'Remove console-made-user' }).click();
      await row.getByRole('button', { name: 'Yes, remove console-made-user' }).click();
      await row.waitFor({ state: 'detached' });
      const users = await page.request.get(`${origin}/api/v1/console-users`);
      assert.equal(users.status(), 200);
      assert.deepEqual(
        ((await users.json()) as { data: { name: string }[] }).data.map((user) => user.name),
        [ADMIN, VIEWER],
      );
      // Chromium logs the refused password (a 422) as a console error: that line, and only it.
      const seen = problems.list.splice(0);
      assert.deepEqual(
        seen.filter((line) => !line.includes(`(${origin}/api/v1/console-users)`)),
        [],
        'no other problem',
      );
    });

    it('the activity names the console user who made the server', async () => {
      await page.goto(`${origin}/activity?resource=server`);
      await heading(page, 'Activity');
      await page.getByText(`via console user ${ADMIN}`).first().waitFor();
      await page.getByText('server.created').first().waitFor();
      // The filters, as the CLI's: who, then the resource and its id.
      await page.getByLabel('Who').fill(`via console user ${ADMIN}`);
      await page.getByRole('button', { name: 'Filter' }).click();
      await page.waitForURL(/actor=/);
      // The URL changes before the filtered page arrives: wait until the rows are the filtered ones.
      await page.waitForFunction((actor) => {
        const cells = [...document.querySelectorAll('tr td:nth-child(2)')].map((cell) => cell.textContent);
        return cells.length > 0 && cells.every((cell) => cell === actor);
      }, `via console user ${ADMIN}`);
      const actors = await page.getByRole('row').locator('td:nth-child(2)').allTextContents();
      assert.ok(actors.length > 0 && actors.every((actor) => actor === `via console user ${ADMIN}`), `${actors}`);
      await screenshot(page, 'activity-filtered');
      problems.none('the activity filters');
    });

    it('a viewer sees the pages without any control that changes something', async () => {
      const viewer = await newContext(DESKTOP);
      try {
        const seen = await signIn(viewer, VIEWER, VIEWER_PASSWORD);
        const links = await seen.getByRole('navigation', { name: 'Main' }).getByRole('link').allTextContents();
        assert.deepEqual(
          links,
          NAVIGATION.filter((name) => name !== 'Webhooks' && name !== 'API keys' && name !== 'Users'),
          'no Webhooks, API keys nor Users for a viewer',
        );
        for (const [path, title, shows] of [
          ['/servers', 'Servers', 'fra-1'],
          [`/servers/${serverId}`, 'fra-1', "Anna's phone"],
          ['/devices', 'Devices', 'Anna laptop'],
          [`/devices/${device.id}`, "Anna's phone", 'Share link'],
          ['/groups/customer-7', 'Group customer-7', 'Anna laptop'],
          ['/plans', 'Plans', 'Family'],
        ]) {
          await seen.goto(`${origin}${path}`);
          await heading(seen, title ?? '');
          await seen
            .getByText(shows ?? '')
            .first()
            .waitFor();
          const controls = [
            ...(await seen.getByRole('button').allTextContents()),
            ...(await seen.getByRole('link').allTextContents()),
          ].filter((name) => WRITE_CONTROLS.test(name.trim()));
          assert.deepEqual(controls, [], `no write control on ${path}`);
        }
        await screenshot(seen, 'viewer-device');
        const refused = await seen.request.post(`${origin}/api/v1/servers`, {
          headers: { 'x-console-request': '1' },
          data: { name: 'viewer-made' },
        });
        assert.equal(refused.status(), 403, 'the API refuses a viewer');
        // Webhooks need webhooks:write even to list (docs/api.md "Keys and scopes"), which a viewer lacks
        // (docs/operating.md "Operator console").
        const webhooks = await seen.request.get(`${origin}/api/v1/webhooks`);
        assert.equal(webhooks.status(), 403, 'a viewer does not read webhooks');
        for (const path of ['/api/v1/api-keys', '/api/v1/console-users']) {
          const refusedAdmin = await seen.request.get(`${origin}${path}`);
          assert.equal(refusedAdmin.status(), 403, `a viewer does not reach ${path}`);
        }
        await seen.goto(`${origin}/api-keys`);
        await seen.getByText('Only an admin manages API keys.').waitFor();
        problems.none('the viewer');
      } finally {
        await viewer.close();
      }
    });

    it('an admin who makes themself a viewer sees the viewer console at once, without a reload', async () => {
      const name = 'demotes-self';
      const password = 'a long enough password';
      const made = await page.request.post(`${origin}/api/v1/console-users`, {
        headers: { 'x-console-request': '1' },
        data: { name, role: 'admin', password },
      });
      assert.equal(made.status(), 201);
      const { id } = (await made.json()) as { id: number };
      const context = await newContext(DESKTOP);
      try {
        const own = await signIn(context, name, password);
        const nav = own.getByRole('navigation', { name: 'Main' });
        await nav.getByRole('link', { name: 'Users' }).click();
        await heading(own, 'Users');
        await own
          .getByRole('row')
          .filter({ hasText: `${name} (you)` })
          .getByRole('button', { name: /^Make viewer/ })
          .click();
        await nav.getByRole('link', { name: 'Users' }).waitFor({ state: 'detached' });
        assert.deepEqual(
          await nav.getByRole('link').allTextContents(),
          NAVIGATION.filter((link) => link !== 'Webhooks' && link !== 'API keys' && link !== 'Users'),
        );
        // The page's reload after the change was refused (403): that line, and only it.
        const seen = problems.list.splice(0);
        assert.deepEqual(
          seen.filter((line) => !line.includes(`(${origin}/api/v1/console-users)`)),
          [],
          'no other problem',
        );
      } finally {
        await context.close();
        await page.request.delete(`${origin}/api/v1/console-users/${id}`, { headers: { 'x-console-request': '1' } });
      }
    });

    it('pages a group of over 50 devices to its last, with its whole count; group actions take them all', async () => {
      const api = need(panel, 'the panel').api;
      const GROUP = 'fleet-9';
      const made: Device[] = [];
      // Ten at a time: the ids, not the order of the answers, say which page a device is on.
      for (let first = 1; first <= 120; first += 10) {
        const names = Array.from({ length: 10 }, (_, i) => `${GROUP} device ${String(first + i).padStart(3, '0')}`);
        const batch = await Promise.all(
          names.map(async (name) =>
            ok(
              await api.POST('/api/v1/devices', { body: { server_id: serverId, name, external_id: GROUP } }),
              `POST /devices ${name}`,
            ),
          ),
        );
        made.push(...batch);
      }
      made.sort((a, b) => a.id - b.id);
      const pages = [made.slice(0, 50), made.slice(50, 100), made.slice(100)];
      const cursorOf = (index: number) => (index === 0 ? null : String(pages[index - 1]?.at(-1)?.id));

      const list = page.getByRole('table', { name: 'Devices' });
      const pager = page.getByRole('navigation', { name: 'Pages' });
      /** Waits for page `index` of the group (its first device drawn), then checks every row and the URL. */
      const shows = async (index: number) => {
        const expected = (pages[index] ?? []).map((one) => one.name);
        await list.getByRole('link', { name: expected[0], exact: true }).waitFor({ timeout: 15_000 });
        assert.deepEqual(
          await list.locator('tbody tr td:first-child a').allInnerTexts(),
          expected,
          `page ${index + 1}`,
        );
        assert.equal(new URL(page.url()).searchParams.get('after'), cursorOf(index), `the cursor of page ${index + 1}`);
        await page.getByText(`This page shows ${expected.length} of the group's 120 devices, oldest first.`).waitFor();
      };
      await page.goto(`${origin}/groups/${GROUP}`);
      await heading(page, `Group ${GROUP}`);
      await shows(0);
      assert.equal(await page.locator('dl.facts dd').first().textContent(), '120');
      assert.ok(await pager.getByRole('button', { name: 'Previous page' }).isDisabled(), 'no page before the first');
      await pager.getByRole('button', { name: 'Next page' }).click();
      await shows(1);
      await pager.getByRole('button', { name: 'Next page' }).click();
      await shows(2);
      assert.ok(await pager.getByRole('button', { name: 'Next page' }).isDisabled(), 'no page after the last');
      assert.deepEqual(await seriousViolations(page), [], 'axe on the last page of the group');
      await screenshot(page, 'group-last-page');
      // Previous goes back one page at a time, not to the first.
      await pager.getByRole('button', { name: 'Previous page' }).click();
      await shows(1);
      // The cursor is in the URL: the page loads where it was.
      await page.reload();
      await shows(1);

      await page
        .getByText('These change all 120 devices of fleet-9, not only the page of devices shown below.')
        .waitFor();
      await page.getByRole('button', { name: 'Disable all' }).click();
      await page.getByRole('status').filter({ hasText: 'All disabled.' }).waitFor();
      for (const one of [made[0], made.at(-1)]) {
        const read = ok(
          await api.GET('/api/v1/devices/{id}', { params: { path: { id: one?.id ?? 0 } } }),
          'GET /devices/{id}',
        );
        assert.equal(read.status, 'disabled', `${read.name}, on a page not shown, is disabled too`);
      }
      problems.none('the paged group');

      // The Devices page pages the same way: Previous goes back one page, not to the first.
      await page.goto(`${origin}/devices?search=${GROUP}`);
      await heading(page, 'Devices');
      const firstOf = (index: number) =>
        list.getByRole('link', { name: pages[index]?.[0]?.name ?? '', exact: true }).waitFor({ timeout: 15_000 });
      await firstOf(0);
      await pager.getByRole('button', { name: 'Next page' }).click();
      await firstOf(1);
      await pager.getByRole('button', { name: 'Next page' }).click();
      await firstOf(2);
      await pager.getByRole('button', { name: 'Previous page' }).click();
      await firstOf(1);
      problems.none('the paged devices');

      const phone = await newContext(PHONE);
      try {
        const small = await signIn(phone, ADMIN, ADMIN_PASSWORD);
        await small.goto(`${origin}/groups/${GROUP}?after=${cursorOf(2)}`);
        const last = pages[2]?.at(-1)?.name ?? '';
        await small.getByRole('link', { name: last, exact: true }).waitFor({ timeout: 15_000 });
        assert.ok(await small.getByRole('button', { name: 'Next page' }).isDisabled(), 'the last page on a phone');
        assert.deepEqual(await seriousViolations(small), [], 'axe on the paged group (phone)');
        assert.equal(await overflow(small), 0, 'the paged group does not scroll sideways (phone)');
        await screenshot(small, 'group-last-page-phone');
      } finally {
        await phone.close();
      }
      problems.none('the paged group on a phone');
    });

    it('signs out: the form is back and the API no longer answers the browser', async () => {
      await page.goto(`${origin}/`);
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('button', { name: 'Sign in' }).waitFor();
      const after = await page.request.get(`${origin}/api/v1/servers`);
      assert.equal(after.status(), 401);
    });
  });
});

/**
 * The overview's fleet usage (GET /usage: tiles for today and this month, a 30-day chart with its table, the
 * panel zone on hover) with bytes booked as a node's batches are, and the Devices page's search box (name or
 * external ID, any case, kept in the URL, combined with the status filter), in a panel of their own.
 */
describe('the overview usage and the device search in headless Chromium (sqlite)', {
  skip: chromiumSkip,
  timeout: SUITE_TIMEOUT_MS,
}, () => {
  const ZONE = 'Asia/Tokyo';
  const GB = 1_000_000_000;
  let db: TestDatabase | undefined;
  let panel: LabPanel | undefined;
  let browser: Browser | undefined;
  let context: BrowserContext | undefined;
  let origin: string;
  let problems: Problems;
  const ids = new Map<string, number>();

  before(async () => {
    assert.ok(existsSync(BUILT), `no console build at ${BUILT}: run npm run build:console`);
    mkdirSync(SCREENSHOTS, { recursive: true });
    browser = await launchChromium();
    db = await createTestDatabase('sqlite');
    panel = await LabPanel.start(db, 'console-usage', { NODE_DRIVER: 'dry-run', PANEL_TIMEZONE: ZONE });
    origin = new URL(panel.url).origin;
    problems = new Problems(origin);
    await cliWithInput(panel, ['users', 'add', '--name', ADMIN, '--role', 'admin'], `${ADMIN_PASSWORD}\n`);
    const api = panel.api;
    const serverId = ok(await api.POST('/api/v1/servers', { body: { name: 'tyo-1', country: 'JP' } }), 'server').id;
    for (const [name, externalId] of [
      ['Zoe tablet', 'shop-42'],
      ['zoe phone', undefined],
      ['router 100%', 'office'],
    ] as const) {
      const body = { server_id: serverId, name, external_id: externalId };
      ids.set(name, ok(await api.POST('/api/v1/devices', { body }), `POST /devices ${name}`).id);
    }
    // Bytes booked as NodeMonitor books a node's batches: today 3 GB down and 1 GB up, two days ago 2 GB.
    const store = openStore({ databaseUrl: db.env.DATABASE_URL, dataDir: db.dataDir });
    try {
      const node = await store.db.selectFrom('nodes').select('id').executeTakeFirstOrThrow();
      const usage = new UsageService(store.db, systemClock, new Calendar(ZONE));
      const batch = (seq: number, slotStartMs: number, entries: [string, number, number][]) => ({
        seq,
        slotStartMs,
        entries: entries.map(([name, rx, tx]) => ({
          deviceId: ids.get(name) ?? 0,
          rxBytes: rx,
          txBytes: tx,
          meter: seq,
        })),
      });
      const now = Date.now();
      const report = {
        journalId: 'console-usage',
        batches: [
          batch(1, now - 2 * 86_400_000, [['router 100%', 2 * GB, 0]]),
          batch(2, now, [
            ['Zoe tablet', 2 * GB, GB],
            ['zoe phone', GB, 0],
          ]),
        ],
        handshakes: [],
      };
      await usage.ingest(node, report, quietPublisher(store.db, systemClock));
    } finally {
      await store.close();
    }
    context = await browser.newContext({ viewport: DESKTOP });
    await problems.watch(context);
    const signing = await context.newPage();
    await signInThroughForm(signing, origin, ADMIN, ADMIN_PASSWORD);
    await signing.close();
  });

  after(async () => {
    await context?.close().catch(() => {});
    await browser?.close().catch(() => {});
    const left = await endLab({ panel, database: db });
    assert.deepEqual(left, [], 'the panel stopped on SIGTERM');
  });

  it('shows usage today and this month, and a 30-day chart of the fleet, in the panel zone', async () => {
    const fleet = ok(await need(panel, 'the panel').api.GET('/api/v1/usage'), 'GET /usage');
    assert.equal(fleet.today.total_bytes, 4 * GB);
    const page = await need(context, 'a browser context').newPage();
    await page.goto(`${origin}/`);
    const today = page.getByRole('region', { name: 'Usage today' });
    await today.getByText('4 GB').waitFor({ timeout: 15_000 });
    await today.getByText('3 GB down, 1 GB up').waitFor();
    assert.match((await today.getAttribute('title')) ?? '', new RegExp(ZONE));
    // Two days ago is in this month unless today is the 1st or 2nd of the month in Tokyo.
    const month = page.getByRole('region', { name: 'Usage this month' });
    await month.getByText(`${fleet.this_month.total_bytes / GB} GB`, { exact: true }).waitFor();
    const chart = page.getByRole('figure');
    await chart.locator('canvas').first().waitFor();
    await chart.getByText('Show as a table').click();
    const rows = chart.getByRole('table', { name: 'Usage per day, last 30 days' }).locator('tbody tr');
    assert.equal(await rows.count(), 30, 'every one of the 30 days, quiet ones too');
    assert.deepEqual(
      await rows
        .last()
        .locator('td')
        .allInnerTexts()
        .then((cells) => cells.slice(1)),
      ['3 GB', '1 GB'],
    );
    assert.deepEqual(
      await rows
        .nth(27)
        .locator('td')
        .allInnerTexts()
        .then((cells) => cells.slice(1)),
      ['2 GB', '0 B'],
    );
    await page.getByText(`Days of the panel time zone, ${ZONE}.`).waitFor();
    assert.deepEqual(await seriousViolations(page), [], 'axe on the overview with its chart');
    await screenshot(page, 'overview-usage');
    problems.none('the overview usage');
    await page.close();
  });

  it('searches devices by part of the name or external ID, in any case, kept in the URL', async () => {
    const page = await need(context, 'a browser context').newPage();
    await page.goto(`${origin}/devices`);
    const list = page.getByRole('table', { name: 'Devices' });
    await list.getByText('router 100%').waitFor({ timeout: 15_000 });
    const names = () => list.locator('tbody tr td:first-child a').allInnerTexts();
    const search = async (text: string, expected: string[]) => {
      await page.getByLabel('Name or external ID', { exact: true }).fill(text);
      await page.getByRole('button', { name: 'Search' }).click();
      await page.waitForURL((url) => url.searchParams.get('search') === text);
      await list.getByText(expected[0] ?? '').waitFor();
      await page.waitForFunction((n) => document.querySelectorAll('table tbody tr').length === n, expected.length);
      assert.deepEqual(await names(), expected, `search ${text}`);
    };
    await search('ZOE', ['Zoe tablet', 'zoe phone']);
    await search('SHOP-4', ['Zoe tablet']);
    await search('0%', ['router 100%']);
    ok(
      await need(panel, 'the panel').api.PATCH('/api/v1/devices/{id}', {
        params: { path: { id: ids.get('zoe phone') ?? 0 } },
        body: { enabled: false },
      }),
      'disable zoe phone',
    );
    await page.goto(`${origin}/devices?search=zoe&status=disabled`);
    assert.equal(await page.getByLabel('Name or external ID', { exact: true }).inputValue(), 'zoe');
    await list.getByText('zoe phone').waitFor({ timeout: 15_000 });
    assert.deepEqual(await names(), ['zoe phone']);
    assert.deepEqual(await seriousViolations(page), [], 'axe on the searched devices');

    // A group filter is the external_id exactly: shop-42's device, none for a part of it.
    await page.goto(`${origin}/devices?group=shop-42`);
    assert.equal(await page.getByLabel('Group', { exact: true }).inputValue(), 'shop-42');
    await list.getByText('Zoe tablet').waitFor({ timeout: 15_000 });
    assert.deepEqual(await names(), ['Zoe tablet']);
    await page.getByLabel('Group', { exact: true }).fill('shop-4');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.waitForURL((url) => url.searchParams.get('group') === 'shop-4');
    await page.getByText('No devices.').waitFor();
    await screenshot(page, 'devices-search');
    problems.none('the device search');
    await page.close();
  });
});
