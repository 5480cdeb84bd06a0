/** Migration 029 on both databases: pending deliveries take their event's device, so the claim keeps them in order. */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { eventDraft } from '../../src/services/events.ts';
import { insertEvents } from '../../src/store/events.ts';
import { migrate } from '../../src/store/migrate.ts';
import { openStore } from '../../src/store/open.ts';
import { claimDueDeliveries } from '../../src/store/webhooks.ts';
import { createTestDatabase, DATABASE_KINDS } from '../support/databases.ts';

const NOW = '2026-03-04T05:06:07.089Z';
const LATER = '2026-03-04T05:07:07.089Z';

for (const kind of DATABASE_KINDS) {
  describe(`migration 029 names each pending delivery's device (${kind})`, () => {
    const made = createTestDatabase(kind);
    after(async () => (await made).drop());

    it("fills device_id of pending deliveries from their events; the claim holds a device's second back", async () => {
      const database = await made;
      const store = openStore({ databaseUrl: database.env.DATABASE_URL, dataDir: database.dataDir });
      try {
        await migrate(store, '028-usage-thresholds');
        const { db } = store;
        const drafts = [7, 7, null, 7].map((deviceId) =>
          eventDraft({ kind: 'device.updated', device_id: deviceId, detail: 'updated', actor: 'admin' }),
        );
        const eventIds = await insertEvents(db, drafts, NOW);
        const webhook = await db
          .insertInto('webhooks')
          .values({
            url: 'https://receiver.example/hook',
            events: '["device.updated"]',
            description: '',
            enabled: 1,
            secret: 'whsec_dGVzdA==',
            created_by: 'admin',
            created_at: NOW,
            updated_at: NOW,
          })
          .returning('id')
          .executeTakeFirstOrThrow();
        // The first event's delivery is done; the device's next two wait, the server-wide one beside them.
        const states = ['delivered', 'pending', 'pending', 'pending'] as const;
        for (const [i, eventId] of eventIds.entries()) {
          await db
            .insertInto('webhook_deliveries')
            .values({
              webhook_id: webhook.id,
              event_id: eventId,
              kind: 'device.updated',
              payload: '{}',
              message_id: `msg_${eventId}`,
              state: states[i] ?? 'pending',
              attempts: 0,
              next_attempt_at: NOW,
              created_at: NOW,
            })
            .execute();
        }

        await migrate(store);

        const rows = await db
          .selectFrom('webhook_deliveries')
          .select(['event_id', 'device_id'])
          .orderBy('id')
          .execute();
        assert.deepEqual(
          rows.map((row) => row.device_id),
          [null, 7, null, 7],
          'pending rows take their event device; a finished one is never checked and keeps none',
        );
        const claimed = await claimDueDeliveries(db, LATER, LATER, 10);
        assert.deepEqual(
          claimed.map((row) => row.event_id).sort((a, b) => a - b),
          [eventIds[1], eventIds[2]],
          "the device's later delivery waits for its earlier one",
        );
      } finally {
        await store.close();
      }
    });
  });
}
