/**
 * Renewal (issue 26 item 4, docs/api.md "Renewal") on SQLite and PostgreSQL: the expiry moves to max(now, expiry)
 * + days (or to until); an expired or limit-reached device is active again; plan_id switches plans; the usage
 * count restarts unless reset_usage is false; device.renewed is posted; a group renews each device from its own
 * expiry; with an Idempotency-Key a repeated call renews once.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { systemClock } from '../../src/domain/clock.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { quietPublisher } from '../../src/services/changes.ts';
import { UsageService } from '../../src/services/usage.ts';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';

const DAY_MS = 86_400_000;
const FAR = '2031-01-10T00:00:00.000Z';

for (const kind of DATABASE_KINDS) {
  describe(`renewal (${kind})`, () => {
    let db: TestDatabase;
    let panel: AppUnderTest;
    let key: string;
    let serverId = 0;
    const api = () => panel.client(key);

    async function device(body: Record<string, unknown> = {}) {
      const { data } = await api().POST('/api/v1/devices', { body: { server_id: serverId, ...body } });
      assert.ok(data);
      return data;
    }
    /** POST …/renew with an optional Idempotency-Key, answered in process. */
    async function renew(path: string, body: Record<string, unknown>, idempotencyKey?: string) {
      const headers: Record<string, string> = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
      const answer = await panel.app.inject({ method: 'POST', url: `/api/v1${path}`, headers, payload: body });
      return { status: answer.statusCode, replayed: answer.headers['idempotent-replayed'], json: answer.json() };
    }
    async function renewedEvents(deviceId: number): Promise<number> {
      const { data } = await api().GET('/api/v1/events', { params: { query: { device_id: deviceId, limit: 100 } } });
      return data?.data.filter((e) => e.kind === 'device.renewed').length ?? -1;
    }

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await buildTestApp(db);
      key = await panel.createKey('shop', 'all', { rateLimitExempt: true });
      const { data } = await api().POST('/api/v1/servers', { body: { name: 'fra-1', country: 'DE' } });
      serverId = data?.id ?? 0;
    });
    after(async () => {
      await panel.close();
      await db.drop();
    });

    it('adds the days to a future expiry, once per Idempotency-Key, posting device.renewed', async () => {
      const d = await device({ expires_at: FAR });
      const first = await renew(`/devices/${d.id}/renew`, { days: 30 }, 'pay-1');
      assert.equal(first.status, 200);
      const expected = new Date(Date.parse(FAR) + 30 * DAY_MS).toISOString();
      assert.equal(first.json.expires_at, expected);
      const again = await renew(`/devices/${d.id}/renew`, { days: 30 }, 'pay-1');
      assert.equal(again.replayed, 'true');
      assert.equal(again.json.expires_at, expected);
      const read = await api().GET('/api/v1/devices/{id}', { params: { path: { id: d.id } } });
      assert.equal(read.data?.expires_at, expected);
      assert.equal(await renewedEvents(d.id), 1);
    });

    it('renews an expired device from now, active again; until sets the expiry as given', async () => {
      const d = await device({ expires_at: '2020-01-01T00:00:00Z' });
      assert.equal(d.status, 'expired');
      const startMs = Date.now();
      const renewed = await renew(`/devices/${d.id}/renew`, { days: 10 });
      assert.equal(renewed.json.status, 'active');
      const expiresMs = Date.parse(renewed.json.expires_at);
      assert.ok(expiresMs >= startMs + 10 * DAY_MS && expiresMs <= Date.now() + 10 * DAY_MS);
      const until = await renew(`/devices/${d.id}/renew`, { until: FAR });
      assert.equal(until.json.expires_at, FAR);
    });

    it('restarts the usage count of a limit-reached device (not with reset_usage false)', async () => {
      const d = await device({ data_limit: 1000 });
      const store = panel.store.db;
      const nodeId = (await store.selectFrom('nodes').select('id').executeTakeFirstOrThrow()).id;
      const usage = new UsageService(store, systemClock, new Calendar('UTC'));
      const entries = [{ deviceId: d.id, rxBytes: 800, txBytes: 800, meter: 1600 }];
      const report = { journalId: 'j', batches: [{ seq: 1, slotStartMs: Date.now(), entries }], handshakes: [] };
      await usage.ingest({ id: nodeId }, report, quietPublisher(store, systemClock));
      const path = { params: { path: { id: d.id } } };
      assert.equal((await api().GET('/api/v1/devices/{id}', path)).data?.status, 'limit_reached');
      const kept = await renew(`/devices/${d.id}/renew`, { days: 1, reset_usage: false });
      assert.equal(kept.json.status, 'limit_reached');
      const reset = await renew(`/devices/${d.id}/renew`, { days: 1 });
      assert.deepEqual([reset.json.status, reset.json.period_usage.total_bytes], ['active', 0]);
    });

    it("switches plans: the plan's values, and its days from max(now, expiry)", async () => {
      const plan = await api().POST('/api/v1/plans', {
        body: {
          name: 'gold',
          data_limit: 9e9,
          speed_limit: 5000,
          duration_days: 90,
          quota_action: 'throttle',
          throttle_speed: 300,
        },
      });
      const d = await device({ expires_at: FAR });
      const switched = await renew(`/devices/${d.id}/renew`, { plan_id: plan.data?.id });
      const j = switched.json;
      assert.deepEqual(
        [j.plan_id, j.data_limit, j.speed_limit, j.quota_action, j.throttle_speed, j.expires_at],
        [plan.data?.id, 9e9, 5000, 'throttle', 300, new Date(Date.parse(FAR) + 90 * DAY_MS).toISOString()],
      );
    });

    it('refuses a renewal without days, until or plan_id, or with both days and until (422)', async () => {
      const d = await device();
      const none = await renew(`/devices/${d.id}/renew`, {});
      assert.equal(none.status, 422);
      assert.deepEqual(none.json.error.fields, { days: 'days, until or plan_id required' });
      const both = await renew(`/devices/${d.id}/renew`, { days: 1, until: FAR });
      assert.equal(both.status, 422);
      const unknown = await renew(`/devices/${d.id}/renew`, { plan_id: 999_999 });
      assert.deepEqual(unknown.json.error.fields, { plan_id: 'no such plan' });
      assert.equal(await renewedEvents(d.id), 0);
    });

    it('renews each device of a group from its own expiry, once per Idempotency-Key', async () => {
      const a = await device({ external_id: 'shop-42', expires_at: FAR });
      const b = await device({ external_id: 'shop-42', expires_at: '2020-01-01T00:00:00Z' });
      const startMs = Date.now();
      const first = await renew('/groups/shop-42/renew', { days: 7 }, 'group-pay-1');
      assert.equal(first.status, 200);
      assert.equal(first.json.device_count, 2);
      const again = await renew('/groups/shop-42/renew', { days: 7 }, 'group-pay-1');
      assert.equal(again.replayed, 'true');
      const read = async (id: number) =>
        (await api().GET('/api/v1/devices/{id}', { params: { path: { id } } })).data?.expires_at ?? '';
      assert.equal(await read(a.id), new Date(Date.parse(FAR) + 7 * DAY_MS).toISOString());
      const bMs = Date.parse(await read(b.id));
      assert.ok(bMs >= startMs + 7 * DAY_MS && bMs <= Date.now() + 7 * DAY_MS);
      assert.deepEqual([await renewedEvents(a.id), await renewedEvents(b.id)], [1, 1]);
    });
  });
}
