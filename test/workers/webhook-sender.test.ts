import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import { afterEach, beforeEach, describe, test } from 'node:test';
import pino from 'pino';
import { type QueryId, SelectQueryNode } from 'kysely';
import { Webhook } from 'standardwebhooks';
import { isoAt, ManualClock } from '../../src/domain/clock.ts';
import type { EventDraft, PanelEvent } from '../../src/domain/events.ts';
import { AppError } from '../../src/domain/errors.ts';
import { type AttemptReply, generateWebhookSecret } from '../../src/domain/webhooks.ts';
import { quietPublisher } from '../../src/services/changes.ts';
import { enqueueDelivery } from '../../src/services/events.ts';
import { write } from '../../src/store/db.ts';
import { checkWebhookUrl } from '../../src/services/webhook-targets.ts';
import type { Store } from '../../src/store/open.ts';
import {
  deleteWebhook,
  type DeliveryRow,
  findDelivery,
  findWebhook,
  insertDelivery,
  insertWebhook,
  type WebhookRow,
} from '../../src/store/webhooks.ts';
import type { WebhookAttempt, WebhookRequest } from '../../src/workers/webhook-attempt.ts';
import { WebhookSender, type WebhookSenderOptions } from '../../src/workers/webhook-sender.ts';
import { listActivity } from '../../src/store/activity.ts';
import { insertEvents } from '../../src/store/events.ts';
import { DATABASE_KINDS } from '../support/databases.ts';
import { openTestStore, type TestStore } from '../support/stores.ts';

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

/** A webhook receiver on 127.0.0.1; `answer` ends each request (or leaves it hanging). */
interface Receiver {
  url: string;
  received: Received[];
  close(): Promise<void>;
}

