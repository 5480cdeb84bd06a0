/**
 * What the console's browser tests share: signing in through the form, axe-core's verdict on a page, the
 * body of a request a click sends, and a panel with its admin signed in to a browser page.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import AxeBuilder from '@axe-core/playwright';
import type { Page, Request } from 'playwright-core';
import { launchChromium } from './chromium.ts';
import { createTestDatabase, type TestDatabase } from './databases.ts';
import { endLab, LabPanel } from './lab-panel.ts';
import { ROOT } from './panel.ts';

const BUILT = join(ROOT, 'dist', 'console', 'index.html');
/** Where the browser tests leave their screenshots. */
export const SCREENSHOTS = join(ROOT, 'test-output', 'console');
const ADMIN = 'console-admin';
const ADMIN_PASSWORD = 'staple the battery, correct horse';

/** Signs `page` in as `user` through the sign-in form at `origin`, and waits for the overview. */
export async function signInThroughForm(page: Page, origin: string, user: string, password: string): Promise<void> {
  await page.goto(`${origin}/`);
  await page.getByLabel('User', { exact: true }).fill(user);
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor({ timeout: 15_000 });
}

/** axe-core's serious and critical violations of the page as it is now, one line each. */
export async function seriousViolations(page: Page): Promise<string[]> {
  const { violations } = await new AxeBuilder({ page }).analyze();
  return violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map((v) => `${v.impact} ${v.id}: ${v.help} (${v.nodes.map((node) => node.target.join(' ')).join(', ')})`);
}

/** The JSON body of the first `method` request to `/api/v1/<path>` that `act` makes the page send. */
export async function sentBody(page: Page, method: string, path: string, act: () => Promise<void>): Promise<unknown> {
  const [request] = await Promise.all([
    page.waitForRequest((sent: Request) => sent.method() === method && new URL(sent.url()).pathname === path),
    act(),
  ]);
  return request.postDataJSON();
}

export interface ConsoleLab {
  panel: LabPanel;
  /** The admin's page, 1280 px wide, signed in. */
  page: Page;
  origin: string;
  /** The page's uncaught errors: each test takes them (`splice(0)`) and expects none. */
  pageErrors: string[];
  /** Closes the browser and stops the panel; what did not stop on SIGTERM. */
  end: () => Promise<string[]>;
}

/** A panel on SQLite with the dry-run node, serving the console build, its admin signed in to a Chromium page. */
export async function startConsoleLab(name: string): Promise<ConsoleLab> {
  assert.ok(existsSync(BUILT), `no console build at ${BUILT}: run npm run build:console`);
  mkdirSync(SCREENSHOTS, { recursive: true });
  const browser = await launchChromium();
  let database: TestDatabase | undefined;
  let panel: LabPanel | undefined;
  const end = async () => {
    await browser.close().catch(() => {});
    return endLab({ panel, database });
  };
  try {
    database = await createTestDatabase('sqlite');
    panel = await LabPanel.start(database, name, { NODE_DRIVER: 'dry-run' });
    const origin = new URL(panel.url).origin;
    const added = await panel.process.cli(['users', 'add', '--name', ADMIN, '--role', 'admin'], `${ADMIN_PASSWORD}\n`);
    assert.equal(added.code, 0, added.stderr);
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const pageErrors: string[] = [];
    page.on('pageerror', (error) => pageErrors.push(error.message));
    await signInThroughForm(page, origin, ADMIN, ADMIN_PASSWORD);
    return { panel, page, origin, pageErrors, end };
  } catch (error) {
    await end();
    throw error;
  }
}
