/**
 * GET /groups/{external_id} (docs/api.md "Groups") as the group page serves it again and again: its bytes are
 * what the Group response schema serialises (each device's JSON is kept and spliced in), and its totals (every
 * device of the group counted, usage of the current month only) are never those before a commit,
 * nor of a month that has ended.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../src/domain/clock.ts';
import { serializerFactory } from '../../src/http/serialization.ts';
import { DeviceSchema, GroupSchema } from '../../src/http/schemas/devices.ts';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';

/** Mid-month in UTC, so that a day later is the same month and 20 days later the next. */
const START_MS = Date.parse('2026-11-15T12:00:00Z');
const DAY_MS = 24 * 60 * 60 * 1000;
/** An external id that reads like the key the page's devices are spliced after. */
const GROUP = 'shop "devices":[] 7';

/** What Fastify's serializer writes for a group through the Group response schema. */
const groupSchemaJson = serializerFactory(
  { Device: DeviceSchema, Group: GroupSchema },
  {},
)({ method: 'GET', url: '/groups/:external_id', httpStatus: '200', schema: { $ref: 'Group' } });

interface GroupJson {
  external_id: string;
  device_count: number;
  month_usage: { rx_bytes: number; tx_bytes: number; total_bytes: number };
  devices: { id: number; name: string }[];
  has_more: boolean;
}

for (const kind of DATABASE_KINDS) {
  describe(`the group page (${kind})`, () => {
    const clock = new ManualClock(START_MS);
    let db: TestDatabase;
    let t: AppUnderTest;
    let key: string;
    let serverId: number;

    async function call(method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) {
      const answer = await t.app.inject({ method, url, headers: { authorization: `Bearer ${key}` }, payload });
      assert.ok(answer.statusCode < 300, `${method} ${url}: ${answer.statusCode} ${answer.body}`);
      return answer;
    }
    const groupPage = async (query = '') => {
      const answer = await call('GET', `/api/v1/groups/${encodeURIComponent(GROUP)}${query}`);
      return { text: answer.body, group: answer.json<GroupJson>() };
    };
    const createDevice = async (externalId: string) =>
      (await call('POST', '/api/v1/devices', { server_id: serverId, external_id: externalId })).json<{ id: number }>();
    const setUsage = (id: number, month: string, rx: number, tx: number) =>
      t.store.db
        .updateTable('devices')
        .set({ usage_month: month, month_rx: rx, month_tx: tx })
        .where('id', '=', id)
        .execute();

    before(async () => {
      db = await createTestDatabase(kind);
      t = await buildTestApp(db, {}, clock);
      key = await t.createKey('shop', 'all', { rateLimitExempt: true });
      serverId = (await call('POST', '/api/v1/servers', { name: 's1' })).json<{ id: number }>().id;
    });
    after(async () => {
      await t.close();
      await db.drop();
    });

    it('writes the bytes the Group schema serialises, again when asked again', async () => {
      for (let i = 0; i < 3; i++) await createDevice(GROUP);
      await createDevice('someone-else');
      for (const query of ['', '?limit=2', '', '?limit=2']) {
        const { text, group } = await groupPage(query);
        assert.equal(group.external_id, GROUP);
        assert.equal(group.devices.length, query === '' ? 3 : 2);
        assert.equal(group.has_more, query !== '');
        assert.equal(text, groupSchemaJson(group));
      }
    });

    it('counts every device and the current month only, and sees each commit at the next request', async () => {
      const [a, b, c] = (await groupPage()).group.devices.map((d) => d.id);
      assert.ok(a !== undefined && b !== undefined && c !== undefined);
      await setUsage(a, '2026-11', 100, 10);
      await setUsage(b, '2026-11', 200, 20);
      // Moved last month: counted as a device, its bytes not in this month's usage.
      await setUsage(c, '2026-10', 5000, 500);
      const before = (await groupPage()).group;
      assert.equal(before.device_count, 3);
      assert.deepEqual(before.month_usage, { rx_bytes: 300, tx_bytes: 30, total_bytes: 330 });

      await setUsage(a, '2026-11', 150, 10);
      assert.deepEqual((await groupPage()).group.month_usage, { rx_bytes: 350, tx_bytes: 30, total_bytes: 380 });
      await createDevice(GROUP);
      assert.equal((await groupPage()).group.device_count, 4);
      // The group's own fields the same, one device changed: the page is made anew, not the bytes before.
      await call('PATCH', `/api/v1/devices/${b}`, { name: 'renamed' });
      const { text, group } = await groupPage();
      assert.equal(group.devices.find((d) => d.id === b)?.name, 'renamed');
      assert.equal(text, groupSchemaJson(group));
    });

    it('counts no bytes of a month that has ended, with nothing committed since', async () => {
      clock.advance(DAY_MS);
      assert.deepEqual((await groupPage()).group.month_usage, { rx_bytes: 350, tx_bytes: 30, total_bytes: 380 });
      clock.advance(20 * DAY_MS);
      const { group } = await groupPage();
      assert.equal(group.device_count, 4);
      assert.deepEqual(group.month_usage, { rx_bytes: 0, tx_bytes: 0, total_bytes: 0 });
    });
  });
}
