/**
 * End to end, as root, renewals and first-handshake plans as a shop uses them (issue 26 items 2 and 4): the panel over
 * HTTP with an API key, a remote `vpn-panel node` on real WireGuard, and wireguard-go clients set up from the configs
 * the API returned. A device cut off at its data limit, and one cut off at its expiry, pass traffic again through the
 * same client (its config unchanged) after `POST /devices/{id}/renew`; a repeated renewal with the same
 * Idempotency-Key moves the expiry once. A device of a plan with `expiry_starts: first_handshake` has no expiry until
 * its client's first handshake, as the node reports it through its usage collection, and then that handshake + the
 * plan's days, with one `device.updated` event.
 *
 *   client ns PREFIX-c (wireguard-go PREFIX-wN) ══ tunnel ══ server ns PREFIX-s1 ── NAT ── host ns PREFIX-h
 *                                                                                     └── internet ns: iperf3
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { components, paths } from '../../console/src/api-types.ts';
import { need, ok } from '../support/lab-panel.ts';
import { LabNode } from '../support/lab-node.ts';
import { hostOf, randomPrefix, requireRoot, sleep, waitFor } from '../support/netns.ts';

type Server = components['schemas']['Server'];
type Device = components['schemas']['Device'];
type DeviceCreate = NonNullable<paths['/api/v1/devices']['post']['requestBody']>['content']['application/json'];

const skip = requireRoot();
const DATA_LIMIT = 2_000_000;
const DAY_MS = 86_400_000;
/** TEST-NET-2, in the lab's internet namespace beyond the host's uplink. */
const DOWNLOAD_IP = '198.51.100.7';
/**
 * How long a renewed device's unchanged client may take to pass traffic again: the server forgot the session with
 * the removed peer, and wireguard-go starts a new handshake once its data has gone unanswered (about 15 s).
 */
const BACK_WITHIN_MS = 30_000;
/** The node monitor collects usage and handshakes every 5 s (NODE_MONITOR_DEFAULTS); a loaded machine may add one. */
const COLLECTION_MS = 10_000;

