/**
 * Migration 022 on both databases: entries written before it lose what the routes hide (issue 30): a node's
 * agent URL, pin and last error; a webhook's URL but for its host (summary) and origin (field). Other
 * entries stay as they were.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { migrate } from '../../src/store/migrate.ts';
import { openStore } from '../../src/store/open.ts';
import { createTestDatabase, DATABASE_KINDS } from '../support/databases.ts';

const NOW = '2026-03-04T05:06:07.089Z';
const HOOK_URL = 'https://hooks.example.com/hook?token=RECEIVER-SECRET-123';
const CHAT_URL = 'https://chat.example.com:8443/services/T1/B2/CHAT-SECRET-456';
const AGENT_URL = 'https://10.20.30.40:7000';
const PIN = 'ab'.repeat(32);
const SERVED = 'cd'.repeat(32);
const PIN_MISMATCH = `its certificate (sha256 ${SERVED}) is not the pinned --cert-sha256 ${PIN}`;
const PIN_ERROR = `node 'edge' is unreachable: ${PIN_MISMATCH}`;
const HIDDEN = ['RECEIVER-SECRET', 'CHAT-SECRET', 'com/hook', '/services/', '10.20.30.40', PIN, SERVED, 'ECONNREFUSED'];

const edge = {
  id: 2,
  name: 'edge',
  url: AGENT_URL,
  cert_sha256: PIN,
  public_host: 'edge.example.net',
  status: 'offline',
  last_seen_at: null,
  last_error: null,
  driver: null,
  version: null,
};
/** The node's fields that stay. */
const { url: _url, cert_sha256: _pin, last_error: _error, ...edgeKept } = edge;
const hook = { id: 7, url: HOOK_URL, events: ['device.created'], description: 'shop', enabled: true, created_by: 'x' };

/** Entries as versions before 022 wrote them: [action, resource id, summary, before, after]. */
const OLD: [string, string, string, object | null, object | null][] = [
  ['node.added', '1', 'node local added (the local node)', null, { ...edge, id: 1, name: 'local', url: null }],
  ['node.added', '2', `node edge added at ${AGENT_URL}`, null, edge],
  ['node.offline', '2', `node edge is offline: ${PIN_ERROR}`, { status: 'online' }, { status: 'offline' }],
  ['node.removed', '2', 'node edge removed', { ...edge, last_error: `connect ECONNREFUSED ${AGENT_URL}` }, null],
  ['webhook.created', '7', `webhook 7 to ${HOOK_URL} created`, null, hook],
  ['webhook.updated', '7', `webhook 7 to ${HOOK_URL} updated`, { description: 'shop' }, { description: 'shop 2' }],
  ['webhook.updated', '7', `webhook 7 to ${CHAT_URL} updated`, { url: HOOK_URL }, { url: CHAT_URL }],
  ['webhook.disabled', '7', `webhook 7 to ${CHAT_URL} turned off: its receiver answered 410 Gone`, null, null],
  ['webhook.deleted', '7', `webhook 7 to ${CHAT_URL} deleted`, { ...hook, url: CHAT_URL }, null],
  ['device.created', '3', 'device d1 created on server a', null, { id: 3, name: 'd1', metadata: { url: HOOK_URL } }],
];

/** The same entries after 022: [summary, before, after]. */
const NEW: [string, object | null, object | null][] = [
  ['node local added (the local node)', null, { ...edgeKept, id: 1, name: 'local' }],
  ['node edge added', null, edgeKept],
  ['node edge is offline', { status: 'online' }, { status: 'offline' }],
  ['node edge removed', edgeKept, null],
  ['webhook 7 to hooks.example.com created', null, { ...hook, url: 'https://hooks.example.com/…' }],
  ['webhook 7 to hooks.example.com updated', { description: 'shop' }, { description: 'shop 2' }],
  [
    'webhook 7 to chat.example.com:8443 updated',
    { url: 'https://hooks.example.com/…' },
    { url: 'https://chat.example.com:8443/…' },
  ],
  ['webhook 7 to chat.example.com:8443 turned off: its receiver answered 410 Gone', null, null],
  ['webhook 7 to chat.example.com:8443 deleted', { ...hook, url: 'https://chat.example.com:8443/…' }, null],
  // Not a node's or a webhook's: as it was (a device's metadata is what devices:read shows anyway).
  ['device d1 created on server a', null, { id: 3, name: 'd1', metadata: { url: HOOK_URL } }],
];

for (const kind of DATABASE_KINDS) {
  describe(`migration 022 redacts the activity written before it (${kind})`, () => {
    const made = createTestDatabase(kind);
    after(async () => (await made).drop());

    it("drops nodes' URLs, pins and errors and webhooks' URLs but for their host, and keeps the rest", async () => {
      const database = await made;
      const store = openStore({ databaseUrl: database.env.DATABASE_URL, dataDir: database.dataDir });
      try {
        await migrate(store, '021-device-day-in-row');
        const rows = OLD.map(([action, resourceId, summary, before, after]) => ({
          created_at: NOW,
          actor: 'admin',
          request_id: null,
          action,
          resource: action.split('.')[0] ?? '',
          resource_id: resourceId,
          summary,
          before: before === null ? null : JSON.stringify(before),
          after: after === null ? null : JSON.stringify(after),
        }));
        // More than the migration's batch of 500 after them (the node.offline entry again): every one is reached.
        const offline = rows[2];
        assert.ok(offline !== undefined);
        const flaps = Array.from({ length: 600 }, () => offline);
        await store.db
          .insertInto('activity')
          .values([...rows, ...flaps])
          .execute();
        await migrate(store);
        const all = await store.db.selectFrom('activity').selectAll().orderBy('id').execute();
        assert.deepEqual(
          all.slice(rows.length).map((row) => row.summary),
          flaps.map(() => 'node edge is offline'),
        );
        const read = all.slice(0, rows.length);
        assert.deepEqual(
          read.map((row) => [
            row.summary,
            row.before === null ? null : JSON.parse(row.before),
            row.after === null ? null : JSON.parse(row.after),
          ]),
          NEW,
        );
        assert.deepEqual(
          read.map((row) => [row.action, row.resource_id, row.actor, row.created_at]),
          OLD.map(([action, resourceId]) => [action, resourceId, 'admin', NOW]),
        );
        const text = JSON.stringify(read.filter((row) => row.resource !== 'device'));
        for (const hidden of HIDDEN) assert.ok(!text.includes(hidden), `${hidden} is gone`);
      } finally {
        await store.close();
      }
    });
  });
}
