/**
 * Top-up (issue 26 item 5, docs/api.md "Top-up") on SQLite and PostgreSQL: bytes added to the allowance of the
 * current period re-admit a limit-reached device at once and count in the node's ingest rule too; the device shows
 * them; device.topped_up is posted once per Idempotency-Key; they lapse at the next monthly reset; a device without
 * a data limit cannot be topped up.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../src/domain/clock.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { quietPublisher } from '../../src/services/changes.ts';
import { UsageService } from '../../src/services/usage.ts';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';

for (const kind of DATABASE_KINDS) {
  describe(`top-up (${kind})`, () => {
    let db: TestDatabase;
    let panel: AppUnderTest;
    let key: string;
    let serverId = 0;
    let nodeId = 0;
    let seq = 0;
    const clock = new ManualClock(Date.parse('2026-11-20T12:00:00Z'));
    const api = () => panel.client(key);

    /** The node's report of `bytes` more for the device (its meter counting on), as the node monitor stores it. */
    async function use(deviceId: number, bytes: number, meter: number): Promise<void> {
      const usage = new UsageService(panel.store.db, clock, new Calendar('UTC'));
      seq++;
      const entries = [{ deviceId, rxBytes: bytes, txBytes: 0, meter }];
      const report = { journalId: 'j', batches: [{ seq, slotStartMs: clock.nowMs(), entries }], handshakes: [] };
      await usage.ingest({ id: nodeId }, report, quietPublisher(panel.store.db, clock));
    }
    async function topUp(id: number, bytes: number, idempotencyKey?: string) {
      const headers: Record<string, string> = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
      const answer = await panel.app.inject({
        method: 'POST',
        url: `/api/v1/devices/${id}/top-up`,
        headers,
        payload: { bytes },
      });
      return { status: answer.statusCode, replayed: answer.headers['idempotent-replayed'], json: answer.json() };
    }
    async function status(id: number) {
      const { data } = await api().GET('/api/v1/devices/{id}', { params: { path: { id } } });
      return [data?.status, data?.top_up_bytes];
    }

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await buildTestApp(db, {}, clock);
      key = await panel.createKey('shop', 'all', { rateLimitExempt: true });
      const { data } = await api().POST('/api/v1/servers', { body: { name: 'fra-1', country: 'DE' } });
      serverId = data?.id ?? 0;
      nodeId = (await panel.store.db.selectFrom('nodes').select('id').executeTakeFirstOrThrow()).id;
    });
    after(async () => {
      await panel.close();
      await db.drop();
    });

    it('re-admits a limit-reached device at once, once per Idempotency-Key, and counts at ingest', async () => {
      const { data } = await api().POST('/api/v1/devices', { body: { server_id: serverId, data_limit: 1000 } });
      const id = data?.id ?? 0;
      await use(id, 1600, 1600);
      assert.deepEqual(await status(id), ['limit_reached', 0]);
      const first = await topUp(id, 1000, 'top-1');
      assert.deepEqual([first.status, first.json.status, first.json.top_up_bytes], [200, 'active', 1000]);
      const again = await topUp(id, 1000, 'top-1');
      assert.equal(again.replayed, 'true');
      assert.deepEqual(await status(id), ['active', 1000]);
      const count = async (kind: string) => {
        const events = await api().GET('/api/v1/events', { params: { query: { device_id: id, limit: 100 } } });
        return events.data?.data.filter((e) => e.kind === kind).length;
      };
      // 2,000 bytes allowed this period: 1,900 used is within (no new limit_reached), 2,100 is over.
      await use(id, 300, 1900);
      assert.deepEqual(await status(id), ['active', 1000]);
      assert.equal(await count('device.limit_reached'), 1);
      await use(id, 200, 2100);
      assert.deepEqual(await status(id), ['limit_reached', 1000]);
      assert.equal(await count('device.limit_reached'), 2);
      assert.equal(await count('device.topped_up'), 1);
    });

    it('lapses at the next monthly reset', async () => {
      const { data } = await api().POST('/api/v1/devices', { body: { server_id: serverId, data_limit: 1000 } });
      const id = data?.id ?? 0;
      assert.equal((await topUp(id, 5000)).json.top_up_bytes, 5000);
      clock.advance(Date.parse('2026-12-01T00:30:00Z') - clock.nowMs());
      assert.deepEqual(await status(id), ['active', 0]);
      await use(id, 1100, 1100);
      assert.deepEqual(await status(id), ['limit_reached', 0]);
    });

    it('refuses a device without a data limit (422), changing nothing', async () => {
      const { data } = await api().POST('/api/v1/devices', { body: { server_id: serverId } });
      const refused = await topUp(data?.id ?? 0, 1000);
      assert.equal(refused.status, 422);
      assert.deepEqual(refused.json.error.fields, { bytes: 'the device has no data limit' });
      assert.deepEqual(await status(data?.id ?? 0), ['active', 0]);
    });
  });
}
