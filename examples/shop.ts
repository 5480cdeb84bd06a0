/**
 * A VPN shop in one file against a running panel (README "Selling access"): it sells a plan to a customer, renews
 * on payment, and tells the customer when access is about to run out.
 *
 *   PANEL_URL=http://localhost:8080 API_KEY=vpnk_… CUSTOMER=tg-42 node examples/shop.ts
 *
 * The key needs plans:write (to make the plan once), devices:read, devices:write and webhooks:write. Reminders come
 * as signed webhooks to this script's listener on 127.0.0.1:RECEIVER_PORT (a panel on this host needs
 * WEBHOOK_ALLOW_PRIVATE=1 to deliver there). With ONE_REMINDER=1 it exits after the first one.
 */
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import createClient from 'openapi-fetch';
import type { components, paths } from '../console/src/api-types.ts';

const { PANEL_URL = 'http://localhost:8080', API_KEY = '', CUSTOMER = 'customer-1' } = process.env;
const RECEIVER_PORT = Number(process.env.RECEIVER_PORT ?? 8787);
const api = createClient<paths>({ baseUrl: PANEL_URL, headers: { authorization: `Bearer ${API_KEY}` } });
const fail = (what: string, error: unknown): never => {
  throw new Error(`${what}: ${JSON.stringify(error)}`);
};

// The plan the shop sells, made once: 50 GB a month for 30 days, 3 devices a customer, slowed (not cut) at the limit.
const plans = await api.GET('/api/v1/plans', { params: { query: { limit: 100 } } });
const plan =
  plans.data?.data.find((p) => p.name === 'monthly-50gb') ??
  (
    await api.POST('/api/v1/plans', {
      body: { name: 'monthly-50gb', data_limit: 50e9, limit_period: 'monthly', duration_days: 30, max_devices: 3 },
    })
  ).data ??
  fail('plan', plans.error);

// Reminders (and renewals) reach the shop as webhooks, signed with the secret shown once.
const hook = await api.POST('/api/v1/webhooks', {
  body: { url: `http://127.0.0.1:${RECEIVER_PORT}/vpn`, events: ['device.expiring', 'device.usage_threshold'] },
});
const secret = Buffer.from((hook.data ?? fail('webhook', hook.error)).secret.replace(/^whsec_/, ''), 'base64');

// A sale: a device for the customer from the plan; its config goes to the customer.
const sold = await api.POST('/api/v1/devices', {
  body: { server_id: 'auto', plan_id: plan.id, external_id: CUSTOMER, name: `${CUSTOMER}-phone` },
});
const device = sold.data ?? fail('sale', sold.error);
// Here a real shop sends the customer `device.config` (or its QR code: GET /devices/{id}/qr).
console.log(JSON.stringify({ sold: device.id, expires_at: device.expires_at }));

// A payment: 30 more days. The payment's id is the Idempotency-Key, so a retried webhook from the payment provider
// does not renew twice.
const payment = randomUUID();
for (let attempt = 0; attempt < 2; attempt++) {
  const renewed = await api.POST('/api/v1/devices/{id}/renew', {
    params: { path: { id: device.id }, header: { 'idempotency-key': payment } },
    body: { days: 30 },
  });
  console.log(JSON.stringify({ renewed: (renewed.data ?? fail('renewal', renewed.error)).expires_at }));
}

createServer((req, res) => {
  let body = '';
  req.on('data', (chunk: Buffer) => (body += chunk));
  req.on('end', () => {
    const header = (name: string): string => `${req.headers[name] ?? ''}`;
    const signed = `${header('webhook-id')}.${header('webhook-timestamp')}.${body}`;
    const want = Buffer.from(`v1,${createHmac('sha256', secret).update(signed).digest('base64')}`);
    const valid = header('webhook-signature')
      .split(' ')
      .some((s) => s.length === want.length && timingSafeEqual(Buffer.from(s), want));
    res.writeHead(valid ? 204 : 401).end();
    if (!valid) return;
    const event: components['schemas']['Event'] = JSON.parse(body);
    // Here a real shop messages the customer: "your access ends in a day: renew at …".
    console.log(JSON.stringify({ remind: event.device_name, kind: event.kind, detail: event.detail }));
    if (process.env.ONE_REMINDER === '1') process.exit(0);
  });
}).listen(RECEIVER_PORT, '127.0.0.1');
