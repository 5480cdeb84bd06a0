import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import pino from 'pino';
import { ManualClock } from '../../src/domain/clock.ts';
import type { EventKind } from '../../src/domain/events.ts';
import { eventDraft, recordEvents } from '../../src/services/events.ts';
import { notifyChange } from '../../src/services/notifications.ts';
import type { Store } from '../../src/store/open.ts';
import { write } from '../../src/store/db.ts';
import { listMails } from '../../src/store/mail.ts';
import { MailSender, type MailSenderOptions } from '../../src/workers/mail-sender.ts';
import { DATABASE_KINDS } from '../support/databases.ts';
import { openTestStore, type TestStore } from '../support/stores.ts';
import { freePort } from '../support/panel.ts';
import { type SmtpReceiver, startSmtpReceiver } from '../support/smtp.ts';

const silentLog = pino({ level: 'silent' });
const TO = 'ops@example.test';
const SECOND_MS = 1_000;

for (const kind of DATABASE_KINDS) {
  describe(`mail sender (${kind})`, () => {
    let opened: TestStore;
    let store: Store;
    let clock: ManualClock;
    const receivers: SmtpReceiver[] = [];
    const senders: MailSender[] = [];

    beforeEach(async () => {
      opened = await openTestStore(kind);
      store = opened.store;
      clock = new ManualClock(Date.parse('2026-06-30T23:59:00Z'));
    });

    afterEach(async () => {
      for (const sender of senders.splice(0)) await sender.stop();
      for (const receiver of receivers.splice(0)) await receiver.close();
      await opened.close();
    });

    async function receiver(port?: number): Promise<SmtpReceiver> {
      const started = await startSmtpReceiver(port);
      receivers.push(started);
      return started;
    }

    function sender(port: number | undefined, options: Partial<MailSenderOptions> = {}): MailSender {
      const made = new MailSender(store.db, clock, silentLog, {
        settings: port === undefined ? undefined : { smtpUrl: `smtp://127.0.0.1:${port}`, to: TO },
        scheduleMs: [SECOND_MS, SECOND_MS],
        pollIntervalMs: 60_000,
        timeoutMs: 5_000,
        ...options,
      });
      senders.push(made);
      return made;
    }

    /** A device event as the usage accounting records it: through recordEvents, by the system. */
    function deviceEvent(kindOfEvent: EventKind, deviceName: string): Promise<unknown> {
      return write(store.db, (tx) =>
        recordEvents(tx, clock, [
          eventDraft({
            kind: kindOfEvent,
            device_id: 1,
            device_name: deviceName,
            server_name: 'fra-1',
            detail: `device ${deviceName}`,
            actor: 'system',
          }),
        ]),
      );
    }

    test(
      'devices reaching their limit or expiring are batched: ' + 'one digest a minute at most, summarising the rest',
      async () => {
        const smtp = await receiver();
        const worker = sender(smtp.port);
        for (const name of ['d1', 'd2', 'd3']) await deviceEvent('device.limit_reached', name);
        await deviceEvent('device.expired', 'd4');

        assert.equal(await worker.runOnce(), 1);
        assert.equal(smtp.received.length, 1);
        const first = smtp.received[0];
        assert.equal(first?.subject, '[vpn-panel] 3 devices reached their data limit, 1 device expired');
        assert.deepEqual(first?.to, [TO]);
        for (const name of ['d1', 'd2', 'd3'])
          assert.match(
            first?.text ?? '',
            new RegExp(`device ${name} on server fra-1 reached its data limit by the panel \\(system\\)`),
          );
        assert.match(first?.text ?? '', /device d4 on server fra-1 expired/);
        assert.match(first?.html ?? '', /<li>[^<]*device d4 on server fra-1 expired[^<]*<\/li>/);

        // Within the minute: gathered, not sent.
        clock.advance(30 * SECOND_MS);
        await deviceEvent('device.limit_reached', 'd5');
        await deviceEvent('device.expired', 'd6');
        assert.equal(await worker.runOnce(), 0);
        clock.advance(29 * SECOND_MS);
        assert.equal(await worker.runOnce(), 0);
        assert.equal(smtp.received.length, 1);

        // A minute after the first: the rest in one mail.
        clock.advance(1 * SECOND_MS);
        assert.equal(await worker.runOnce(), 1);
        assert.equal(smtp.received.length, 2);
        assert.equal(smtp.received[1]?.subject, '[vpn-panel] 1 device reached its data limit, 1 device expired');
        assert.doesNotMatch(smtp.received[1]?.text ?? '', /device d[1-4] /);

        // Nothing gathered, nothing sent.
        clock.advance(5 * 60 * SECOND_MS);
        assert.equal(await worker.runOnce(), 0);
        assert.equal(smtp.received.length, 2);
      },
    );

    test('a long digest lists 200 devices and counts the rest', async () => {
      const smtp = await receiver();
      for (let i = 1; i <= 205; i++) await deviceEvent('device.expired', `dev-${i}`);
      await sender(smtp.port).runOnce();
      const mail = smtp.received[0];
      assert.equal(mail?.subject, '[vpn-panel] 205 devices expired');
      assert.match(mail?.text ?? '', /device dev-200 on/);
      assert.doesNotMatch(mail?.text ?? '', /device dev-201 on/);
      assert.match(mail?.text ?? '', /… and 5 more devices\./);
    });

    test(
      'while SMTP is down, mail waits and is retried; ' +
        'one unsent digest holds the next, so an outage ends with few mails',
      async () => {
        const port = await freePort();
        const worker = sender(port);
        await write(store.db, (tx) =>
          notifyChange(tx, clock, { headline: 'API key shop created', details: [], actor: 'admin' }),
        );
        await deviceEvent('device.limit_reached', 'd1');

        assert.equal(await worker.runOnce(), 2);
        let mails = await listMails(store.db);
        assert.deepEqual(
          mails.map((m) => [m.topic, m.state, m.attempts]),
          [
            ['change', 'pending', 1],
            ['device_digest', 'pending', 1],
          ],
        );
        assert.match(mails[0]?.last_error ?? '', /ECONNREFUSED/);

        // Two minutes later, more devices: the unsent digest keeps them waiting instead of a second digest.
        clock.advance(2 * 60 * SECOND_MS);
        await deviceEvent('device.expired', 'd2');
        const smtp = await receiver(port);
        assert.equal(await worker.runOnce(), 2);
        assert.deepEqual(
          smtp.received.map((m) => m.subject),
          ['[vpn-panel] API key shop created by admin (CLI)', '[vpn-panel] 1 device reached its data limit'],
        );
        mails = await listMails(store.db);
        assert.deepEqual(
          mails.map((m) => [m.state, m.attempts]),
          [
            ['sent', 2],
            ['sent', 2],
          ],
        );

        clock.advance(61 * SECOND_MS);
        await worker.runOnce();
        assert.equal(smtp.received.at(-1)?.subject, '[vpn-panel] 1 device expired');
      },
    );

    test('a mail is failed once the schedule is used up', async () => {
      const worker = sender(await freePort());
      await write(store.db, (tx) =>
        notifyChange(tx, clock, { headline: 'API key shop revoked', details: [], actor: 'admin' }),
      );
      for (let round = 0; round < 3; round++) {
        await worker.runOnce();
        clock.advance(2 * SECOND_MS);
      }
      assert.deepEqual(
        (await listMails(store.db)).map((m) => [m.state, m.attempts]),
        [['failed', 3]],
      );
    });

    test('without SMTP_URL and NOTIFY_EMAIL nothing is sent and nothing piles up', async () => {
      await write(store.db, (tx) =>
        notifyChange(tx, clock, { headline: 'API key shop created', details: [], actor: 'admin' }),
      );
      await deviceEvent('device.expired', 'd1');
      assert.equal(await sender(undefined).runOnce(), 0);
      assert.deepEqual(await listMails(store.db), []);
      // Mail set up later does not send what was dropped.
      const smtp = await receiver();
      clock.advance(61 * SECOND_MS);
      assert.equal(await sender(smtp.port).runOnce(), 0);
      assert.deepEqual(smtp.received, []);
    });
  });
}
