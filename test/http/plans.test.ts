/**
 * Plans (issue 26, docs/api.md "Plans") on SQLite and PostgreSQL: create with defaults, list with cursor paging,
 * get, PATCH (the throttle speed follows the quota action), delete; unique names; the pairing of quota_action
 * and throttle_speed; reading takes devices:read and writing plans:write (a devices-only key is 403); every
 * change is in the activity log.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';

for (const kind of DATABASE_KINDS) {
  describe(`plans (${kind})`, () => {
    let db: TestDatabase;
    let panel: AppUnderTest;
    let admin: string;
    let shop: string;

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await buildTestApp(db);
      admin = await panel.createKey('admin', 'all', { rateLimitExempt: true });
      shop = await panel.createKey('shop', 'devices:read,devices:write', { rateLimitExempt: true });
    });
    after(async () => {
      await panel.close();
      await db.drop();
    });

    it('creates a plan with the defaults of a device (cut, monthly, from creation, no caps)', async () => {
      const { data, response } = await panel
        .client(admin)
        .POST('/api/v1/plans', { body: { name: 'basic', data_limit: 50e9, duration_days: 30 } });
      assert.equal(response.status, 201);
      assert.ok(data);
      assert.deepEqual(
        { ...data, id: 0, created_at: '', updated_at: '' },
        {
          id: 0,
          name: 'basic',
          data_limit: 50e9,
          limit_period: 'monthly',
          speed_limit: 0,
          duration_days: 30,
          max_devices: null,
          quota_action: 'cut',
          throttle_speed: null,
          expiry_starts: 'created',
          created_at: '',
          updated_at: '',
        },
      );
      const got = await panel.client(shop).GET('/api/v1/plans/{id}', { params: { path: { id: data.id } } });
      assert.deepEqual(got.data, data);
    });

    it('refuses a second plan of the same name with 409 name_taken', async () => {
      await panel.client(admin).POST('/api/v1/plans', { body: { name: 'twice' } });
      const { error, response } = await panel.client(admin).POST('/api/v1/plans', { body: { name: 'twice' } });
      assert.equal(response.status, 409);
      assert.equal(error?.error.code, 'name_taken');
      assert.deepEqual(error?.error.fields, { name: 'taken' });
    });

    it('pairs throttle_speed with quota_action throttle, at create and PATCH', async () => {
      const api = panel.client(admin);
      const missing = await api.POST('/api/v1/plans', { body: { name: 'fair', quota_action: 'throttle' } });
      assert.equal(missing.response.status, 422);
      assert.deepEqual(missing.error?.error.fields, { throttle_speed: 'required with quota_action throttle' });
      const stray = await api.POST('/api/v1/plans', { body: { name: 'fair', throttle_speed: 1000 } });
      assert.equal(stray.response.status, 422);
      assert.deepEqual(stray.error?.error.fields, { throttle_speed: 'only with quota_action throttle' });

      const { data } = await api.POST('/api/v1/plans', {
        body: { name: 'fair', quota_action: 'throttle', throttle_speed: 1000, max_devices: 3 },
      });
      assert.ok(data);
      const path = { params: { path: { id: data.id } } };
      const faster = await api.PATCH('/api/v1/plans/{id}', { ...path, body: { throttle_speed: 2000 } });
      assert.equal(faster.data?.throttle_speed, 2000);
      const cut = await api.PATCH('/api/v1/plans/{id}', { ...path, body: { quota_action: 'cut' } });
      assert.deepEqual([cut.data?.quota_action, cut.data?.throttle_speed, cut.data?.max_devices], ['cut', null, 3]);
      const back = await api.PATCH('/api/v1/plans/{id}', { ...path, body: { quota_action: 'throttle' } });
      assert.equal(back.response.status, 422);
      const renamed = await api.PATCH('/api/v1/plans/{id}', { ...path, body: { name: 'basic' } });
      assert.equal(renamed.error?.error.code, 'name_taken');
    });

    it('lists plans oldest first with cursor paging', async () => {
      const all = await panel.client(shop).GET('/api/v1/plans', { params: { query: { limit: 100 } } });
      const names = all.data?.data.map((p) => p.name);
      assert.deepEqual(names, ['basic', 'twice', 'fair']);
      const first = await panel.client(shop).GET('/api/v1/plans', { params: { query: { limit: 2 } } });
      assert.equal(first.data?.has_more, true);
      const next = await panel.client(shop).GET('/api/v1/plans', {
        params: { query: { limit: 2, after: first.data?.data.at(-1)?.id } },
      });
      assert.deepEqual(
        next.data?.data.map((p) => p.name),
        ['fair'],
      );
      assert.equal(next.data?.has_more, false);
    });

    it('refuses writes with a devices-only key (403 naming plans:write), and reads without devices:read', async () => {
      const api = panel.client(shop);
      const made = await api.POST('/api/v1/plans', { body: { name: 'sneaky' } });
      assert.equal(made.response.status, 403);
      assert.equal(made.error?.error.code, 'insufficient_scope');
      assert.match(made.error?.error.message ?? '', /plans:write/);
      const plans = await panel.client(admin).GET('/api/v1/plans', { params: { query: { limit: 1 } } });
      const id = plans.data?.data[0]?.id ?? 0;
      const changed = await api.PATCH('/api/v1/plans/{id}', { params: { path: { id } }, body: { speed_limit: 1 } });
      assert.equal(changed.response.status, 403);
      const deleted = await api.DELETE('/api/v1/plans/{id}', { params: { path: { id } } });
      assert.equal(deleted.response.status, 403);
      const writer = await panel.createKey('plans-only', 'plans:write');
      const read = await panel.client(writer).GET('/api/v1/plans', {});
      assert.equal(read.response.status, 403);
    });

    it('deletes a plan (404 after), and logs every plan change', async () => {
      const api = panel.client(admin);
      const { data } = await api.POST('/api/v1/plans', { body: { name: 'gone' } });
      assert.ok(data);
      const path = { params: { path: { id: data.id } } };
      assert.equal((await api.DELETE('/api/v1/plans/{id}', path)).response.status, 204);
      const again = await api.GET('/api/v1/plans/{id}', path);
      assert.equal(again.response.status, 404);
      assert.equal(again.error?.error.code, 'not_found');
      assert.equal((await api.DELETE('/api/v1/plans/{id}', path)).response.status, 404);

      const log = await panel.client(admin).GET('/api/v1/activity', {
        params: { query: { resource: 'plan', resource_id: String(data.id) } },
      });
      assert.deepEqual(
        log.data?.data.map((e) => [e.action, e.actor]),
        [
          ['plan.created', 'via API key admin'],
          ['plan.deleted', 'via API key admin'],
        ],
      );
    });
  });
}
