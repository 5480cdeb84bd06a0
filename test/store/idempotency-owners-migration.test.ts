/** Migration 030 on both databases: the keys of API keys made before it are kept and still found by their owner. */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { sql } from 'kysely';
import { insertApiKey } from '../../src/store/api-keys.ts';
import { findIdempotencyKey } from '../../src/store/idempotency.ts';
import { migrate } from '../../src/store/migrate.ts';
import { openStore } from '../../src/store/open.ts';
import { createTestDatabase, DATABASE_KINDS } from '../support/databases.ts';

const NOW = '2026-03-04T05:06:07.089Z';

for (const kind of DATABASE_KINDS) {
  describe(`migration 030 keeps the API keys' idempotency keys (${kind})`, () => {
    const made = createTestDatabase(kind);
    after(async () => (await made).drop());

    it('a row written before it is found under its API key after it, and under no console user', async () => {
      const database = await made;
      const store = openStore({ databaseUrl: database.env.DATABASE_URL, dataDir: database.dataDir });
      try {
        await migrate(store, '029-delivery-device');
        const key = await insertApiKey(store.db, {
          name: 'shop',
          keyHash: 'f'.repeat(64),
          scopes: 'devices:write',
          rateLimitExempt: false,
          createdAt: NOW,
        });
        await sql`insert into idempotency_keys
          (api_key_id, idempotency_key, fingerprint, state, status_code, response_body, created_at)
          values (${key.id}, 'order-1', 'fp', 'done', 201, '{"id":1}', ${NOW})`.execute(store.db);

        await migrate(store);

        const row = await findIdempotencyKey(store.db, { apiKeyId: key.id, key: 'order-1' });
        assert.deepEqual(row && [row.console_user_id, row.fingerprint, row.state, row.status_code, row.response_body], [
          null,
          'fp',
          'done',
          201,
          '{"id":1}',
        ]);
        assert.equal(await findIdempotencyKey(store.db, { consoleUserId: key.id, key: 'order-1' }), undefined);
      } finally {
        await store.close();
      }
    });
  });
}
