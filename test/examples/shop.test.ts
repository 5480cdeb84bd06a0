/**
 * examples/shop.ts against a live panel started the way the README starts it (dry-run node): it makes its plan,
 * sells a device from it, renews it twice with one payment id (one renewal), and receives a signed
 * `device.expiring` webhook on its own listener. EXPIRY_REMINDERS=90d puts the renewed device (60 days left) inside
 * the reminder window, so the panel's reminder worker posts it at its next round (at most a minute).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { callApi, freePort, type PanelProcess, ROOT, startPanel } from '../support/panel.ts';

describe('examples/shop.ts against a live panel', { timeout: 180_000 }, () => {
  let database: TestDatabase | undefined;
  let panel: PanelProcess | undefined;

  before(async () => {
    database = await createTestDatabase('sqlite');
    panel = await startPanel({ database, env: { WEBHOOK_ALLOW_PRIVATE: '1', EXPIRY_REMINDERS: '90d' } });
  });

  after(async () => {
    await panel?.stop();
    await database?.drop();
  });

  it('sells a plan, renews once for one payment, and gets the expiry reminder as a signed webhook', async () => {
    assert.ok(panel !== undefined);
    const key = await panel.createKey('shop', 'all', ['--no-rate-limit']);
    (await callApi(panel.url, key, 'POST', '/servers', { name: 'fra-1' })).expect(201);
    const env = { ...process.env, PANEL_URL: panel.url, API_KEY: key, CUSTOMER: 'tg-42', ONE_REMINDER: '1' };
    const shop = spawn(process.execPath, [join(ROOT, 'examples', 'shop.ts')], {
      env: { ...env, RECEIVER_PORT: String(await freePort()) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    shop.stdout.on('data', (chunk: Buffer) => (output += chunk));
    shop.stderr.on('data', (chunk: Buffer) => (output += chunk));
    const timer = setTimeout(() => shop.kill('SIGKILL'), 150_000);
    const [code] = await once(shop, 'exit');
    clearTimeout(timer);
    assert.equal(code, 0, output);

    const lines = output
      .trim()
      .split('\n')
      .map((line): Record<string, unknown> => JSON.parse(line));
    const sold = lines.find((l) => 'sold' in l);
    assert.ok(sold !== undefined, output);
    const renewals = lines.filter((l) => 'renewed' in l).map((l) => l.renewed);
    assert.equal(renewals.length, 2, output);
    assert.equal(renewals[0], renewals[1], 'the second call with the same payment renewed nothing');
    const days = (Date.parse(String(renewals[0])) - Date.parse(String(sold.expires_at))) / 86_400_000;
    assert.ok(Math.abs(days - 30) < 0.01, `one renewal of 30 days (${days})`);
    const reminder = lines.find((l) => 'remind' in l);
    assert.deepEqual(
      { remind: reminder?.remind, kind: reminder?.kind },
      { remind: 'tg-42-phone', kind: 'device.expiring' },
    );

    const events = (await callApi(panel.url, key, 'GET', '/events?kind=device.renewed')).expect(200);
    assert.equal(events.data.length, 1, 'one device.renewed');
  });
});
