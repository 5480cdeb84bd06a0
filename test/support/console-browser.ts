/**
 * What the console's browser tests share: signing in through the form, axe-core's verdict on a page, and the
 * body of a request a click sends.
 */
import AxeBuilder from '@axe-core/playwright';
import type { Page, Request } from 'playwright-core';

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
