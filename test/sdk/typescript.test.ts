/**
 * sdk/typescript (`@vpn-panel/sdk`) against a live panel (test/support/sdk-panel.ts): lists across pages, the one
 * ApiError, retries through the rate limit, a POST retried after a 503 done once, webhooks verified; and its
 * types are what the generator makes of the served document today.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import { ApiError, VpnPanel, verifyWebhook, WebhookVerificationError } from '../../sdk/typescript/src/index.ts';
import { typescriptFile } from '../../sdk/tools/generate.ts';
import { openApiDocument } from '../../src/main/openapi.ts';
import { ROOT } from '../support/panel.ts';
import { type SdkPanel, startSdkPanel } from '../support/sdk-panel.ts';

describe('the TypeScript SDK against a live panel', { timeout: 60_000 }, () => {
  let live: SdkPanel;
  let vpn: VpnPanel;
  let serverId: number;

  before(async () => {
    live = await startSdkPanel();
    vpn = new VpnPanel({ baseUrl: live.baseUrl, apiKey: live.key });
    serverId = (await vpn.servers.create({ name: 'sdk-ts' })).id;
  });
  after(() => live.stop());

  it('lists 60 devices across pages of 25, each once and in order', async () => {
    const made = [];
    for (let i = 0; i < 60; i++) made.push((await vpn.devices.create({ server_id: serverId, name: `d${i}` })).id);
    const listed = [];
    for await (const device of vpn.devices.list({ server_id: serverId, limit: 25 })) listed.push(device.id);
    assert.deepEqual(listed, made);
  });

  it('throws one ApiError with status, code and fields for a duplicate name and a bad body', async () => {
    await vpn.devices.create({ server_id: serverId, name: 'twice' });
    const duplicate = await vpn.devices.create({ server_id: serverId, name: 'twice' }).catch((e: unknown) => e);
    assert.ok(duplicate instanceof ApiError, String(duplicate));
    assert.deepEqual({ status: duplicate.status, code: duplicate.code }, { status: 409, code: 'name_taken' });
    const invalid = await vpn.devices.update(1, { data_limit: -1 }).catch((e: unknown) => e);
    assert.ok(invalid instanceof ApiError, String(invalid));
    assert.equal(invalid.code, 'validation_failed');
    assert.ok('data_limit' in invalid.fields, JSON.stringify(invalid.fields));
  });

  it('passes 80 quick reads through the rate limit (bursts of 60) by waiting Retry-After', async () => {
    const statuses: number[] = [];
    const counting: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      statuses.push(response.status);
      return response;
    };
    const limited = new VpnPanel({ baseUrl: live.baseUrl, apiKey: live.limitedKey, fetch: counting });
    const reads = await Promise.all(Array.from({ length: 80 }, () => limited.servers.get(serverId)));
    assert.equal(reads.filter((s) => s.id === serverId).length, 80);
    assert.ok(statuses.includes(429), 'the limit was reached and retried');
  });

  it('sends a POST that may be retried again with the same Idempotency-Key after a 503: one device', async () => {
    const keys: (string | null)[] = [];
    // The first attempt reaches the panel, which makes the device, but its client sees a proxy's 503.
    const flaky: typeof fetch = async (input, init) => {
      keys.push(new Headers(init?.headers).get('idempotency-key'));
      const response = await fetch(input, init);
      return keys.length === 1 ? new Response('busy', { status: 503, headers: { 'retry-after': '0' } }) : response;
    };
    const retrying = new VpnPanel({ baseUrl: live.baseUrl, apiKey: live.key, fetch: flaky });
    const device = await retrying.devices.create({ server_id: serverId, name: 'once' });
    assert.equal(keys.length, 2);
    assert.ok(keys[0] !== null && keys[0] === keys[1], `one key on both attempts: ${keys.join(', ')}`);
    const named = [];
    for await (const d of vpn.devices.list({ search: 'once' })) named.push(d.id);
    assert.deepEqual(named, [device.id]);
  });

  it("accepts the panel's signed delivery and refuses a forged, a tampered and a stale one", async () => {
    const received: { headers: IncomingHttpHeaders; body: string }[] = [];
    const receiver = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk));
      request.on('end', () => {
        received.push({ headers: request.headers, body });
        response.writeHead(204).end();
      });
    });
    receiver.listen(0, '127.0.0.1');
    await once(receiver, 'listening');
    try {
      const address = receiver.address();
      assert.ok(address !== null && typeof address === 'object');
      const hook = await vpn.webhooks.create({
        url: `http://127.0.0.1:${address.port}/hook`,
        events: ['device.created'],
      });
      await vpn.webhooks.ping(hook.id);
      const deadline = Date.now() + 10_000;
      while (received.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      const delivery = received[0];
      assert.ok(delivery !== undefined, 'the ping arrived');
      const event = verifyWebhook(hook.secret, delivery.headers, delivery.body);
      assert.equal(event.kind, 'ping');

      const refused = (secret: string, headers: IncomingHttpHeaders, body: string, now?: number) =>
        assert.throws(() => verifyWebhook(secret, headers, body, now), WebhookVerificationError);
      refused(`whsec_${Buffer.alloc(32, 7).toString('base64')}`, delivery.headers, delivery.body);
      refused(hook.secret, delivery.headers, delivery.body.replace('ping', 'pong'));
      refused(hook.secret, { ...delivery.headers, 'webhook-signature': undefined }, delivery.body);
      refused(hook.secret, delivery.headers, delivery.body, Date.now() / 1000 + 600);
    } finally {
      receiver.close();
    }
  });

  it('reaches every operation of each namespace', async () => {
    const all = async <T>(items: AsyncIterable<T>): Promise<T[]> => {
      const found: T[] = [];
      for await (const item of items) found.push(item);
      return found;
    };
    assert.equal((await vpn.servers.get(serverId)).name, 'sdk-ts');
    assert.ok((await all(vpn.servers.list())).some((s) => s.id === serverId));
    assert.equal((await vpn.servers.update(serverId, { city: 'Frankfurt' })).city, 'Frankfurt');
    const [node] = await all(vpn.nodes.list());
    assert.ok(node !== undefined);
    assert.equal((await vpn.nodes.get(node.id)).id, node.id);

    const plan = await vpn.plans.create({ name: 'monthly', data_limit: 1e9, duration_days: 30, max_devices: 2 });
    assert.equal((await vpn.plans.get(plan.id)).name, 'monthly');
    assert.equal((await vpn.plans.update(plan.id, { max_devices: 3 })).max_devices, 3);
    assert.ok((await all(vpn.plans.list())).some((p) => p.id === plan.id));

    const device = await vpn.devices.create({ server_id: serverId, plan_id: plan.id, external_id: 'cust-1' });
    assert.equal((await vpn.devices.get(device.id)).external_id, 'cust-1');
    assert.equal((await vpn.devices.update(device.id, { name: 'renamed' })).name, 'renamed');
    assert.match(await vpn.devices.config(device.id), /\[Interface\]/);
    assert.ok(Array.isArray((await vpn.devices.usage(device.id)).daily));
    await vpn.devices.renew(device.id, { days: 1 });
    await vpn.devices.topUp(device.id, { bytes: 1000 });
    await vpn.devices.resetUsage(device.id);
    const other = await vpn.servers.create({ name: 'sdk-ts-2' });
    assert.equal((await vpn.devices.move(device.id, { server_id: other.id })).server_id, other.id);

    assert.equal((await vpn.groups.get('cust-1')).device_count, 1);
    assert.deepEqual(
      (await all(vpn.groups.devices('cust-1'))).map((d) => d.id),
      [device.id],
    );
    await vpn.groups.update('cust-1', { enabled: true });
    await vpn.groups.renew('cust-1', { days: 1 });
    await vpn.groups.resetUsage('cust-1');

    const link = await vpn.shareLinks.create(device.id);
    assert.deepEqual(await vpn.shareLinks.get(device.id), link);
    await vpn.shareLinks.delete(device.id);

    const hook = await vpn.webhooks.create({ url: 'https://receiver.example/hook', events: ['device.deleted'] });
    assert.equal((await vpn.webhooks.get(hook.id)).url, hook.url);
    assert.equal((await vpn.webhooks.update(hook.id, { enabled: false })).enabled, false);
    assert.ok((await all(vpn.webhooks.list())).some((w) => w.id === hook.id));
    assert.deepEqual(await all(vpn.webhooks.deliveries(hook.id)), []);
    await vpn.webhooks.delete(hook.id);

    assert.ok((await all(vpn.events.list({ kind: 'device.created' }))).length > 0);
    assert.ok((await all(vpn.activity.list())).length > 0);
    assert.ok(Array.isArray((await vpn.usage.get()).daily));

    await vpn.groups.delete('cust-1');
    await assert.rejects(vpn.devices.get(device.id), (e: unknown) => e instanceof ApiError && e.status === 404);
    await vpn.plans.delete(plan.id);
    await vpn.servers.delete(other.id);
  });

  it('is generated from the served document: regenerating changes nothing (npm run gen:sdk)', async () => {
    const file = await typescriptFile(await openApiDocument());
    assert.equal(readFileSync(`${ROOT}/${file.path}`, 'utf8'), file.text, `${file.path} is stale: npm run gen:sdk`);
  });
});
