/**
 * Device slots (issue 26 item 3, docs/decisions.md "Device slots") on SQLite and PostgreSQL: a plan's max_devices
 * holds per external_id group; a create or a move (PATCH external_id) into a full group is 409
 * device_limit_reached and changes nothing, exactly under concurrency (8 at once for one free slot: one wins); a
 * group of several plans has the largest of their caps; a group without plans has none.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';

for (const kind of DATABASE_KINDS) {
  describe(`device slots (${kind})`, () => {
    let db: TestDatabase;
    let panel: AppUnderTest;
    let key: string;
    let serverId = 0;
    /** Creates on different servers hold no common server lock: only the group's keeps them apart. */
    const servers: number[] = [];
    const plans = new Map<number | null, number>();
    const api = () => panel.client(key);

    async function create(externalId: string, cap: number | null | undefined, server = serverId) {
      const plan_id = cap === undefined ? undefined : plans.get(cap);
      return api().POST('/api/v1/devices', { body: { server_id: server, external_id: externalId, plan_id } });
    }
    async function groupSize(externalId: string): Promise<number> {
      const { data } = await api().GET('/api/v1/devices', { params: { query: { external_id: externalId } } });
      return data?.data.length ?? -1;
    }

    before(async () => {
      db = await createTestDatabase(kind);
      panel = await buildTestApp(db);
      key = await panel.createKey('shop', 'all', { rateLimitExempt: true });
      for (let i = 0; i < 4; i++) {
        const { data } = await api().POST('/api/v1/servers', { body: { name: `fra-${i}`, country: 'DE' } });
        servers.push(data?.id ?? 0);
      }
      serverId = servers[0] ?? 0;
      for (const cap of [1, 2, 3, null]) {
        const made = await api().POST('/api/v1/plans', { body: { name: `cap-${cap}`, max_devices: cap } });
        plans.set(cap, made.data?.id ?? 0);
      }
    });
    after(async () => {
      await panel.close();
      await db.drop();
    });

    it('lets one of 8 creates at once take the last free slot; the rest are 409 and save nothing', async () => {
      assert.equal((await create('alice', 2)).response.status, 201);
      const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => create('alice', 2, servers[i % 4])));
      const statuses = answers.map((a) => a.response.status).sort();
      assert.deepEqual(statuses, [201, 409, 409, 409, 409, 409, 409, 409]);
      const refused = answers.find((a) => a.response.status === 409);
      assert.equal(refused?.error?.error.code, 'device_limit_reached');
      assert.deepEqual(refused?.error?.error.fields, { external_id: 'at most 2 devices' });
      assert.equal(await groupSize('alice'), 2);
    });

    it('refuses a move into a full group (PATCH external_id), exactly under concurrency', async () => {
      assert.equal((await create('bob', 1)).response.status, 201);
      const { data: loner } = await create('carol', 1);
      const path = { params: { path: { id: loner?.id ?? 0 } } };
      const moved = await api().PATCH('/api/v1/devices/{id}', { ...path, body: { external_id: 'bob' } });
      assert.equal(moved.response.status, 409);
      assert.equal(moved.error?.error.code, 'device_limit_reached');
      assert.equal((await api().GET('/api/v1/devices/{id}', path)).data?.external_id, 'carol');

      // Eight devices of a 2-device plan, each alone in its group, move at once into a group with one free slot.
      assert.equal((await create('dave', 2)).response.status, 201);
      const movers = await Promise.all(Array.from({ length: 8 }, (_, i) => create(`mover-${i}`, 2)));
      const answers = await Promise.all(
        movers.map((m) =>
          api().PATCH('/api/v1/devices/{id}', {
            params: { path: { id: m.data?.id ?? 0 } },
            body: { external_id: 'dave' },
          }),
        ),
      );
      assert.deepEqual(answers.map((a) => a.response.status).sort(), [200, 409, 409, 409, 409, 409, 409, 409]);
      assert.equal(await groupSize('dave'), 2);
    });

    it("counts every device of the group against the largest cap of its devices' plans", async () => {
      assert.equal((await create('erin', 1)).response.status, 201);
      // A 3-device plan coming in raises the group's cap to 3: the customer bought the larger plan.
      assert.equal((await create('erin', 3)).response.status, 201);
      // A device without a plan counts, and takes the group's cap.
      assert.equal((await create('erin', undefined)).response.status, 201);
      assert.equal((await create('erin', undefined)).response.status, 409);
      assert.equal((await create('erin', 1)).response.status, 409);
      assert.equal(await groupSize('erin'), 3);
    });

    it('caps no group whose plans include one without max_devices, nor one without plans', async () => {
      for (let i = 0; i < 3; i++) assert.equal((await create('frank', null)).response.status, 201);
      assert.equal((await create('frank', 1)).response.status, 201);
      for (let i = 0; i < 3; i++) assert.equal((await create('grace', undefined)).response.status, 201);
      assert.equal(await groupSize('frank'), 4);
    });
  });
}
