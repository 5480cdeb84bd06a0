/**
 * Devices from plans (issue 26 item 2, docs/api.md "Plans") on SQLite and PostgreSQL: a device made with plan_id
 * takes the plan's values and an expiry of now + duration_days, fields given beside it win; a first_handshake plan
 * leaves the expiry open; quota_action and throttle_speed are set by POST and PATCH as a pair; a deleted plan's
 * devices keep their values and name no plan.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { systemClock } from '../../src/domain/clock.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { quietPublisher } from '../../src/services/changes.ts';
import { startExpiriesAtHandshake } from '../../src/services/handshake-expiry.ts';
import { UsageService } from '../../src/services/usage.ts';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';

const DAY_MS = 86_400_000;

for (const kind of DATABASE_KINDS) {
  describe(`devices from plans (${kind})`, () => {
    let db: TestDatabase;
    let panel: AppUnderTest;
    let key: string;
    let serverId = 0;
    const api = () => panel.client(key);

    async function plan(body: Record<string, unknown> & { name: string }): Promise<number> {
      const { data, response } = await api().POST('/api/v1/plans', { body });
      assert.equal(response.status, 201);
      return data?.id ?? 0;
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

    it("takes the plan's values and expires duration_days after its creation", async () => {
      const id = await plan({
        name: 'month',
        data_limit: 10e9,
        limit_period: 'total',
        speed_limit: 20_000,
        duration_days: 30,
        quota_action: 'throttle',
        throttle_speed: 1000,
      });
      const startMs = Date.now();
      const { data, response } = await api().POST('/api/v1/devices', { body: { server_id: serverId, plan_id: id } });
      assert.equal(response.status, 201);
      assert.ok(data);
      assert.deepEqual(
        [data.plan_id, data.data_limit, data.limit_period, data.speed_limit, data.quota_action, data.throttle_speed],
        [id, 10e9, 'total', 20_000, 'throttle', 1000],
      );
      const expiresMs = Date.parse(data.expires_at ?? '');
      assert.ok(
        expiresMs >= startMs + 30 * DAY_MS - 1000 && expiresMs <= Date.now() + 30 * DAY_MS,
        String(data.expires_at),
      );
    });

    it('lets fields given beside plan_id win, expires_at and the quota action included', async () => {
      const id = await plan({ name: 'fast', speed_limit: 50_000, duration_days: 7 });
      const { data } = await api().POST('/api/v1/devices', {
        body: {
          server_id: serverId,
          plan_id: id,
          speed_limit: 1000,
          expires_at: '2030-01-01T00:00:00Z',
          quota_action: 'throttle',
          throttle_speed: 64,
        },
      });
      assert.deepEqual(
        [data?.speed_limit, data?.expires_at, data?.quota_action, data?.throttle_speed],
        [1000, '2030-01-01T00:00:00.000Z', 'throttle', 64],
      );
      const cut = await api().POST('/api/v1/devices', { body: { server_id: serverId, plan_id: id, expires_at: null } });
      assert.deepEqual([cut.data?.expires_at, cut.data?.quota_action, cut.data?.throttle_speed], [null, 'cut', null]);
    });

    it('leaves the expiry open for a plan whose clock starts at the first handshake', async () => {
      const id = await plan({ name: 'on-hold', duration_days: 30, expiry_starts: 'first_handshake' });
      const { data } = await api().POST('/api/v1/devices', { body: { server_id: serverId, plan_id: id } });
      assert.equal(data?.expires_at, null);
    });

    it("starts a first_handshake plan's clock at the first handshake the node reports, once", async () => {
      const id = await plan({ name: 'on-hold-2', duration_days: 10, expiry_starts: 'first_handshake' });
      const { data } = await api().POST('/api/v1/devices', { body: { server_id: serverId, plan_id: id } });
      const deviceId = data?.id ?? 0;
      const db = panel.store.db;
      const usage = new UsageService(db, systemClock, new Calendar('UTC'));
      const nodeId = (await db.selectFrom('nodes').select('id').executeTakeFirstOrThrow()).id;
      const handshakeMs = Date.parse('2026-11-20T08:00:00Z');
      const report = (seq: number, atMs: number) => ({
        journalId: 'j',
        batches: [{ seq, slotStartMs: atMs, entries: [] }],
        handshakes: [{ deviceId, lastHandshakeMs: atMs }],
      });
      // As the node monitor does after each collection that brought handshakes.
      const collect = async (seq: number, atMs: number) => {
        const changes = quietPublisher(db, systemClock);
        await usage.ingest({ id: nodeId }, report(seq, atMs), changes);
        await startExpiriesAtHandshake(db, changes, usage);
      };
      await collect(1, handshakeMs);
      const expected = new Date(handshakeMs + 10 * DAY_MS).toISOString();
      const path = { params: { path: { id: deviceId } } };
      assert.equal((await api().GET('/api/v1/devices/{id}', path)).data?.expires_at, expected);
      // A later handshake leaves the started clock alone.
      await collect(2, handshakeMs + DAY_MS);
      assert.equal((await api().GET('/api/v1/devices/{id}', path)).data?.expires_at, expected);
      const events = await api().GET('/api/v1/events', { params: { query: { device_id: deviceId, limit: 100 } } });
      const started = events.data?.data.filter((e) => e.kind === 'device.updated') ?? [];
      assert.equal(started.length, 1);
      assert.match(started[0]?.detail ?? '', /first handshake at 2026-11-20T08:00:00.000Z/);
    });

    it('refuses an unknown plan and an unpaired throttle with 422, saving nothing', async () => {
      const before = await api().GET('/api/v1/devices', { params: { query: { limit: 100 } } });
      const unknown = await api().POST('/api/v1/devices', { body: { server_id: serverId, plan_id: 999_999 } });
      assert.equal(unknown.response.status, 422);
      assert.deepEqual(unknown.error?.error.fields, { plan_id: 'no such plan' });
      const unpaired = await api().POST('/api/v1/devices', { body: { server_id: serverId, quota_action: 'throttle' } });
      assert.equal(unpaired.response.status, 422);
      assert.deepEqual(unpaired.error?.error.fields, { throttle_speed: 'required with quota_action throttle' });
      const after = await api().GET('/api/v1/devices', { params: { query: { limit: 100 } } });
      assert.equal(after.data?.data.length, before.data?.data.length);
    });

    it('sets the quota action by PATCH: throttle with a speed, back to cut drops it', async () => {
      const { data } = await api().POST('/api/v1/devices', { body: { server_id: serverId } });
      assert.deepEqual([data?.plan_id, data?.quota_action, data?.throttle_speed], [null, 'cut', null]);
      const path = { params: { path: { id: data?.id ?? 0 } } };
      const stray = await api().PATCH('/api/v1/devices/{id}', { ...path, body: { throttle_speed: 100 } });
      assert.equal(stray.response.status, 422);
      const throttled = await api().PATCH('/api/v1/devices/{id}', {
        ...path,
        body: { quota_action: 'throttle', throttle_speed: 256 },
      });
      assert.deepEqual([throttled.data?.quota_action, throttled.data?.throttle_speed], ['throttle', 256]);
      const slower = await api().PATCH('/api/v1/devices/{id}', { ...path, body: { throttle_speed: 128 } });
      assert.equal(slower.data?.throttle_speed, 128);
      const cut = await api().PATCH('/api/v1/devices/{id}', { ...path, body: { quota_action: 'cut' } });
      assert.deepEqual([cut.data?.quota_action, cut.data?.throttle_speed], ['cut', null]);
    });

    it("keeps a deleted plan's devices as they were, naming no plan", async () => {
      const id = await plan({ name: 'retired', data_limit: 5e9, max_devices: 2 });
      const { data } = await api().POST('/api/v1/devices', { body: { server_id: serverId, plan_id: id } });
      assert.equal(data?.plan_id, id);
      assert.equal((await api().DELETE('/api/v1/plans/{id}', { params: { path: { id } } })).response.status, 204);
      const kept = await api().GET('/api/v1/devices/{id}', { params: { path: { id: data?.id ?? 0 } } });
      assert.deepEqual([kept.data?.plan_id, kept.data?.data_limit], [null, 5e9]);
    });
  });
}