async function startReceiver(answer: (res: ServerResponse, n: number) => void | Promise<void>): Promise<Receiver> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      Promise.resolve(answer(res, received.length)).catch((err: unknown) =>
        res.destroy(err instanceof Error ? err : undefined),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  assert.ok(address !== null && typeof address === 'object');
  return {
    url: `http://127.0.0.1:${address.port}/hook`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function reply(status: number, headers: Record<string, string> = {}): (res: ServerResponse) => void {
  return (res) => {
    res.writeHead(status, headers);
    res.end('ok');
  };
}

/** Polls until `check` holds; the deadline is only a backstop against hanging forever. */
async function eventually<T>(check: () => Promise<T | undefined>, what: string): Promise<T> {
  const deadlineMs = Date.now() + 10_000;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadlineMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** An attempt without HTTP: each call answers with the next reply of `script` and keeps its request. */
function scriptedAttempt(script: AttemptReply[]): { attempt: WebhookAttempt; requests: WebhookRequest[] } {
  const requests: WebhookRequest[] = [];
  const attempt: WebhookAttempt = async (request) => {
    requests.push(request);
    return script.shift() ?? { error: 'unscripted attempt' };
  };
  return { attempt, requests };
}

const answered = (status: number): AttemptReply => ({ status, retryAfterSeconds: undefined });

const silentLog = pino({ level: 'silent' });

const FAST_OPTIONS: WebhookSenderOptions = {
  scheduleMs: [100, 100, 100],
  timeoutMs: 5_000,
  concurrency: 8,
  pollIntervalMs: 20,
  allowPrivate: true,
};

describe('checkWebhookUrl (the check when a webhook is saved)', () => {
  const refusals: Array<[string, string]> = [
    ['ftp://example.com/hook', 'must be an absolute http or https URL'],
    ['/relative/hook', 'must be an absolute http or https URL'],
    ['https://user:pass@example.com/hook', 'must not contain credentials'],
    ['http://127.0.0.1:8080/hook', 'resolves to a private address'],
    ['http://localhost/hook', 'resolves to a private address'],
    ['http://[::1]/hook', 'resolves to a private address'],
    ['http://[::ffff:127.0.0.1]/hook', 'resolves to a private address'],
    ['http://169.254.169.254/latest/meta-data', 'resolves to a private address'],
    ['http://10.128.0.1/hook', 'resolves to a private address'],
    ['http://2130706433/hook', 'resolves to a private address'],
    ['http://no-such-host.invalid/hook', 'host does not resolve'],
  ];
  for (const [url, reason] of refusals) {
    test(`refuses ${url}: ${reason}`, async () => {
      await assert.rejects(checkWebhookUrl(url, false), (error: unknown) => {
        assert.ok(error instanceof AppError);
        assert.equal(error.code, 'validation_failed');
        assert.deepEqual(error.fields, { url: reason });
        return true;
      });
    });
  }

  test('accepts public addresses, and internal ones when the panel allows them', async () => {
    await checkWebhookUrl('https://1.1.1.1/hook', false);
    await checkWebhookUrl('http://[2606:4700:4700::1111]:8080/hook', false);
    await checkWebhookUrl('http://127.0.0.1:8080/hook', true);
    await checkWebhookUrl('http://localhost/hook', true);
    await assert.rejects(checkWebhookUrl('https://user@localhost/hook', true), AppError);
  });
});

for (const kind of DATABASE_KINDS) {
  describe(`webhook sender (${kind})`, () => {
    let opened: TestStore;
    let store: Store;
    let clock: ManualClock;
    const receivers: Receiver[] = [];
    const senders: WebhookSender[] = [];
    let nextEventId = 1;

    beforeEach(async () => {
      opened = await openTestStore(kind);
      store = opened.store;
      // Real time as a start: the standardwebhooks library refuses timestamps 5 minutes off.
      clock = new ManualClock(Date.now());
    });

    afterEach(async () => {
      for (const sender of senders.splice(0)) await sender.stop();
      for (const receiver of receivers.splice(0)) await receiver.close();
      await opened.close();
    });

    async function receiver(answer: (res: ServerResponse, n: number) => void | Promise<void>): Promise<Receiver> {
      const started = await startReceiver(answer);
      receivers.push(started);
      return started;
    }

    function sender(options: Partial<WebhookSenderOptions> = {}, attempt?: WebhookAttempt): WebhookSender {
      const changes = quietPublisher(store.db, clock);
      const made = new WebhookSender(store.db, clock, changes, silentLog, { ...FAST_OPTIONS, ...options }, attempt);
      senders.push(made);
      return made;
    }

    function addWebhook(url: string, enabled = true): Promise<WebhookRow> {
      const now = isoAt(clock.nowMs());
      return insertWebhook(store.db, {
        url,
        events: JSON.stringify(['device.created']),
        description: '',
        enabled: enabled ? 1 : 0,
        secret: generateWebhookSecret(),
        created_by: 'admin',
        created_at: now,
        updated_at: now,
      });
    }

    function addDelivery(webhook: WebhookRow, dueInMs = 0): Promise<DeliveryRow> {
      const eventId = nextEventId++;
      const event: PanelEvent = {
        id: eventId,
        kind: 'device.created',
        created_at: isoAt(clock.nowMs()),
        server_id: 1,
        server_name: 'fra-1',
        device_id: eventId,
        device_name: `device-${eventId}`,
        node_name: 'local',
        ip: '10.128.0.2',
        country: 'DE',
        detail: 'device created',
        actor: 'admin',
      };
      return insertDelivery(store.db, {
        webhook_id: webhook.id,
        event_id: eventId,
        kind: event.kind,
        payload: JSON.stringify(event),
        message_id: `msg_${eventId}`,
        state: 'pending',
        attempts: 0,
        next_attempt_at: isoAt(clock.nowMs() + dueInMs),
        created_at: isoAt(clock.nowMs()),
      });
    }

    async function delivery(id: number): Promise<DeliveryRow> {
      const row = await findDelivery(store.db, id);
      assert.ok(row, `delivery ${id} exists`);
      return row;
    }

    test('a 2xx delivers, signed so the standardwebhooks library verifies it', async () => {
      const target = await receiver(reply(204));
      const webhook = await addWebhook(target.url);
      const queued = await addDelivery(webhook);

      assert.equal(await sender().runOnce(), 1);

      const row = await delivery(queued.id);
      assert.equal(row.state, 'delivered');
      assert.equal(row.attempts, 1);
      assert.equal(row.response_status, 204);
      assert.equal(row.error, null);
      assert.equal(row.next_attempt_at, null);
      assert.equal(row.last_attempt_at, isoAt(clock.nowMs()));
      assert.equal(row.locked_until, null);
      assert.ok(row.duration_ms !== null && row.duration_ms >= 0);
      const [request] = target.received;
      assert.ok(request);
      assert.equal(request.body, queued.payload);
      assert.equal(request.headers['content-type'], 'application/json');
      assert.equal(request.headers['user-agent'], 'vpn-panel-webhooks');
      assert.equal(request.headers['webhook-id'], queued.message_id);
      assert.equal(request.headers['webhook-timestamp'], String(Math.floor(clock.nowMs() / 1000)));
      const headers = {
        'webhook-id': String(request.headers['webhook-id']),
        'webhook-timestamp': String(request.headers['webhook-timestamp']),
        'webhook-signature': String(request.headers['webhook-signature']),
      };
      assert.deepEqual(new Webhook(webhook.secret).verify(request.body, headers), JSON.parse(queued.payload));
    });

    test('500 twice then 200: three attempts with the same webhook-id, then delivered', async () => {
      const target = await receiver((res, n) => reply(n <= 2 ? 500 : 200)(res));
      const queued = await addDelivery(await addWebhook(target.url));
      const worker = sender();

      assert.equal(await worker.runOnce(), 1);
      const afterFirst = await delivery(queued.id);
      assert.equal(afterFirst.state, 'pending');
      assert.equal(afterFirst.attempts, 1);
      assert.equal(afterFirst.response_status, 500);
      assert.equal(afterFirst.error, 'HTTP 500');
      const waitMs = Date.parse(afterFirst.next_attempt_at ?? '') - clock.nowMs();
      assert.ok(waitMs >= 90 && waitMs <= 110, `retry after ${waitMs} ms: 100 ms ± 10 %`);

      assert.equal(await worker.runOnce(), 0, 'not due yet');
      clock.advance(110);
      assert.equal(await worker.runOnce(), 1);
      assert.equal((await delivery(queued.id)).attempts, 2);
      clock.advance(110);
      assert.equal(await worker.runOnce(), 1);

      const row = await delivery(queued.id);
      assert.equal(row.state, 'delivered');
      assert.equal(row.attempts, 3);
      assert.equal(row.response_status, 200);
      assert.equal(row.error, null);
      assert.deepEqual(
        target.received.map((r) => r.headers['webhook-id']),
        [queued.message_id, queued.message_id, queued.message_id],
      );
    });

    test('fails once the schedule is used up', async () => {
      const target = await receiver(reply(503));
      const queued = await addDelivery(await addWebhook(target.url));
      const worker = sender({ scheduleMs: [100] });

      await worker.runOnce();
      clock.advance(110);
      await worker.runOnce();

      const row = await delivery(queued.id);
      assert.equal(row.state, 'failed');
      assert.equal(row.attempts, 2);
      assert.equal(row.next_attempt_at, null);
      assert.equal(row.error, 'HTTP 503');
      assert.equal(target.received.length, 2);
    });

    test('a Retry-After longer than the step is honoured', async () => {
      const target = await receiver(reply(429, { 'retry-after': '120' }));
      const queued = await addDelivery(await addWebhook(target.url));

      await sender({ scheduleMs: [100, 3_600_000] }).runOnce();

      const row = await delivery(queued.id);
      assert.equal(row.state, 'pending');
      assert.equal(row.response_status, 429);
      assert.equal(row.next_attempt_at, isoAt(clock.nowMs() + 120_000));
    });

    test('410 Gone fails the delivery and disables the webhook; its other deliveries then fail unsent', async () => {
      const target = await receiver(reply(410));
      const webhook = await addWebhook(`${target.url}?token=RECEIVER-SECRET-410`);
      const gone = await addDelivery(webhook);
      const later = await addDelivery(webhook, 1_000);
      const worker = sender();

      assert.equal(await worker.runOnce(), 1);
      const row = await delivery(gone.id);
      assert.equal(row.state, 'failed');
      assert.equal(row.response_status, 410);
      assert.equal((await findWebhook(store.db, webhook.id))?.enabled, 0);
      // Turning it off is a change the panel made: in the activity log, by the system, without the secret
      // (nor the URL, whose query holds the receiver's: the webhook by its id and host).
      const logged = await listActivity(store.db, { resources: ['webhook'] }, { afterId: 0, limit: 10 });
      assert.deepEqual(
        logged.map((e) => [e.action, e.actor, e.resource_id, e.before, e.after]),
        [['webhook.disabled', 'system', String(webhook.id), { enabled: true }, { enabled: false }]],
      );
      const { host } = new URL(target.url);
      assert.deepEqual(
        logged.map((e) => e.summary),
        [`webhook ${webhook.id} to ${host} turned off: its receiver answered 410 Gone`],
      );

      clock.advance(1_000);
      assert.equal(await worker.runOnce(), 0);
      const unsent = await delivery(later.id);
      assert.equal(unsent.state, 'failed');
      assert.equal(unsent.attempts, 0);
      assert.equal(unsent.error, 'webhook disabled');
      assert.equal(target.received.length, 1);
    });

    test('a disabled webhook gets nothing: its pending deliveries fail', async () => {
      const target = await receiver(reply(200));
      const queued = await addDelivery(await addWebhook(target.url, false));

      assert.equal(await sender().runOnce(), 0);

      const row = await delivery(queued.id);
      assert.equal(row.state, 'failed');
      assert.equal(row.error, 'webhook disabled');
      assert.equal(target.received.length, 0);
    });

    test('a redirect is a failed attempt and is not followed', async () => {
      const target = await receiver((res, n) => reply(n === 1 ? 302 : 200, { location: '/elsewhere' })(res));
      const queued = await addDelivery(await addWebhook(target.url));

      await sender().runOnce();

      const row = await delivery(queued.id);
      assert.equal(row.state, 'pending');
      assert.equal(row.response_status, 302);
      assert.equal(row.error, 'redirect 302 is not followed');
      assert.equal(target.received.length, 1);
    });

    test('a hanging receiver times out and holds one slot only, not the other receiver', async () => {
      const hanging = await receiver(() => {});
      const fast = await receiver(reply(200));
      const slowHook = await addWebhook(hanging.url);
      // Queued first, so the claim hands the sender the hanging receiver's deliveries first.
      const stuck = [await addDelivery(slowHook), await addDelivery(slowHook)];
      const quick = await addDelivery(await addWebhook(fast.url));
      // Four slots: a quarter, one, per webhook.
      const round = sender({ concurrency: 4, timeoutMs: 1_000 }).runOnce();

      const delivered = await eventually(async () => {
        const row = await delivery(quick.id);
        return row.state === 'delivered' ? row : undefined;
      }, 'the fast receiver to get its delivery');
      assert.equal(delivered.attempts, 1);
      assert.equal(hanging.received.length, 1, 'one hanging request at a time');
      assert.equal((await delivery(stuck[0]?.id ?? 0)).attempts, 0, 'the hanging attempt is still running');

      assert.equal(await round, 3);
      for (const queued of stuck) {
        const row = await delivery(queued.id);
        assert.equal(row.state, 'pending');
        assert.equal(row.attempts, 1);
        assert.equal(row.error, 'timeout');
        assert.equal(row.response_status, null);
      }
    });

    test('a dead receiver with a backlog older than the others does not hold their deliveries back', async () => {
      const hanging = await receiver(() => {});
      const fast = await receiver(reply(200));
      const deadHook = await addWebhook(hanging.url);
      // More than a claim takes (twice the concurrency), all due before the other receiver's delivery.
      for (let i = 0; i < 40; i++) await addDelivery(deadHook);
      const quick = await addDelivery(await addWebhook(fast.url));
      const worker = sender({ concurrency: 4, timeoutMs: 60_000 });
      worker.start();

      await eventually(
        async () => ((await delivery(quick.id)).state === 'delivered' ? true : undefined),
        'the live receiver to get its delivery',
      );
      assert.equal(hanging.received.length, 1, 'the dead receiver holds its one slot');
      await hanging.close();
    });

    test('unless allowed, a loopback target is refused at connect time', async () => {
      const target = await receiver(reply(200));
      const byAddress = await addDelivery(await addWebhook(target.url));
      const byName = await addDelivery(await addWebhook(target.url.replace('127.0.0.1', 'localhost')));

      assert.equal(await sender({ allowPrivate: false }).runOnce(), 2);

      for (const queued of [byAddress, byName]) {
        const row = await delivery(queued.id);
        assert.equal(row.state, 'pending');
        assert.equal(row.attempts, 1);
        assert.equal(row.response_status, null);
        assert.equal(row.error, 'target resolves to a private address');
      }
      assert.equal(target.received.length, 0);
    });

    test('a refused connection is recorded as such', async () => {
      const target = await receiver(reply(200));
      await target.close();
      const queued = await addDelivery(await addWebhook(target.url));

      await sender().runOnce();

      assert.equal((await delivery(queued.id)).error, 'connect ECONNREFUSED');
    });

    test('a webhook deleted during its attempt takes its delivery with it, quietly', async () => {
      let webhookId = 0;
      const target = await receiver(async (res) => {
        await deleteWebhook(store.db, webhookId);
        reply(200)(res);
      });
      const webhook = await addWebhook(target.url);
      webhookId = webhook.id;
      const queued = await addDelivery(webhook);

      assert.equal(await sender().runOnce(), 1);

      assert.equal(await findDelivery(store.db, queued.id), undefined);
    });

    test('started, it sends what a nudge announces; stop waits for the attempt in flight', async () => {
      let release: () => void = () => {};
      const answered = new Promise<void>((resolve) => {
        release = resolve;
      });
      const target = await receiver(async (res) => {
        await answered;
        reply(200)(res);
      });
      const webhook = await addWebhook(target.url);
      const worker = sender({ pollIntervalMs: 60_000 });
      worker.start();

      const queued = await addDelivery(webhook);
      worker.nudge();
      await eventually(async () => (target.received.length === 1 ? true : undefined), 'the request');
      const stopped = worker.stop();
      release();
      await stopped;

      assert.equal((await delivery(queued.id)).state, 'delivered');
    });

    test('a nudge while a claim is in flight is not lost, though that claim found nothing', async () => {
      const target = await receiver(reply(204));
      const webhook = await addWebhook(target.url);
      // The sender's store answers its first claim (the select of due deliveries) only when told to.
      const claims = new WeakSet<QueryId>();
      let holding = true;
      let claimHeld: () => void = () => {};
      const held = new Promise<void>((resolve) => {
        claimHeld = resolve;
      });
      let releaseClaim: () => void = () => {};
      const released = new Promise<void>((resolve) => {
        releaseClaim = resolve;
      });
      const gated = store.db.withPlugin({
        transformQuery({ node, queryId }) {
          if (holding && SelectQueryNode.is(node)) claims.add(queryId);
          return node;
        },
        async transformResult({ result, queryId }) {
          if (holding && claims.has(queryId)) {
            holding = false;
            claimHeld();
            await released;
          }
          return result;
        },
      });
      const options = { ...FAST_OPTIONS, pollIntervalMs: 3_600_000 };
      const worker = new WebhookSender(gated, clock, quietPublisher(gated, clock), silentLog, options);
      senders.push(worker);
      worker.start();
      await held;
      // The claim saw no delivery; one is made and announced before its answer is read.
      await addDelivery(webhook);
      worker.nudge();
      await new Promise((resolve) => setImmediate(resolve));
      releaseClaim();
      await eventually(async () => (target.received.length === 1 ? true : undefined), 'the announced delivery');
    });

    test('many deliveries to several receivers all arrive once', async () => {
      const targets = [await receiver(reply(200)), await receiver(reply(200)), await receiver(reply(200))];
      const webhooks: WebhookRow[] = [];
      for (const target of targets) webhooks.push(await addWebhook(target.url));
      const queued: DeliveryRow[] = [];
      for (let i = 0; i < 50; i++) for (const webhook of webhooks) queued.push(await addDelivery(webhook));

      assert.equal(await sender().runOnce(), 150);

      for (const target of targets) assert.equal(new Set(target.received.map((r) => r.headers['webhook-id'])).size, 50);
      const states = await Promise.all(queued.map(async (q) => (await delivery(q.id)).state));
      assert.ok(states.every((s) => s === 'delivered'));
    });

    describe('the scheduler, with a scripted attempt in place of HTTP', () => {
      test('a failed attempt is retried when the schedule says, and a success stops the retries', async () => {
        const script = scriptedAttempt([{ error: 'connect ECONNREFUSED' }, answered(503), answered(200)]);
        const webhook = await addWebhook('https://receiver.example/hook');
        const queued = await addDelivery(webhook);
        const worker = sender({ scheduleMs: [1_000, 60_000, 3_600_000] }, script.attempt);
        const sentAtMs = [clock.nowMs()];

        /** Checks the wait the delivery was given, then that it is attempted when due and not a millisecond before. */
        async function attemptWhenDue(stepMs: number): Promise<void> {
          const waitMs = Date.parse((await delivery(queued.id)).next_attempt_at ?? '') - clock.nowMs();
          assert.ok(Math.abs(waitMs - stepMs) <= stepMs / 10, `retry after ${waitMs} ms: ${stepMs} ms ± 10 %`);
          clock.advance(waitMs - 1);
          assert.equal(await worker.runOnce(), 0, 'not due yet');
          clock.advance(1);
          sentAtMs.push(clock.nowMs());
          assert.equal(await worker.runOnce(), 1);
        }

        /** The delivery's state, attempts, response status and error. */
        async function outcome(): Promise<unknown[]> {
          const row = await delivery(queued.id);
          return [row.state, row.attempts, row.response_status, row.error];
        }

        assert.equal(await worker.runOnce(), 1);
        assert.deepEqual(await outcome(), ['pending', 1, null, 'connect ECONNREFUSED']);
        await attemptWhenDue(1_000);
        assert.deepEqual(await outcome(), ['pending', 2, 503, 'HTTP 503']);
        await attemptWhenDue(60_000);
        assert.deepEqual(await outcome(), ['delivered', 3, 200, null]);
        const delivered = await delivery(queued.id);
        assert.equal(delivered.next_attempt_at, null);
        assert.equal(delivered.last_attempt_at, isoAt(clock.nowMs()));

        clock.advance(2 * 3_600_000);
        assert.equal(await worker.runOnce(), 0, 'a delivered delivery is not sent again');
        const { url, secret } = webhook;
        const sent = { url, secret, messageId: queued.message_id, payload: queued.payload };
        assert.deepEqual(
          script.requests,
          sentAtMs.map((ms) => ({ ...sent, sentAtMs: ms })),
        );
      });

      test("a device's next event waits for its first's retries; another device's and a server's do not", async () => {
        const webhook = await addWebhook('https://receiver.example/hook');
        /** A delivery of an event recorded in the events table, about `deviceId` (null: about the server). */
        async function addEventDelivery(deviceId: number | null): Promise<DeliveryRow> {
          const draft: EventDraft = {
            kind: 'device.updated',
            server_id: 1,
            server_name: 'fra-1',
            device_id: deviceId,
            device_name: deviceId === null ? null : `device-${deviceId}`,
            node_name: 'local',
            ip: null,
            country: null,
            detail: 'device updated',
            actor: 'admin',
          };
          const now = isoAt(clock.nowMs());
          const [eventId] = await insertEvents(store.db, [draft], now);
          assert.ok(eventId !== undefined);
          // As the events service makes it: the delivery names the event's device.
          const event = { ...draft, id: eventId, created_at: now };
          return write(store.db, (tx) => enqueueDelivery(tx, webhook.id, event, now));
        }
        const first = await addEventDelivery(1);
        const second = await addEventDelivery(1);
        const other = [await addEventDelivery(2), await addEventDelivery(2)];
        const serverWide = await addEventDelivery(null);
        const third = await addEventDelivery(1);
        // The receiver refuses the device's first event every time; it takes the others.
        const requests: string[] = [];
        const attempt: WebhookAttempt = async (request) => {
          requests.push(request.messageId);
          return request.messageId === first.message_id ? { error: 'connect ECONNREFUSED' } : answered(200);
        };
        const worker = sender({ scheduleMs: [100, 100] }, attempt);
        const sent = (rows: DeliveryRow[]) => requests.filter((id) => rows.some((row) => row.message_id === id));

        await worker.runOnce();
        assert.deepEqual(sent([first]), [first.message_id]);
        assert.deepEqual(sent(other), [other[0]?.message_id, other[1]?.message_id], 'the other device, in order');
        assert.deepEqual(sent([serverWide]), [serverWide.message_id]);
        clock.advance(110);
        await worker.runOnce();
        assert.deepEqual(sent([second, third]), [], 'not sent while the first is retried');
        assert.deepEqual([(await delivery(second.id)).state, (await delivery(second.id)).attempts], ['pending', 0]);

        // The last retry fails it for good: the device's next events go, in order, the same round.
        clock.advance(110);
        await worker.runOnce();
        assert.equal((await delivery(first.id)).state, 'failed');
        const device = requests.filter((id) => [first, second, third].some((row) => row.message_id === id));
        assert.deepEqual(
          device,
          [first, first, first, second, third].map((row) => row.message_id),
        );
        for (const row of [second, third, ...other, serverWide]) {
          assert.equal((await delivery(row.id)).state, 'delivered');
        }
      });

      test('attempts held open take a quarter of the slots for their webhook; the rest go to another', async () => {
        let release: () => void = () => {};
        const held = new Promise<AttemptReply>((resolve) => {
          release = () => resolve(answered(200));
        });
        const busy = await addWebhook('https://busy.example/hook');
        const other = await addWebhook('https://other.example/hook');
        const busyQueued: DeliveryRow[] = [];
        for (let i = 0; i < 6; i++) busyQueued.push(await addDelivery(busy));
        const otherQueued = [await addDelivery(other), await addDelivery(other)];
        const requests: WebhookRequest[] = [];
        // The busy webhook's attempts wait for the test; the other one's are answered at once.
        const attempt: WebhookAttempt = async (request) => {
          requests.push(request);
          return request.url === busy.url ? held : answered(204);
        };
        const round = sender({ concurrency: 8 }, attempt).runOnce();

        try {
          await eventually(async () => {
            const states = await Promise.all(otherQueued.map(async (q) => (await delivery(q.id)).state));
            return states.every((s) => s === 'delivered') ? true : undefined;
          }, 'the other webhook to get its deliveries');
          assert.equal(requests.filter((r) => r.url === busy.url).length, 2, 'a quarter of 8 slots');
        } finally {
          // Else a failed check would leave stop() waiting for these attempts.
          release();
        }

        assert.equal(await round, 8);
        for (const queued of busyQueued) assert.equal((await delivery(queued.id)).state, 'delivered');
      });
    });
  });
}
