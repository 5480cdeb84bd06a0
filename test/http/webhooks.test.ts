import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { type ApiCall, callApi, type PanelProcess, startPanel } from '../support/panel.ts';

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A real HTTP receiver on loopback; `answer` decides each response status (or hangs with 0). */
class Receiver {
  readonly received: Received[] = [];
  answer: (r: Received) => number = () => 200;
  #server: Server | undefined;

  async start(): Promise<void> {
    this.#server = createServer(async (req, res) => {
      let body = '';
      for await (const chunk of req) body += String(chunk);
      const got = { path: req.url ?? '', headers: req.headers, body };
      this.received.push(got);
      const status = this.answer(got);
      if (status === 0) return; // hang
      res.writeHead(status).end();
    });
    this.#server.listen(0, '127.0.0.1');
    await once(this.#server, 'listening');
  }

  url(path: string): string {
    const address = this.#server?.address();
    if (address === null || address === undefined || typeof address === 'string') throw new Error('not listening');
    return `http://127.0.0.1:${address.port}${path}`;
  }

  on(path: string): Received[] {
    return this.received.filter((r) => r.path === path);
  }

  async stop(): Promise<void> {
    this.#server?.closeAllConnections();
    this.#server?.close();
  }
}

async function until<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('webhooks: signed, durable, at-least-once delivery', () => {
  let db: TestDatabase;
  let panel: PanelProcess;
  let key: string;
  const receiver = new Receiver();
  const env = { WEBHOOK_ALLOW_PRIVATE: '1', WEBHOOK_RETRY_SCHEDULE: '0.2,0.2,0.2' };

  const call: ApiCall = (method, path, body) => callApi(panel.url, key, method, path, body);

  async function webhook(path: string, events: string[]): Promise<{ id: number; secret: string }> {
    return (await call('POST', '/webhooks', { url: receiver.url(path), events, description: path })).expect(201);
  }

  before(async () => {
    db = await createTestDatabase('sqlite');
    await receiver.start();
    panel = await startPanel({ database: db, env });
    key = await panel.createKey('shop', 'all', ['--no-rate-limit']);
  });
  after(async () => {
    await panel.stop('SIGKILL');
    await receiver.stop();
    await db.drop();
  });

  it('sends a ping that verifies with the standardwebhooks package; the secret is shown once', async () => {
    const hook = await webhook('/ping', ['device.created']);
    assert.match(hook.secret, /^whsec_/);
    assert.equal('secret' in (await call('GET', `/webhooks/${hook.id}`)).expect(200), false);
    const ping = (await call('POST', `/webhooks/${hook.id}/ping`)).expect(200);
    assert.equal(ping.kind, 'ping');
    assert.equal(ping.state, 'pending');
    const got = await until('the ping', () => receiver.on('/ping')[0]);
    const verified = new Webhook(hook.secret).verify(got.body, {
      'webhook-id': String(got.headers['webhook-id']),
      'webhook-timestamp': String(got.headers['webhook-timestamp']),
      'webhook-signature': String(got.headers['webhook-signature']),
    });
    assert.equal((verified as { kind: string }).kind, 'ping');
    const delivered = await until('delivered state', async () => {
      const list = (await call('GET', `/webhooks/${hook.id}/deliveries?state=delivered`)).expect(200);
      return list.data.length > 0 ? list.data[0] : undefined;
    });
    assert.equal(delivered.response_status, 200);
    assert.equal(delivered.attempts, 1);
  });

  it('delivers device.created with the Event object as payload, and nothing it does not subscribe to', async () => {
    await webhook('/created', ['device.created']);
    const server = (await call('POST', '/servers', { name: 'wh-1' })).expect(201);
    const device = (await call('POST', '/devices', { server_id: server.id, name: 'watched' })).expect(201);
    const got = await until('device.created', () =>
      receiver.on('/created').find((r) => JSON.parse(r.body).device_id === device.id),
    );
    const events = (await call('GET', `/events?device_id=${device.id}&kind=device.created`)).expect(200);
    assert.deepEqual(JSON.parse(got.body), events.data[0]);
    assert.doesNotMatch(got.body, /PrivateKey|private_key|vpnk_/, 'no key in a payload');
    assert.equal(receiver.on('/created').filter((r) => JSON.parse(r.body).kind === 'server.created').length, 0);
  });

  it('retries a receiver that answers 500 twice, with the same webhook-id, until it is delivered', async () => {
    let calls = 0;
    receiver.answer = (r) => (r.path === '/flaky' && ++calls <= 2 ? 500 : 200);
    const hook = await webhook('/flaky', ['server.created']);
    await call('POST', '/servers', { name: 'wh-2' });
    const delivery = await until('three attempts', async () => {
      const list = (await call('GET', `/webhooks/${hook.id}/deliveries`)).expect(200);
      const d = list.data[0];
      return d?.state === 'delivered' ? d : undefined;
    });
    receiver.answer = () => 200;
    assert.equal(delivery.attempts, 3);
    const attempts = receiver.on('/flaky');
    assert.equal(attempts.length, 3);
    assert.equal(new Set(attempts.map((a) => a.headers['webhook-id'])).size, 1, 'one webhook-id across retries');
  });

  it('turns a webhook off when its receiver answers 410 Gone', async () => {
    receiver.answer = (r) => (r.path === '/gone' ? 410 : 200);
    const hook = await webhook('/gone', ['server.created']);
    await call('POST', `/webhooks/${hook.id}/ping`);
    const disabled = async () => {
      const now = (await call('GET', `/webhooks/${hook.id}`)).expect(200);
      return now.enabled === false ? true : undefined;
    };
    await until('disabled', disabled);
    receiver.answer = () => 200;
    // The panel turned it off, not the ping's request: in the activity log by `system`, without a request id.
    const logged = await panel.cli(['activity', '--resource', 'webhook', '--id', String(hook.id), '--json']);
    const entries: { action: string; actor: string; request_id: string | null }[] = JSON.parse(logged.stdout).data;
    assert.deepEqual(entries.map((e) => [e.action, e.actor, e.request_id]).at(-1), [
      'webhook.disabled',
      'system',
      null,
    ]);
  });

  it('keeps GET /devices fast while a receiver hangs', async () => {
    receiver.answer = (r) => (r.path === '/hang' ? 0 : 200);
    const hook = await webhook('/hang', ['device.created']);
    const server = (await call('POST', '/servers', { name: 'wh-3' })).expect(201);
    for (let i = 0; i < 30; i++) await call('POST', '/devices', { server_id: server.id });
    await until('the hanging receiver to be called', () => (receiver.on('/hang').length > 0 ? true : undefined));
    const started = performance.now();
    for (let i = 0; i < 20; i++) assert.equal((await call('GET', '/devices?limit=50')).status, 200);
    const perRequestMs = (performance.now() - started) / 20;
    assert.ok(perRequestMs < 250, `GET /devices took ${perRequestMs.toFixed(1)} ms a request while a receiver hangs`);
    await call('DELETE', `/webhooks/${hook.id}`);
    receiver.answer = () => 200;
  });

  it('delivers what was pending when the panel was killed, after it starts again', async () => {
    receiver.answer = (r) => (r.path === '/durable' ? 503 : 200);
    const hook = await webhook('/durable', ['server.created']);
    const server = (await call('POST', '/servers', { name: 'wh-4' })).expect(201);
    await until('a failed first attempt', () => (receiver.on('/durable').length > 0 ? true : undefined));
    await panel.stop('SIGKILL');
    receiver.answer = () => 200;
    panel = await startPanel({ database: db, env });
    // A delivery the killed panel had just claimed stays held for its claim (twice the 15 s attempt
    // timeout plus a margin) before the new panel may take it: wait out that bound.
    const delivered = await until(
      'delivery after restart',
      async () => {
        const list = (await call('GET', `/webhooks/${hook.id}/deliveries?state=delivered`)).expect(200);
        return list.data.find((d) => d.payload.server_id === server.id);
      },
      45_000,
    );
    // At least once: the receiver got the same message before the kill and again after it. (An
    // attempt in flight when the panel was killed is not in `attempts`: its record died with it.)
    const seen = receiver.on('/durable').filter((r) => JSON.parse(r.body).server_id === server.id);
    assert.ok(seen.length >= 2, `received ${seen.length} times`);
    assert.equal(new Set(seen.map((r) => r.headers['webhook-id'])).size, 1, 'one webhook-id for every attempt');
    assert.ok(delivered.attempts >= 1);
  });

  it('manages webhooks: list, change, delete; refuses unknown kinds', async () => {
    const hook = await webhook('/crud', ['device.deleted']);
    assert.ok((await call('GET', '/webhooks?limit=200')).expect(200).data.some((w) => w.id === hook.id));
    const change = { events: ['device.moved', 'device.expired'], enabled: false };
    const changed = (await call('PATCH', `/webhooks/${hook.id}`, change)).expect(200);
    assert.deepEqual(changed.events, ['device.moved', 'device.expired']);
    assert.equal(changed.enabled, false);
    const bad = await call('POST', '/webhooks', { url: receiver.url('/x'), events: ['device.exploded'] });
    assert.equal(bad.status, 422);
    // The document lists the kinds (schemathesis: any text was documented), so the schema names the item.
    assert.deepEqual(Object.keys(bad.error?.fields ?? {}), ['events.0']);
    assert.equal((await call('GET', `/webhooks/${hook.id}/deliveries`)).expect(200).data.length, 0);
    assert.equal((await call('DELETE', `/webhooks/${hook.id}`)).status, 204);
    assert.equal((await call('GET', `/webhooks/${hook.id}`)).status, 404);
    // The deliveries page's check of its webhook sees the delete at the next request.
    const gone = await call('GET', `/webhooks/${hook.id}/deliveries`);
    assert.equal(gone.status, 404);
    assert.equal(gone.error?.code, 'not_found');
  });
});

describe('webhooks: targets on private addresses are refused unless allowed', () => {
  let db: TestDatabase;
  let panel: PanelProcess;
  let key: string;
  before(async () => {
    db = await createTestDatabase('sqlite');
    panel = await startPanel({ database: db });
    key = await panel.createKey('shop', 'webhooks:write');
  });
  after(async () => {
    await panel.stop();
    await db.drop();
  });

  for (const url of [
    'http://127.0.0.1:9/x',
    'http://10.0.0.1/x',
    'http://169.254.169.254/latest/meta-data',
    'http://[::1]:9/x',
    'http://localhost:9/x',
    'http://100.64.0.1/x',
    'ftp://example.com/x',
  ]) {
    it(`refuses ${url}`, async () => {
      const response = await fetch(`${panel.url}/api/v1/webhooks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url, events: ['device.created'] }),
      });
      assert.equal(response.status, 422);
      const body = await response.json();
      assert.equal(body.error.code, 'validation_failed');
      assert.ok('url' in body.error.fields);
    });
  }
});
