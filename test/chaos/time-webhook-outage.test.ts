/**
 * Chaos: a webhook receiver down for the whole retry schedule, compressed in time, then up (issue 27). A panel
 * started as the README starts it, with the production schedule divided by 5,000 (WEBHOOK_RETRY_SCHEDULE), sends
 * the events of several devices to two real receivers on loopback:
 * - A refuses connections, then answers 500, until each device's first event has had all attempts but the
 *   last, its later events none (they wait for it); then it takes them: each event arrives, once per
 *   `webhook-id` (at least once; duplicates are counted and reported), every device's in the order of its
 *   changes, and the deliveries list shows every attempt;
 * - B (device.created only) answers 500 for ever: past the schedule each delivery is `failed` after exactly
 *   eight attempts, no ninth is sent, the webhook stays on (only 410 turns it off) and the events stay in GET
 *   /events (docs/api.md "Receiving deliveries").
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { components } from '../../console/src/api-types.ts';
import { RETRY_SCHEDULE_MS } from '../../src/domain/webhooks.ts';
import { compressedSchedule, ScriptedReceiver, scheduleTotalMs } from '../support/chaos-time.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';
import { waitFor } from '../support/netns.ts';
import { type ApiCall, callApi, freePort, type PanelProcess, startPanel } from '../support/panel.ts';

type Delivery = components['schemas']['WebhookDelivery'];

const SCHEDULE = compressedSchedule(5_000);
/** Attempts of one delivery: the first and one per step of the schedule. */
const ATTEMPTS = RETRY_SCHEDULE_MS.length + 1;
const DEVICES = 4;
const KINDS = ['device.created', 'device.updated', 'device.disabled', 'device.enabled'] as const;
/** How long the whole schedule may take here: its waits (at most +10 % jitter) and the sender's polls. */
const SCHEDULE_BOUND_MS = scheduleTotalMs(SCHEDULE) * 1.1 + ATTEMPTS * 1_000 + 10_000;

