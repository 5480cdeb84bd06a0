import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { isoAt, ManualClock } from '../../src/domain/clock.ts';
import { eventDraft, recordEvents } from '../../src/services/events.ts';
import type { Store } from '../../src/store/open.ts';
import { write } from '../../src/store/db.ts';
import { listEvents } from '../../src/store/events.ts';
import { Housekeeping } from '../../src/workers/housekeeping.ts';
import { recordActivities } from '../../src/services/activity.ts';
import { notifyChange } from '../../src/services/notifications.ts';
import { listActivity } from '../../src/store/activity.ts';
import { listMails, recordMailAttempt } from '../../src/store/mail.ts';
import { openTestStore, type TestStore } from '../support/stores.ts';
import { DATABASE_KINDS } from '../support/databases.ts';
import { insertWebhook } from '../../src/store/webhooks.ts';
import type { DeliveryState } from '../../src/store/schema.ts';

const DAY_MS = 24 * 60 * 60 * 1000;

describe('housekeeping with a fake clock', () => {
  let opened: TestStore;
  let store: Store;
  before(async () => {
    opened = await openTestStore('sqlite');
    store = opened.store;
  });
  after(async () => {
    await opened.close();
  });

  it('prunes events older than 90 days and keeps the rest', async () => {
    const clock = new ManualClock(Date.parse('2026-01-01T00:00:00Z'));
    const record = (detail: string) =>
      write(store.db, (tx) =>
        recordEvents(tx, clock, [eventDraft({ kind: 'server.created', detail, actor: 'system' })]),
      );
    await record('old');
    clock.advance(30 * DAY_MS);
    await record('younger');
    clock.advance(61 * DAY_MS);
    await record('new');
    await new Housekeeping(store.db, clock, pino({ level: 'silent' })).runOnce();
    const left = await listEvents(store.db, {}, { afterId: 0, limit: 10 });
    assert.deepEqual(
      left.rows.map((e) => e.detail),
      ['younger', 'new'],
      `now is ${isoAt(clock.nowMs())}`,
    );
    clock.advance(60 * DAY_MS);
    await new Housekeeping(store.db, clock, pino({ level: 'silent' })).runOnce();
    assert.deepEqual(
      (await listEvents(store.db, {}, { afterId: 0, limit: 10 })).rows.map((e) => e.detail),
      ['new'],
    );
  });

  it('prunes activity entries after a year, and sent or failed mails after 30 days (never unsent ones)', async () => {
    const clock = new ManualClock(Date.parse('2027-01-01T00:00:00Z'));
    const change = (summary: string) =>
      write(store.db, async (tx) => {
        await recordActivities(tx, clock, [
          { resource: 'node', resourceId: 1, verb: 'updated', summary, actor: 'admin', before: null, after: null },
        ]);
        await notifyChange(tx, clock, { headline: summary, details: [], actor: 'admin' });
      });
    await change('old');
    clock.advance(300 * DAY_MS);
    await change('recent');
    // The events of the test before mailed too: only this test's mails count.
    const mine = async () => (await listMails(store.db)).filter((m) => /old|recent|new/.test(m.subject));
    const [old, recent] = await mine();
    assert.ok(old && recent);
    await recordMailAttempt(store.db, old.id, {
      state: 'sent',
      attempts: 1,
      nextAttemptAt: null,
      lastError: null,
      sentAt: isoAt(clock.nowMs()),
    });
    await recordMailAttempt(store.db, recent.id, {
      state: 'failed',
      attempts: 9,
      nextAttemptAt: null,
      lastError: 'gone',
      sentAt: null,
    });
    clock.advance(66 * DAY_MS);
    await change('new');
    await new Housekeeping(store.db, clock, pino({ level: 'silent' })).runOnce();
    assert.deepEqual(
      (await listActivity(store.db, {}, { afterId: 0, limit: 10 })).map((e) => e.summary),
      ['recent', 'new'],
    );
    assert.deepEqual(
      (await mine()).map((m) => [m.subject, m.state]),
      [['[vpn-panel] new by admin (CLI)', 'pending']],
    );
  });
});

for (const kind of DATABASE_KINDS) {
  describe(`housekeeping prunes webhook deliveries (${kind})`, () => {
    let opened: TestStore;
    before(async () => {
      opened = await openTestStore(kind);
    });
    after(async () => {
      await opened.close();
    });

    it('removes delivered and failed deliveries older than 90 days; pending and recent ones stay', async () => {
      const { db } = opened.store;
      const clock = new ManualClock(Date.parse('2026-01-01T00:00:00Z'));
      const now = isoAt(clock.nowMs());
      await insertWebhook(db, {
        url: 'https://receiver.example/hook',
        events: JSON.stringify(['server.created']),
        description: '',
        enabled: 1,
        secret: 'whsec_dGVzdA==',
        created_by: 'admin',
        created_at: now,
        updated_at: now,
      });
      /** One event's delivery, left in `state`; its detail names it. */
      const made = new Map<number, string>();
      const deliver = async (detail: string, state: DeliveryState) => {
        const [event] = await write(db, (tx) =>
          recordEvents(tx, clock, [eventDraft({ kind: 'server.created', detail, actor: 'system' })]),
        );
        const row = await db
          .selectFrom('webhook_deliveries')
          .select('id')
          .where('event_id', '=', event?.id ?? 0)
          .executeTakeFirstOrThrow();
        made.set(row.id, detail);
        if (state !== 'pending')
          await db
            .updateTable('webhook_deliveries')
            .set({ state, next_attempt_at: null })
            .where('id', '=', row.id)
            .execute();
      };
      await deliver('old delivered', 'delivered');
      await deliver('old failed', 'failed');
      await deliver('old pending', 'pending');
      clock.advance(30 * DAY_MS);
      await deliver('younger delivered', 'delivered');
      await deliver('younger failed', 'failed');
      clock.advance(61 * DAY_MS);

      await new Housekeeping(db, clock, pino({ level: 'silent' })).runOnce();

      const left = await db.selectFrom('webhook_deliveries').select(['id', 'state']).orderBy('id').execute();
      assert.deepEqual(
        left.map((row) => made.get(row.id)),
        ['old pending', 'younger delivered', 'younger failed'],
      );
    });
  });
}
