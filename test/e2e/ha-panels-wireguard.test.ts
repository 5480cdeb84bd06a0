/**
 * End to end, as root: two `vpn-panel serve` processes on one PostgreSQL and one Redis
 * (docs/operating.md "Several panels (high availability)"), with a remote `vpn-panel node` driving real
 * WireGuard (wireguard-go) in a lab namespace and a client in another. Either panel serves the API and the
 * share page; every webhook is delivered once; a key's rate limit is one budget across both; the device's usage
 * equals the server interface's own counters byte for byte although the panel holding the duty lease (the one
 * collecting usage) is SIGKILLed mid-download; and a SIGKILLed lease holder is replaced within 15 s, measured
 * from the kill.
 *
 *   client ns PREFIX-c (wireguard-go) ── veth ── host ns PREFIX-h: the agent's server PREFIXn
 *                                                  └─ uplink ── internet ns PREFIX-i: iperf3 on 198.51.100.7
 *   panels A and B (root namespace, 127.0.0.1) ── HTTPS, pinned ── the agent on 127.0.0.1
 *
 * The lease row is read from the database (`duty_leases.holder` names the holder's process id), as an
 * operator would look. Everything lives in namespaces this file makes (prefix `h`), removed in `after()`.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdirSync } from 'node:fs';
import { createServer, type Server as HttpServer } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import type { components } from '../../console/src/api-types.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { connectDevice, endLab, LabAgent, LabPanel, need, settledPeerBytes } from '../support/lab-panel.ts';
import { hostOf, NetLab, requireRoot, unusedPrefix, waitFor, type WgClient } from '../support/netns.ts';
import type { ApiClient } from '../support/panel.ts';
import { allowedWithin, burst } from '../support/rate-limit.ts';

type Server = components['schemas']['Server'];
type Device = components['schemas']['Device'];

const skip = requireRoot([['iperf3', 'iperf3']]);
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
/** The file takes ~40 s on the 2-core test machine; a hang fails instead of blocking CI. */
const SUITE_TIMEOUT_MS = 180_000;
/** Issue #13: another panel takes the duties over within 15 s of a SIGKILL. */
const TAKEOVER_LIMIT_MS = 15_000;
/** TEST-NET-2 in the lab's internet namespace: where the client downloads from, through the tunnel. */
const DOWNLOAD_IP = '198.51.100.7';
const IPERF_PORT = 5201;
/** What both panels tell clients: the reverse proxy's address (share links carry it). */
const PANEL_URL = 'https://vpn.example.test';