for (const kind of DATABASE_KINDS) {
  describe(`a webhook receiver down for the whole retry schedule, then up (${kind})`, () => {
    let database: TestDatabase;
    let panel: PanelProcess;
    let key: string;
    let down: ScriptedReceiver;
    let dead: ScriptedReceiver;
    const call: ApiCall = (method, path, body) => callApi(panel.url, key, method, path, body);

    before(async () => {
      database = await createTestDatabase(kind);
      down = new ScriptedReceiver(await freePort());
      dead = new ScriptedReceiver(await freePort());
      await dead.set('fail');
      panel = await startPanel({
        database,
        env: { WEBHOOK_ALLOW_PRIVATE: '1', WEBHOOK_RETRY_SCHEDULE: SCHEDULE, LOCAL_NODE: 'on' },
      });
      key = await panel.createKey('chaos', 'all', ['--no-rate-limit']);
    });

    after(async () => {
      await panel?.stop();
      await down?.close();
      await dead?.close();
      await database?.drop();
    });

    const deliveries = async (webhookId: number): Promise<Delivery[]> =>
      (await call('GET', `/webhooks/${webhookId}/deliveries?limit=200`)).expect(200).data;

    /** Waits until every delivery of the webhook (`count` of them) satisfies `done`; returns them. */
    const untilEvery = async (
      webhookId: number,
      count: number,
      what: string,
      done: (d: Delivery, all: Delivery[]) => boolean,
    ) => {
      let last: Delivery[] = [];
      try {
        return await waitFor(
          what,
          async () => {
            last = await deliveries(webhookId);
            const all = last;
            return all.length === count && all.every((d) => done(d, all)) ? all : undefined;
          },
          SCHEDULE_BOUND_MS,
          100,
        );
      } catch (error) {
        const states = last.map((d) => `${d.kind} ${d.state} ${d.attempts} ${d.error ?? ''}`);
        throw new Error(`${String(error)}; ${last.length} of ${count} deliveries: ${states.join('; ')}`);
      }
    };

    test('every event once by webhook-id after the outage; one down past the schedule fails', async (t) => {
      const events = [...KINDS];
      const hookA = (await call('POST', '/webhooks', { url: down.url, events })).expect(201).id;
      const hookB = (await call('POST', '/webhooks', { url: dead.url, events: ['device.created'] })).expect(201).id;
      const server = (await call('POST', '/servers', { name: 'chaos-time-1', max_devices: 50 })).expect(201).id;

      // The events of several devices, interleaved, while A refuses connections.
      const devices: number[] = [];
      for (let i = 0; i < DEVICES; i++) {
        devices.push((await call('POST', '/devices', { server_id: server, name: `d${i}` })).expect(201).id);
      }
      for (const id of devices) (await call('PATCH', `/devices/${id}`, { data_limit: 1_000_000 })).expect(200);
      for (const id of devices) (await call('PATCH', `/devices/${id}`, { enabled: false })).expect(200);
      for (const id of devices) (await call('PATCH', `/devices/${id}`, { enabled: true })).expect(200);
      // A change may make two events (disabling: device.updated and device.disabled); each has its delivery.
      const count = (await deliveries(hookA)).length;
      assert.ok(count >= DEVICES * KINDS.length, `${count} deliveries`);

      // Each device's first event is retried; its later ones wait for it, unattempted.
      const isFirst = (d: Delivery, all: Delivery[]) =>
        !all.some((e) => e.payload.device_id === d.payload.device_id && e.event_id < d.event_id);
      const firstsTried = (attempts: number) => (d: Delivery, all: Delivery[]) =>
        isFirst(d, all) ? d.attempts >= attempts : d.attempts === 0;
      const refused = await untilEvery(hookA, count, 'three refused attempts each first', firstsTried(3));
      const firsts = refused.filter((d) => isFirst(d, refused));
      assert.equal(firsts.length, DEVICES);
      assert.ok(
        firsts.every((d) => d.state === 'pending' && d.response_status === null && /ECONNREFUSED/.test(d.error ?? '')),
        JSON.stringify(firsts.slice(0, 2)),
      );
      await down.set('fail');
      const failing = ATTEMPTS - 1;
      const waited = await untilEvery(hookA, count, `${failing} attempts each first`, firstsTried(failing));
      assert.ok(
        waited.every((d) => isFirst(d, waited) || (d.state === 'pending' && d.attempts === 0)),
        'later events wait, unattempted',
      );
      await down.set('accept');

      const delivered = await untilEvery(hookA, count, 'every delivery delivered', (d) => d.state !== 'pending');
      const failed = await untilEvery(hookB, DEVICES, 'every delivery failed', (d) => d.state !== 'pending');

      // A: each event once by webhook-id, every attempt in the deliveries list.
      const eventIds = delivered.map((d) => d.event_id).sort((x, y) => x - y);
      const taken = down.accepted();
      assert.deepEqual(
        [...taken.values()].map((v) => v.eventId).sort((x, y) => x - y),
        eventIds,
        'each event taken, under one webhook-id',
      );
      const duplicates = [...taken.values()].reduce((sum, v) => sum + v.times - 1, 0);
      t.diagnostic(`${count} events, ${taken.size} distinct webhook-ids taken, ${duplicates} duplicates`);
      for (const d of delivered) {
        assert.equal(d.state, 'delivered', JSON.stringify(d));
        const attempts = isFirst(d, delivered) ? ATTEMPTS : 1;
        assert.equal(d.attempts, attempts, `all ${attempts} attempts counted: ${JSON.stringify(d)}`);
        assert.equal(d.response_status, 200);
        assert.equal(d.next_attempt_at, null);
      }
      const seenByA = new Map<string, number>();
      for (const post of down.posts) seenByA.set(post.webhookId, (seenByA.get(post.webhookId) ?? 0) + 1);
      for (const [webhookId, seen] of seenByA) {
        assert.ok(seen <= ATTEMPTS - 3, `${webhookId}: ${seen} requests reached A, after 3 refused of ${ATTEMPTS}`);
      }

      // Per device, the events carry ids in the order of the changes, and arrive in that order: every request
      // A saw (taken or not) is for the device's earliest event not yet taken.
      for (const device of devices) {
        const mine = delivered.filter((d) => d.payload.device_id === device).sort((x, y) => x.event_id - y.event_id);
        const kinds = mine.map((d) => d.kind);
        assert.deepEqual(
          kinds.filter((k) => k !== 'device.updated'),
          KINDS.filter((k) => k !== 'device.updated'),
          `device ${device}: its events in the order of its changes (${kinds.join(', ')})`,
        );
        const arrived = down.posts.filter((post) => post.deviceId === device).map((post) => post.eventId);
        const inOrder = arrived.every((id, i) => i === 0 || id >= (arrived[i - 1] ?? 0));
        assert.ok(inOrder, `device ${device}: arrivals in the order of its events (${arrived.join(', ')})`);
        const takenOfDevice = [...taken.values()].filter((v) => v.deviceId === device).map((v) => v.eventId);
        assert.deepEqual(
          takenOfDevice,
          mine.map((d) => d.event_id),
        );
      }

      // B: past the schedule every delivery is failed after exactly ATTEMPTS attempts, and nothing more is sent.
      for (const d of failed) {
        assert.equal(d.state, 'failed', JSON.stringify(d));
        assert.equal(d.attempts, ATTEMPTS);
        assert.equal(d.response_status, 500);
        assert.equal(d.error, 'HTTP 500');
        assert.equal(d.next_attempt_at, null);
      }
      const tries = new Map<string, number>();
      for (const post of dead.posts) tries.set(post.webhookId, (tries.get(post.webhookId) ?? 0) + 1);
      assert.equal(tries.size, DEVICES);
      assert.deepEqual(new Set(tries.values()), new Set([ATTEMPTS]), `${ATTEMPTS} attempts reached B per webhook-id`);

      // The webhook stays on and the events stay: the next event is sent to it again.
      assert.equal((await call('GET', `/webhooks/${hookB}`)).expect(200).enabled, true);
      const listed = (await call('GET', '/events?limit=200')).expect(200).data.map((e) => e.id);
      for (const id of eventIds) assert.ok(listed.includes(id), `event ${id} still listed`);
      const postsBefore = dead.posts.length;
      (await call('POST', '/devices', { server_id: server, name: 'd-next' })).expect(201);
      await waitFor(
        'the next event sent to B',
        async () => (dead.posts.length > postsBefore ? true : undefined),
        10_000,
      );
      const sentAgain = dead.posts.slice(postsBefore).filter((post) => tries.has(post.webhookId));
      assert.deepEqual(sentAgain, [], 'only the new event is sent: no failed delivery is tried again');
    });
  });
}
