/**
 * AmneziaWG servers in the operator console (issue 24), in Debian's headless Chromium against `vpn-panel serve`
 * (SQLite, the dry-run node, which runs both protocols), serving the build of console/.
 *
 * "New server" sends `protocol: "amneziawg"` when AmneziaWG is chosen, with only the obfuscation fields filled
 * in (the part is closed until opened, and says the rest is generated); the default sends no protocol. The
 * server's page shows its protocol and, for AmneziaWG, its parameters in its settings with the warning about
 * devices' configs; a change PATCHes the changed field only. The servers list tags AmneziaWG servers, the
 * node list shows each node's protocols, and a 422 naming an obfuscation field opens the part at that field.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { chromiumSkip } from '../support/chromium.ts';
import {
  type ConsoleLab,
  SCREENSHOTS,
  sentBody,
  seriousViolations,
  startConsoleLab,
} from '../support/console-browser.ts';
import { type LabPanel, need, ok } from '../support/lab-panel.ts';

const SUITE_TIMEOUT_MS = 180_000;
const WARNING = "Changing these changes every device's config: its clients must import it again.";

describe('AmneziaWG servers in the operator console (headless Chromium, sqlite)', {
  skip: chromiumSkip,
  timeout: SUITE_TIMEOUT_MS,
}, () => {
  let lab: ConsoleLab | undefined;
  let panel: LabPanel | undefined;
  let page: Page;
  let origin: string;
  let pageErrors: string[] = [];

  async function heading(name: string): Promise<void> {
    await page.getByRole('heading', { level: 1, name }).waitFor({ timeout: 15_000 });
  }

  async function openNewServer(name: string): Promise<void> {
    await page.goto(`${origin}/servers/new`);
    await heading('New server');
    await page.getByLabel('Name', { exact: true }).fill(name);
  }

  before(async () => {
    lab = await startConsoleLab('console-amneziawg');
    ({ panel, page, origin, pageErrors } = lab);
  });

  after(async () => {
    assert.deepEqual((await lab?.end()) ?? [], [], 'the panel stopped on SIGTERM');
  });

  it('New server with AmneziaWG sends protocol "amneziawg" and only the obfuscation fields filled in', async () => {
    const [node] = ok(await need(panel, 'the panel').api.GET('/api/v1/nodes'), 'GET /nodes').data;
    assert.ok(node !== undefined, 'the dry-run node');
    assert.deepEqual(node.protocols, ['wireguard', 'amneziawg'], 'the dry-run node runs both');
    await openNewServer('awg-1');
    assert.equal(await page.getByLabel(/^Jc/).count(), 0, 'no obfuscation part for WireGuard, the default');
    await page.getByLabel('Protocol', { exact: true }).selectOption({ label: 'AmneziaWG' });
    const part = page.locator('details.obfuscation');
    assert.match((await part.locator('summary').textContent()) ?? '', /generated for this server/);
    assert.equal(await part.getAttribute('open'), null, 'the obfuscation part is closed until opened');
    const nodeOption = page.getByLabel('Node', { exact: true }).locator(`option[value="${node.id}"]`);
    assert.doesNotMatch(
      (await nodeOption.textContent()) ?? '',
      /cannot run/,
      'a node that runs AmneziaWG is not marked',
    );
    await part.locator('summary').click();
    await page.getByLabel(/^Jc/).fill('5');
    await page.getByLabel(/^H1/).fill('100000-100200');
    assert.deepEqual(await seriousViolations(page), [], 'axe on the form');
    await page.screenshot({ path: join(SCREENSHOTS, 'new-server-amneziawg.png'), fullPage: true });
    const body = await sentBody(page, 'POST', '/api/v1/servers', () =>
      page.getByRole('button', { name: 'Create server' }).click(),
    );
    assert.deepEqual(body, { name: 'awg-1', protocol: 'amneziawg', obfuscation: { jc: 5, h1: '100000-100200' } });
    await heading('awg-1');
    const made = ok(await need(panel, 'the panel').api.GET('/api/v1/servers'), 'GET /servers').data.find(
      (server) => server.name === 'awg-1',
    );
    assert.equal(made?.protocol, 'amneziawg');
    assert.equal(made?.obfuscation?.jc, 5);
    assert.equal(made?.obfuscation?.h1, '100000-100200');
    assert.deepEqual(pageErrors.splice(0), []);
  });

  it('a WireGuard server, the default, is made without protocol or obfuscation and says WireGuard', async () => {
    await openNewServer('wg-1');
    const body = await sentBody(page, 'POST', '/api/v1/servers', () =>
      page.getByRole('button', { name: 'Create server' }).click(),
    );
    assert.deepEqual(body, { name: 'wg-1' });
    await heading('wg-1');
    await page.locator('.facts').getByText('WireGuard', { exact: true }).waitFor();
    assert.equal(await page.locator('.obfuscation').count(), 0, 'no obfuscation parameters');
    assert.deepEqual(pageErrors.splice(0), []);
  });

  it('the servers list tags the AmneziaWG server only; the node list shows the node protocols', async () => {
    await page.goto(`${origin}/servers`);
    await heading('Servers');
    const row = (name: string) => page.getByRole('row').filter({ has: page.getByRole('link', { name, exact: true }) });
    await row('awg-1').locator('.tag', { hasText: 'AmneziaWG' }).waitFor();
    assert.equal(await row('wg-1').locator('.tag').count(), 0);
    await page.goto(`${origin}/`);
    await heading('Overview');
    const nodes = page.getByRole('table', { name: 'Nodes' });
    await nodes.getByRole('cell', { name: 'WireGuard, AmneziaWG' }).waitFor();
    assert.deepEqual(pageErrors.splice(0), []);
  });

  it("the server's settings show its parameters with the warning; a change PATCHes the changed field", async () => {
    const server = ok(await need(panel, 'the panel').api.GET('/api/v1/servers'), 'GET /servers').data.find(
      (one) => one.name === 'awg-1',
    );
    assert.ok(server?.obfuscation, 'the AmneziaWG server and its parameters');
    await page.goto(`${origin}/servers/${server.id}`);
    await heading('awg-1');
    await page.locator('.facts').getByText('AmneziaWG', { exact: true }).waitFor();
    const settings = page.getByRole('form', { name: 'Settings' });
    await settings.getByText(WARNING).waitFor();
    assert.equal(await settings.getByLabel(/^Jc/).inputValue(), '5');
    assert.equal(await settings.getByLabel(/^Jmax/).inputValue(), String(server.obfuscation.jmax));
    assert.equal(await settings.getByLabel(/^S2/).inputValue(), String(server.obfuscation.s2));
    assert.equal(await settings.getByLabel(/^H1/).inputValue(), '100000-100200');
    await page.screenshot({ path: join(SCREENSHOTS, 'server-amneziawg.png'), fullPage: true });
    await settings.getByLabel(/^Jc/).fill('6');
    const body = await sentBody(page, 'PATCH', `/api/v1/servers/${server.id}`, () =>
      settings.getByRole('button', { name: 'Save' }).click(),
    );
    assert.deepEqual(body, { obfuscation: { jc: 6 } });
    await settings.getByRole('status').getByText('Saved.').waitFor();
    const changed = ok(
      await need(panel, 'the panel').api.GET('/api/v1/servers/{id}', { params: { path: { id: server.id } } }),
      'GET /servers/{id}',
    );
    assert.deepEqual(changed.obfuscation, { ...server.obfuscation, jc: 6 });
    assert.deepEqual(pageErrors.splice(0), []);
  });

  it('a 422 naming an obfuscation field opens the part and shows the message at that field', async () => {
    await openNewServer('awg-bad');
    await page.getByLabel('Protocol', { exact: true }).selectOption({ label: 'AmneziaWG' });
    const part = page.locator('details.obfuscation');
    await part.locator('summary').click();
    await page.getByLabel(/^Jmax/).fill('5000');
    await part.locator('summary').click();
    assert.equal(await part.getAttribute('open'), null, 'closed again before sending');
    await page.getByRole('button', { name: 'Create server' }).click();
    const field = page.locator('.field', { has: page.getByLabel(/^Jmax/) });
    await field.locator('.field-error').waitFor();
    assert.notEqual(await part.getAttribute('open'), null, 'the part opened at the error');
    assert.equal(await page.getByLabel(/^Jmax/).getAttribute('aria-invalid'), 'true');
    await page.getByText('Please correct the fields marked below.').waitFor();
    const servers = ok(await need(panel, 'the panel').api.GET('/api/v1/servers'), 'GET /servers').data;
    assert.equal(
      servers.some((server) => server.name === 'awg-bad'),
      false,
      'nothing saved',
    );
    assert.deepEqual(pageErrors.splice(0), []);
  });
});