describe('two panels on one PostgreSQL and Redis, a remote node with real WireGuard', {
  skip,
  timeout: SUITE_TIMEOUT_MS,
}, () => {
  let lab: NetLab | undefined;
  let db: TestDatabase | undefined;
  let agent: LabAgent | undefined;
  /** Panel A and panel B; each restarts on its own port after a kill. */
  const panels: LabPanel[] = [];
  /** The process id of each panel while it runs. */
  const pids: (number | undefined)[] = [];
  let server: Server;
  let leases: pg.Client | undefined;
  const clients: WgClient[] = [];

  const panel = (i: number): LabPanel => need(panels[i], `panel ${i}`);
  const api = (i: number): ApiClient => panel(i).api;

  /** Which panel holds the duty lease now, by the process id in `duty_leases.holder`; undefined: none. */
  async function holderIndex(): Promise<number | undefined> {
    const query = "select holder from duty_leases where name = 'duties'";
    const { rows } = await need(leases, 'a database connection').query<{ holder: string }>(query);
    const pid = Number(rows[0]?.holder.split('/')[1]);
    const index = pids.indexOf(pid);
    return index === -1 ? undefined : index;
  }

  async function newDevice(through: number, name: string): Promise<Device> {
    const created = await api(through).POST('/api/v1/devices', { body: { server_id: server.id, name } });
    assert.equal(created.response.status, 201, JSON.stringify(created.error));
    return need(created.data, 'a device');
  }

  /** SIGKILLs panel `i`; resolves once it has exited, with the wall-clock and monotonic times of the kill. */
  async function kill(i: number): Promise<{ wallMs: number; atMs: number }> {
    const killed = { wallMs: Date.now(), atMs: performance.now() };
    pids[i] = undefined;
    await panel(i).stop('SIGKILL');
    return killed;
  }

  async function start(i: number): Promise<void> {
    await panel(i).start();
    pids[i] = panel(i).process.process.pid;
  }

  before(async () => {
    lab = await NetLab.create(await unusedPrefix('h'));
    await lab.startIperfServer(DOWNLOAD_IP, IPERF_PORT);
    db = await createTestDatabase('postgres');
    leases = new pg.Client({ connectionString: db.env.DATABASE_URL });
    await leases.connect();
    agent = await LabAgent.start(lab, db);
    // Each panel its own DATA_DIR, as on a host of its own; the same secret, URL and Redis.
    const shared = {
      LOCAL_NODE: 'off',
      REDIS_URL,
      PANEL_SECRET: randomBytes(32).toString('base64'),
      PANEL_URL,
      WEBHOOK_ALLOW_PRIVATE: '1',
    };
    for (const name of ['panel-a', 'panel-b']) {
      const dataDir = join(db.dataDir, name);
      mkdirSync(dataDir, { mode: 0o700 });
      const started = await LabPanel.start(db, `e2e-${name}`, { ...shared, DATA_DIR: dataDir });
      panels.push(started);
      pids.push(started.process.process.pid);
    }
    const node = await agent.addTo(panel(0), 'edge');
    const created = await api(1).POST('/api/v1/servers', { body: { name: 'ha', node_id: node.id } });
    assert.equal(created.response.status, 201, JSON.stringify(created.error));
    server = need(created.data, 'a server');
  });

  after(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    await leases?.end();
    const problems = await endLab({ panels, agents: [agent], labs: [lab], database: db });
    assert.deepEqual(problems, [], 'cleanup left nothing behind');
  });

  test('either panel serves the API and the share page, with what the other wrote', async () => {
    const device = await newDevice(0, 'either-panel');
    const read = await api(1).GET('/api/v1/devices/{id}', { params: { path: { id: device.id } } });
    assert.equal(read.response.status, 200);
    assert.equal(read.data?.public_key, device.public_key, 'B reads what A made');
    const patched = await api(1).PATCH('/api/v1/devices/{id}', {
      params: { path: { id: device.id } },
      body: { name: 'renamed-by-b' },
    });
    assert.equal(patched.response.status, 200, JSON.stringify(patched.error));
    const again = await api(0).GET('/api/v1/devices/{id}', { params: { path: { id: device.id } } });
    assert.equal(again.data?.name, 'renamed-by-b', 'A reads what B changed');

    const shared = await api(1).POST('/api/v1/devices/{id}/share', { params: { path: { id: device.id } }, body: {} });
    assert.equal(shared.response.status, 201, JSON.stringify(shared.error));
    const url = need(shared.data, 'a share link').url;
    assert.ok(url.startsWith(`${PANEL_URL}/s/`), url);
    const path = url.slice(PANEL_URL.length);
    for (const { url: base } of panels) {
      const page = await fetch(`${base}${path}`);
      assert.equal(page.status, 200, `the share page from ${base}`);
      assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
      assert.ok((await page.text()).includes('renamed-by-b'), 'the page shows the device');
      const config = await fetch(`${base}${path}/config`);
      assert.equal(config.status, 200);
      assert.ok((await config.text()).includes(`Address = ${device.address}`), 'the config download');
    }
    const removed = await api(0).DELETE('/api/v1/devices/{id}', { params: { path: { id: device.id } } });
    assert.equal(removed.response.status, 204);
    for (const { url: base } of panels) assert.equal((await fetch(`${base}${path}`)).status, 404, 'gone on both');
  });

  test('every webhook of changes made through both panels is delivered, each exactly once', async () => {
    const received: { webhookId: string; eventId: number }[] = [];
    const receiver: HttpServer = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        received.push({ webhookId: String(request.headers['webhook-id']), eventId: Number(JSON.parse(body).id) });
        response.writeHead(204).end();
      });
    });
    receiver.listen(0, '127.0.0.1');
    await once(receiver, 'listening');
    try {
      const address = receiver.address();
      assert.ok(address !== null && typeof address === 'object');
      const hook = await api(0).POST('/api/v1/webhooks', {
        body: { url: `http://127.0.0.1:${address.port}/hook`, events: ['device.updated'] },
      });
      assert.equal(hook.response.status, 201, JSON.stringify(hook.error));
      const webhookId = need(hook.data, 'a webhook').id;
      const device = await newDevice(0, 'hooked');
      const changes = 24;
      for (let i = 0; i < changes; i++) {
        const answer = await api(i % 2).PATCH('/api/v1/devices/{id}', {
          params: { path: { id: device.id } },
          body: { metadata: { change: i } },
        });
        assert.equal(answer.response.status, 200, JSON.stringify(answer.error));
      }
      const events = await api(1).GET('/api/v1/events', {
        params: { query: { kind: 'device.updated', device_id: device.id, limit: 200 } },
      });
      const eventIds = (events.data?.data ?? []).map((e) => e.id).sort((a, b) => a - b);
      assert.equal(eventIds.length, changes, 'one device.updated per change');
      // Once no delivery is pending, every sender has recorded its attempt: nothing more will be sent.
      await waitFor(
        'every delivery to be recorded as delivered',
        async () => {
          const pending = await api(0).GET('/api/v1/webhooks/{id}/deliveries', {
            params: { path: { id: webhookId }, query: { state: 'pending' } },
          });
          return pending.data?.data.length === 0 && received.length >= changes ? true : undefined;
        },
        20_000,
        100,
      );
      const delivered = await api(1).GET('/api/v1/webhooks/{id}/deliveries', {
        params: { path: { id: webhookId }, query: { limit: 200 } },
      });
      assert.deepEqual(
        delivered.data?.data.map((d) => [d.state, d.attempts]),
        eventIds.map(() => ['delivered', 1]),
      );
      assert.deepEqual(
        received.map((r) => r.eventId).sort((a, b) => a - b),
        eventIds,
        'each event arrived exactly once',
      );
      assert.equal(new Set(received.map((r) => r.webhookId)).size, changes, 'no webhook-id twice');
      const removed = await api(0).DELETE('/api/v1/webhooks/{id}', { params: { path: { id: webhookId } } });
      assert.equal(removed.response.status, 204);
    } finally {
      receiver.close();
    }
  });

  test("one rate limit: a key's budget spent through panel A is spent at panel B", async () => {
    const limited = await panel(0).process.createKey('e2e-ha-limited', 'servers:read');
    const started = performance.now();
    const atA = await burst([panel(0).url], limited, 60);
    const atB = await burst([panel(1).url], limited, 40);
    const seconds = (performance.now() - started) / 1000;
    const passedA = atA.answers.filter((a) => a.status === 200).length;
    const passedB = atB.answers.filter((a) => a.status === 200).length;
    assert.equal(passedA, 60, 'the burst of 60 passes at A');
    // Alone, B would pass all 40; sharing the budget, only what refilled meanwhile.
    assert.ok(passedA + passedB <= allowedWithin(seconds), `${passedA} + ${passedB} passed in ${seconds.toFixed(3)} s`);
    assert.ok(
      atB.answers.some((a) => a.status === 429 && a.code === 'rate_limited'),
      'B refuses the key',
    );
  });

  test('usage equals the server counters byte for byte with the lease holder SIGKILLed mid-download', async (t) => {
    const device = await newDevice(0, 'downloader');
    const client = await connectDevice(need(lab, 'the lab'), server, device, [`${DOWNLOAD_IP}/32`]);
    clients.push(client);
    assert.ok(await need(lab, 'the lab').waitForPing(hostOf(server.address), 10_000), 'the client reaches its server');
    let downloading = true;
    const download = need(lab, 'the lab')
      .iperf(DOWNLOAD_IP, IPERF_PORT, 'download', 12, '20M')
      .finally(() => {
        downloading = false;
      });
    // Kill the holder once it has booked part of the download: it dies between collections, or in one.
    const holder = await waitFor('a lease holder', holderIndex, 15_000, 100);
    await waitFor(
      'part of the download to be booked',
      async () => {
        const got = await api(holder).GET('/api/v1/devices/{id}', { params: { path: { id: device.id } } });
        return (got.data?.month_usage.rx_bytes ?? 0) > 1_000_000 ? true : undefined;
      },
      10_000,
      100,
    );
    assert.ok(downloading, 'the download still runs when the holder is killed');
    await kill(holder);
    const mbps = await download;
    t.diagnostic(`panel ${holder} SIGKILLed mid-download; iperf3 ${mbps.toFixed(1)} Mbit/s`);
    await start(holder);

    const truth = await settledPeerBytes(need(lab, 'the lab'), server.id, device.public_key);
    assert.ok(truth.rx_bytes > 10_000_000, `a real download happened: ${JSON.stringify(truth)}`);
    const survivor = 1 - holder;
    const usage = async () =>
      (await api(survivor).GET('/api/v1/devices/{id}', { params: { path: { id: device.id } } })).data?.month_usage;
    const recorded = await waitFor(
      'the panels to record every byte',
      async () => {
        const month = await usage();
        return month?.rx_bytes === truth.rx_bytes && month.tx_bytes === truth.tx_bytes ? month : undefined;
      },
      30_000,
      250,
    ).catch(usage);
    t.diagnostic(`server counters ${JSON.stringify(truth)}, panel ${JSON.stringify(recorded)}`);
    assert.deepEqual(
      recorded && { rx_bytes: recorded.rx_bytes, tx_bytes: recorded.tx_bytes },
      truth,
      'exactly the bytes the interface counted',
    );
    const fromOther = await api(holder).GET('/api/v1/devices/{id}', { params: { path: { id: device.id } } });
    assert.equal(fromOther.data?.month_usage.rx_bytes, truth.rx_bytes, 'the restarted panel shows the same');
    await client.close();
  });

  test(
    'a SIGKILLed lease holder is replaced within 15 s: ' + 'the other panel takes the lease and checks the node',
    async (t) => {
      const holder = await waitFor('a lease holder', holderIndex, 15_000, 100);
      const survivor = 1 - holder;
      const killed = await kill(holder);
      const takenMs = await waitFor(
        'the other panel to take the lease',
        async () => ((await holderIndex()) === survivor ? performance.now() - killed.atMs : undefined),
        2 * TAKEOVER_LIMIT_MS,
        50,
      );
      const checkedMs = await waitFor(
        'the node checked again after the kill',
        async () => {
          const { data } = await api(survivor).GET('/api/v1/nodes');
          const seen = data?.data.find((n) => n.name === 'edge')?.last_seen_at;
          return seen != null && Date.parse(seen) > killed.wallMs ? performance.now() - killed.atMs : undefined;
        },
        2 * TAKEOVER_LIMIT_MS,
        100,
      );
      t.diagnostic(
        `panel ${holder} SIGKILLed: lease taken by panel ${survivor} after ${takenMs.toFixed(0)} ms, ` +
          `node checked after ${checkedMs.toFixed(0)} ms`,
      );
      assert.ok(takenMs < TAKEOVER_LIMIT_MS, `lease taken over ${takenMs.toFixed(0)} ms after the kill`);
      assert.ok(checkedMs < TAKEOVER_LIMIT_MS, `node monitor resumed ${checkedMs.toFixed(0)} ms after the kill`);
      await start(holder);
      assert.equal(await holderIndex(), survivor, 'a panel that starts does not take a lease that is held');
      const got = await api(holder).GET('/api/v1/servers/{id}', { params: { path: { id: server.id } } });
      assert.equal(got.data?.status, 'running', 'and serves the API at once');
    },
  );
});