describe('renewals and first-handshake plans through the API (remote node, real clients)', {
  skip,
  timeout: 240_000,
}, () => {
  let labNode: LabNode | undefined;
  let server: Server | undefined;

  const lab = (): LabNode => need(labNode, 'the lab');

  async function createDevice(body: DeviceCreate): Promise<Device> {
    return ok(await lab().api.POST('/api/v1/devices', { body }), 'POST /devices');
  }

  function renew(id: number, key?: string): Promise<Device> {
    const headers = key === undefined ? {} : { 'Idempotency-Key': key };
    return lab()
      .api.POST('/api/v1/devices/{id}/renew', { params: { path: { id } }, headers, body: { days: 30 } })
      .then((answer) => ok(answer, `POST /devices/${id}/renew`));
  }

  /** Pings the server's tunnel address from the client until it answers; the time it took. */
  async function backWithin(): Promise<number> {
    const startedMs = Date.now();
    assert.ok(await lab().lab.waitForPing(hostOf(need(server, 'the server').address), BACK_WITHIN_MS), 'traffic again');
    return Date.now() - startedMs;
  }

  before(async () => {
    labNode = await LabNode.start({
      prefix: `rn${randomPrefix('r').slice(2)}`,
      keyName: 'e2e-renew',
      internetIp: DOWNLOAD_IP,
    });
    server = await labNode.addServer('renew');
  });

  after(async () => {
    const problems = (await labNode?.end()) ?? [];
    assert.deepEqual(problems, [], 'cleanup left nothing behind');
  });

  test('a device cut off at its data limit passes traffic again through the same client after a renewal', async (t) => {
    const s = need(server, 'the server');
    const device = await createDevice({ server_id: s.id, data_limit: DATA_LIMIT, limit_period: 'total' });
    const client = await lab().connect(s, device);
    assert.ok(await lab().lab.waitForPing(hostOf(s.address), 10_000), 'the client reaches the server');
    const options = { bitrate: '20M', seconds: 60, deadlineMs: 40_000 };
    await lab().downloadUntilCut(s.id, device.public_key, DATA_LIMIT, options);
    await lab().waitForStatus(device.id, 'limit_reached', 15_000);
    assert.equal(await lab().lab.ping(hostOf(s.address)), false, 'a cut-off device passes nothing');

    const renewed = await renew(device.id);
    assert.equal(renewed.status, 'active');
    assert.equal(renewed.period_usage.total_bytes, 0, 'the renewal restarts the count');
    assert.notEqual(await lab().peerBytes(s.id, device.public_key), undefined, 'the peer is back when renew answers');
    const tookMs = await backWithin();
    t.diagnostic(`limit-reached device: renew answered → the unchanged client's ping answered in ${tookMs} ms`);
    assert.equal((await lab().events('device.renewed', device.id)).length, 1, 'one device.renewed');
    await client.close();
  });

  test('an expired device comes back with a renewal; the same Idempotency-Key renews once', async (t) => {
    const s = need(server, 'the server');
    const expiresAt = new Date(Date.now() + 4000).toISOString();
    const device = await createDevice({ server_id: s.id, expires_at: expiresAt });
    const client = await lab().connect(s, device);
    assert.ok(await lab().lab.waitForPing(hostOf(s.address), 3500), 'the client reaches the server before expiry');
    await waitFor(
      'the peer to leave at its expiry',
      async () => ((await lab().peerBytes(s.id, device.public_key)) === undefined ? true : undefined),
      15_000,
      100,
    );
    assert.equal((await lab().device(device.id)).status, 'expired');

    const key = randomUUID();
    const renewedAtMs = Date.now();
    const renewed = await renew(device.id, key);
    assert.equal(renewed.status, 'active');
    const expiry = Date.parse(need(renewed.expires_at ?? undefined, 'an expiry'));
    // An expired device counts from now: max(now, expires_at) + 30 days.
    assert.ok(Math.abs(expiry - (renewedAtMs + 30 * DAY_MS)) < 5000, `expires_at ${renewed.expires_at}`);
    const tookMs = await backWithin();
    t.diagnostic(`expired device: renew answered → the unchanged client's ping answered in ${tookMs} ms`);

    const again = await lab().api.POST('/api/v1/devices/{id}/renew', {
      params: { path: { id: device.id } },
      headers: { 'Idempotency-Key': key },
      body: { days: 30 },
    });
    assert.equal(again.response.headers.get('idempotent-replayed'), 'true');
    assert.equal(again.data?.expires_at, renewed.expires_at, 'the replay answers the first renewal');
    assert.equal((await lab().device(device.id)).expires_at, renewed.expires_at, 'the expiry moved once');
    assert.equal((await lab().events('device.renewed', device.id)).length, 1, 'one device.renewed');
    await client.close();
  });

  test("a first-handshake plan's clock starts at the client's first handshake, not before", async (t) => {
    const s = need(server, 'the server');
    const plan = ok(
      await lab().api.POST('/api/v1/plans', {
        body: { name: 'week-from-first-use', duration_days: 7, expiry_starts: 'first_handshake' },
      }),
      'POST /plans',
    );
    const device = await createDevice({ server_id: s.id, plan_id: plan.id });
    assert.equal(device.expires_at, null, 'no clock before a handshake');
    // Two collections of the node's usage with no handshake: still no clock.
    await sleep(2 * COLLECTION_MS);
    const waiting = await lab().device(device.id);
    assert.equal(waiting.expires_at, null, 'no handshake, no clock');
    assert.equal(waiting.last_handshake, null);
    assert.equal((await lab().events('device.updated', device.id)).length, 0);

    const connectedMs = Date.now();
    await lab().connect(s, device);
    assert.ok(await lab().lab.waitForPing(hostOf(s.address), 10_000), 'the client reaches the server');
    const answeredMs = Date.now();
    const started = await waitFor(
      'the clock to start',
      async () => {
        const now = await lab().device(device.id);
        return now.expires_at === null ? undefined : now;
      },
      3 * COLLECTION_MS,
      250,
    );
    const shownMs = Date.now();
    const expiry = Date.parse(need(started.expires_at ?? undefined, 'an expiry'));
    const handshake = Date.parse(need(started.last_handshake ?? undefined, "the node's handshake"));
    t.diagnostic(
      `handshake (node) ${started.last_handshake}, expires_at ${started.expires_at}; shown ` +
        `${shownMs - answeredMs} ms after the first ping answered`,
    );
    assert.equal(expiry - handshake, 7 * DAY_MS, "the node's handshake + 7 days");
    // wg counts handshakes in whole seconds: the one the node reports lies within the test's bracket of it.
    assert.ok(handshake >= connectedMs - 1000 && handshake <= answeredMs, `handshake ${started.last_handshake}`);
    const events = await lab().events('device.updated', device.id);
    assert.equal(events.length, 1, 'one device.updated');
    assert.equal(need(events[0], 'the event').actor, 'system');

    await sleep(COLLECTION_MS);
    assert.equal((await lab().device(device.id)).expires_at, started.expires_at, 'started once');
    assert.equal((await lab().events('device.updated', device.id)).length, 1, 'still one device.updated');
  });
});
