/**
 * Selling access in the operator console (issue 26 item 8), in Debian's headless Chromium against `vpn-panel serve`
 * (SQLite, the dry-run node), serving the build of console/.
 *
 * The Plans page makes, lists (a page at a time), changes and deletes plans, with the API's errors beside the
 * form; "New device" takes a plan and says what the device gets, the fields filled in winning; the device page
 * renews (days, reset usage unticked), tops up (GB as bytes) and sets the throttle in its limits; the group page
 * shows the slots a plan gives it.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Page, Request } from 'playwright-core';
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
const DAY_MS = 24 * 3600 * 1000;

describe('selling access in the operator console (headless Chromium, sqlite)', {
  skip: chromiumSkip,
  timeout: SUITE_TIMEOUT_MS,
}, () => {
  let lab: ConsoleLab | undefined;
  let panel: LabPanel | undefined;
  let page: Page;
  let origin: string;
  let pageErrors: string[] = [];
  /** The device made from the plan, which the later tests renew and find in its group. */
  let deviceId = 0;

  async function heading(name: string): Promise<void> {
    await page.getByRole('heading', { level: 1, name }).waitFor({ timeout: 15_000 });
  }

  const api = () => need(panel, 'the panel').api;

  async function planNamed(name: string) {
    const plans = ok(await api().GET('/api/v1/plans', { params: { query: { limit: 200 } } }), 'GET /plans').data;
    return plans.find((plan) => plan.name === name);
  }

  async function deviceOf(id: number) {
    return ok(await api().GET('/api/v1/devices/{id}', { params: { path: { id } } }), 'GET /devices/{id}');
  }

  before(async () => {
    lab = await startConsoleLab('console-plans');
    ({ panel, page, origin, pageErrors } = lab);
    ok(await panel.api.POST('/api/v1/servers', { body: { name: 'sell-1' } }), 'POST /servers');
  });

  after(async () => {
    assert.deepEqual((await lab?.end()) ?? [], [], 'the panel stopped on SIGTERM');
  });

  it('New plan sends the plan in API units; the list shows what a device gets', async () => {
    await page.goto(`${origin}/plans`);
    await heading('Plans');
    await page.getByRole('button', { name: 'New plan' }).click();
    const form = page.getByRole('form', { name: 'New plan' });
    await form.getByLabel('Name', { exact: true }).fill('Basic');
    await form.getByLabel('Data limit (GB)').fill('10');
    await form.getByLabel('Speed limit (Mbit/s)').fill('20');
    await form.getByLabel('Duration (days)').fill('30');
    await form.getByLabel('Devices per customer').fill('2');
    await form.getByLabel('At the data limit').selectOption({ label: 'Throttle' });
    await form.getByLabel('Throttle speed (Mbit/s)').fill('1');
    assert.deepEqual(await seriousViolations(page), [], 'axe on the form');
    await page.screenshot({ path: join(SCREENSHOTS, 'new-plan.png'), fullPage: true });
    const body = await sentBody(page, 'POST', '/api/v1/plans', () =>
      form.getByRole('button', { name: 'Create plan' }).click(),
    );
    assert.deepEqual(body, {
      name: 'Basic',
      data_limit: 10e9,
      limit_period: 'monthly',
      speed_limit: 20_000,
      duration_days: 30,
      max_devices: 2,
      quota_action: 'throttle',
      throttle_speed: 1000,
      expiry_starts: 'created',
    });
    const row = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'Basic', exact: true }) });
    await row.getByText(/10 GB a month, 20 Mbit\/s, 30 days, at most 2 devices.*throttled to 1 Mbit\/s/).waitFor();
    assert.equal(await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Plans' }).count(), 1);
    assert.deepEqual(pageErrors.splice(0), []);
  });

  it("the API's error shows beside the form: a taken name is marked at the name and nothing is made", async () => {
    await page.getByRole('button', { name: 'New plan' }).click();
    const form = page.getByRole('form', { name: 'New plan' });
    await form.getByLabel('Name', { exact: true }).fill('Basic');
    await form.getByRole('button', { name: 'Create plan' }).click();
    await form.getByText('Please correct the fields marked below.').waitFor();
    await form.locator('.field-error', { hasText: 'taken' }).waitFor();
    assert.equal(await form.getByLabel('Name', { exact: true }).getAttribute('aria-invalid'), 'true');
    const plans = ok(await api().GET('/api/v1/plans'), 'GET /plans').data;
    assert.equal(plans.filter((plan) => plan.name === 'Basic').length, 1, 'no second Basic');
    // Days that are no number would go out as null ("never expires"): the form refuses them at the field.
    await form.getByLabel('Name', { exact: true }).fill('Weekly');
    await form.getByLabel('Duration (days)').fill('a week');
    await form.getByRole('button', { name: 'Create plan' }).click();
    await form.locator('.field-error', { hasText: 'a whole number of days' }).waitFor();
    assert.equal(await planNamed('Weekly'), undefined, 'nothing sent');
    await form.getByRole('button', { name: 'Cancel' }).click();
    assert.deepEqual(pageErrors.splice(0), []);
  });

  it('Change sends the changed plan; Delete asks once more and removes it', async () => {
    ok(await api().POST('/api/v1/plans', { body: { name: 'Old' } }), 'POST /plans');
    await page.reload();
    await heading('Plans');
    const row = (name: string) => page.getByRole('row').filter({ has: page.getByRole('cell', { name, exact: true }) });
    await row('Old').getByRole('button', { name: 'Change Old' }).click();
    const form = page.getByRole('form', { name: 'Change Old' });
    assert.equal(await form.getByLabel('Name', { exact: true }).inputValue(), 'Old');
    await form.getByLabel('Duration (days)').fill('7');
    const body = await sentBody(page, 'PATCH', `/api/v1/plans/${(await planNamed('Old'))?.id}`, () =>
      form.getByRole('button', { name: 'Save plan' }).click(),
    );
    assert.equal((body as { duration_days?: number }).duration_days, 7);
    await row('Old')
      .getByText(/7 days/)
      .waitFor();
    assert.equal((await planNamed('Old'))?.duration_days, 7);
    await row('Old').getByRole('button', { name: 'Delete Old' }).click();
    await row('Old').getByRole('button', { name: 'Yes, delete Old' }).click();
    await row('Old').waitFor({ state: 'detached' });
    assert.equal(await planNamed('Old'), undefined);
    assert.deepEqual(pageErrors.splice(0), []);
  });

  it('the list goes a page at a time', async () => {
    for (let n = 0; n < 50; n++)
      ok(await api().POST('/api/v1/plans', { body: { name: `bulk-${String(n).padStart(2, '0')}` } }), 'POST /plans');
    await page.reload();
    await heading('Plans');
    await page.getByRole('cell', { name: 'bulk-48', exact: true }).waitFor();
    assert.equal(await page.getByRole('cell', { name: 'bulk-49', exact: true }).count(), 0, 'the 51st is on page 2');
    await page.getByRole('button', { name: 'Next page' }).click();
    await page.getByRole('cell', { name: 'bulk-49', exact: true }).waitFor();
    await page.getByRole('button', { name: 'Previous page' }).click();
    await page.getByRole('cell', { name: 'Basic', exact: true }).waitFor();
    assert.deepEqual(pageErrors.splice(0), []);
  });

  it('New device with a plan says what the device gets and sends plan_id; a data limit filled in wins', async () => {
    const plan = need(await planNamed('Basic'), 'the Basic plan');
    await page.goto(`${origin}/devices?new=1`);
    await heading('Devices');
    await page.getByLabel('Plan', { exact: true }).selectOption({ label: 'Basic' });
    await page.getByText(/The device gets 10 GB a month, 20 Mbit\/s, 30 days/).waitFor();
    await page.getByLabel('Name', { exact: true }).fill('phone');
    await page.getByLabel('External ID', { exact: true }).fill('customer-1');
    await page.getByLabel('Data limit (GB)').fill('5');
    assert.deepEqual(await seriousViolations(page), [], 'axe on the form with a plan');
    const before = Date.now();
    const body = await sentBody(page, 'POST', '/api/v1/devices', () =>
      page.getByRole('button', { name: 'Create', exact: true }).click(),
    );
    assert.deepEqual(body, {
      server_id: 'auto',
      name: 'phone',
      plan_id: plan.id,
      external_id: 'customer-1',
      data_limit: 5e9,
    });
    await heading('phone');
    const facts = page.locator('.facts');
    await facts.getByText('Throttled to 1 Mbit/s').waitFor();
    await facts.getByText('Basic', { exact: true }).waitFor();
    deviceId = Number(new URL(page.url()).pathname.split('/').at(-1));
    const device = await deviceOf(deviceId);
    assert.equal(device.data_limit, 5e9, 'the filled-in limit wins');
    assert.equal(device.speed_limit, 20_000, "the plan's speed");
    const expires = Date.parse(need(device.expires_at ?? undefined, 'an expiry'));
    assert.ok(Math.abs(expires - (before + 30 * DAY_MS)) < 60_000, `30 days on: ${device.expires_at}`);
    assert.deepEqual(pageErrors.splice(0), []);
  });

  it('the device page renews by days without resetting usage, tops up in GB and sets the throttle', async () => {
    const id = deviceId;
    const was = await deviceOf(id);
    await page.getByLabel('Days', { exact: true }).fill('10');
    await page.getByLabel(/^Reset usage/).uncheck();
    await page.screenshot({ path: join(SCREENSHOTS, 'device-renew.png'), fullPage: true });
    const renewal = await sentBody(page, 'POST', `/api/v1/devices/${id}/renew`, () =>
      page.getByRole('button', { name: 'Renew', exact: true }).click(),
    );
    assert.deepEqual(renewal, { reset_usage: false, days: 10 });
    await page.getByRole('form', { name: 'Renew' }).getByRole('status').getByText('Renewed.').waitFor();
    const renewed = await deviceOf(id);
    assert.equal(
      Date.parse(need(renewed.expires_at ?? undefined, 'an expiry')),
      Date.parse(need(was.expires_at ?? undefined, 'an expiry')) + 10 * DAY_MS,
    );

    await page.getByLabel('Add data (GB)').fill('2.5');
    const topUp = await sentBody(page, 'POST', `/api/v1/devices/${id}/top-up`, () =>
      page.getByRole('button', { name: 'Top up', exact: true }).click(),
    );
    assert.deepEqual(topUp, { bytes: 2.5e9 });
    await page.locator('.facts').getByText('2.5 GB', { exact: true }).waitFor();
    assert.equal((await deviceOf(id)).top_up_bytes, 2.5e9);

    const limits = page.getByRole('form', { name: 'Limits' });
    assert.equal(await limits.getByLabel('Throttle speed (Mbit/s)').inputValue(), '1');
    await limits.getByLabel('Throttle speed (Mbit/s)').fill('2');
    const throttle = await sentBody(page, 'PATCH', `/api/v1/devices/${id}`, () =>
      limits.getByRole('button', { name: 'Save limits' }).click(),
    );
    assert.deepEqual(throttle, { quota_action: 'throttle', throttle_speed: 2000 });
    await page.locator('.facts').getByText('Throttled to 2 Mbit/s').waitFor();
    await limits.getByLabel('At the data limit').selectOption({ label: 'Cut off' });
    const cut = await sentBody(page, 'PATCH', `/api/v1/devices/${id}`, () =>
      limits.getByRole('button', { name: 'Save limits' }).click(),
    );
    assert.deepEqual(cut, { quota_action: 'cut', throttle_speed: null });
    await page.locator('.facts').getByText('Cut off', { exact: true }).waitFor();
    assert.deepEqual(await seriousViolations(page), [], 'axe on the device page');
    assert.deepEqual(pageErrors.splice(0), []);
  });

  it('a double submit of Renew renews once: one request, the expiry moved by the days once', async () => {
    const id = deviceId;
    const was = await deviceOf(id);
    const renewals: Array<Promise<unknown>> = [];
    const count = (request: Request) => {
      if (request.method() === 'POST' && new URL(request.url()).pathname === `/api/v1/devices/${id}/renew`)
        renewals.push(request.response());
    };
    page.on('request', count);
    try {
      const form = page.getByRole('form', { name: 'Renew' });
      await form.getByLabel('Days', { exact: true }).fill('3');
      // Two clicks before the page draws again, as a quick double click or a double Enter can land.
      await form.getByRole('button', { name: 'Renew', exact: true }).evaluate((button) => {
        if (button instanceof HTMLButtonElement) {
          button.click();
          button.click();
        }
      });
      await form.getByRole('status').getByText('Renewed.').waitFor();
      // Every renewal sent has its answer before the expiry is read.
      await Promise.all(renewals);
    } finally {
      page.off('request', count);
    }
    assert.equal(renewals.length, 1, 'one renewal sent');
    assert.equal(
      Date.parse(need((await deviceOf(id)).expires_at ?? undefined, 'an expiry')),
      Date.parse(need(was.expires_at ?? undefined, 'an expiry')) + 3 * DAY_MS,
      'renewed by 3 days, once',
    );
    assert.deepEqual(pageErrors.splice(0), []);
  });

  it('a renewal whose answer was lost, sent again, renews once: both carry one Idempotency-Key', async () => {
    const id = deviceId;
    const was = await deviceOf(id);
    const path = `/api/v1/devices/${id}/renew`;
    const keys: Array<string | undefined> = [];
    // The first renewal reaches the panel, and its answer is lost on the way back.
    await page.route(`${origin}${path}`, async (route) => {
      keys.push(route.request().headers()['idempotency-key']);
      if (keys.length > 1) return route.continue();
      await route.fetch();
      return route.abort('connectionreset');
    });
    try {
      const form = page.getByRole('form', { name: 'Renew' });
      await form.getByLabel('Days', { exact: true }).fill('4');
      await form.getByRole('button', { name: 'Renew', exact: true }).click();
      await form.getByText('the panel did not answer').waitFor();
      await form.getByRole('button', { name: 'Renew', exact: true }).click();
      await form.getByRole('status').getByText('Renewed.').waitFor();
    } finally {
      await page.unroute(`${origin}${path}`);
    }
    assert.equal(keys.length, 2, 'sent twice');
    assert.ok(keys[0] !== undefined && keys[0] === keys[1], `one Idempotency-Key for the form: ${keys}`);
    assert.equal(
      Date.parse(need((await deviceOf(id)).expires_at ?? undefined, 'an expiry')),
      Date.parse(need(was.expires_at ?? undefined, 'an expiry')) + 4 * DAY_MS,
      'renewed by 4 days, once',
    );
    assert.deepEqual(pageErrors.splice(0), []);
  });

  it('the group page shows the slots its plan gives it', async () => {
    await page.goto(`${origin}/groups/customer-1`);
    await heading('Group customer-1');
    await page.locator('.facts').getByText('1 / 2 used').waitFor();
    assert.deepEqual(pageErrors.splice(0), []);
  });

  it('slots count the whole group: a device on page 2 counts, an uncapped plan lifts the cap', async () => {
    const [server] = ok(await api().GET('/api/v1/servers'), 'GET /servers').data;
    const serverId = need(server, 'the server').id;
    const big = ok(await api().POST('/api/v1/plans', { body: { name: 'Big', max_devices: 100 } }), 'POST /plans');
    for (let n = 0; n < 50; n++)
      ok(
        await api().POST('/api/v1/devices', {
          body: { server_id: serverId, name: `plain ${n}`, external_id: 'shop-2' },
        }),
        'POST /devices',
      );
    ok(
      await api().POST('/api/v1/devices', {
        body: { server_id: serverId, name: 'from Big', external_id: 'shop-2', plan_id: big.id },
      }),
      'POST /devices',
    );
    await page.goto(`${origin}/groups/shop-2`);
    await heading('Group shop-2');
    // The device from the plan is the 51st, past the page of 50 shown.
    await page.locator('.facts').getByText('51 / 100 used').waitFor();

    const open = ok(await api().POST('/api/v1/plans', { body: { name: 'Open' } }), 'POST /plans');
    ok(
      await api().POST('/api/v1/devices', {
        body: { server_id: serverId, name: 'from Open', external_id: 'customer-1', plan_id: open.id },
      }),
      'POST /devices',
    );
    await page.goto(`${origin}/groups/customer-1`);
    await heading('Group customer-1');
    await page.locator('.facts').getByText('No cap: no plan of its devices limits the group').waitFor();
    assert.deepEqual(pageErrors.splice(0), []);
  });
});
