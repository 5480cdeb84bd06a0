import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ADMIN_ACTOR } from '../../src/domain/activity.ts';
import { systemClock } from '../../src/domain/clock.ts';
import { ApiKeyService } from '../../src/services/api-keys.ts';
import { quietPublisher } from '../../src/services/changes.ts';
import { openStore, type Store } from '../../src/store/open.ts';
import { type AppUnderTest, buildTestApp } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';

// The API admits the requests one turn of the event loop read together, behind one check for other connections'
// commits (src/http/app.ts): each must still see every commit made before it arrived.
describe("a burst of requests sees another connection's commits made before it (sqlite)", () => {
  let db: TestDatabase;
  let panel: AppUnderTest;
  /** Another connection to the database, as the CLI has. */
  let other: Store;
  let key: string;

  const get = (path: string) =>
    panel.app.inject({ url: `/api/v1${path}`, headers: { authorization: `Bearer ${key}` } });
  const serverNames = async () => {
    const answer = await get('/servers');
    assert.equal(answer.statusCode, 200, answer.body);
    return answer.json<{ data: { name: string }[] }>().data.map((server) => server.name);
  };

  before(async () => {
    db = await createTestDatabase('sqlite');
    panel = await buildTestApp(db);
    key = await panel.createKey('burst', 'servers:read,servers:write', { rateLimitExempt: true });
    other = openStore({ databaseUrl: undefined, dataDir: db.dataDir });
  });
  after(async () => {
    await other.close();
    await panel.close();
    await db.drop();
  });

  it('gives a whole burst the rows after the commit, and refuses it all once the key is revoked', async () => {
    const created = await panel.app.inject({
      method: 'POST',
      url: '/api/v1/servers',
      headers: { authorization: `Bearer ${key}` },
      payload: { name: 'first' },
    });
    assert.equal(created.statusCode, 201, created.body);
    assert.deepEqual(await serverNames(), ['first']);
    assert.deepEqual(await serverNames(), ['first'], 'the reused rows');

    await other.db.updateTable('servers').set({ name: 'renamed' }).execute();
    const burst = await Promise.all(Array.from({ length: 20 }, serverNames));
    for (const names of burst) assert.deepEqual(names, ['renamed']);

    await new ApiKeyService(other, systemClock, quietPublisher(other.db, systemClock)).revoke('burst', ADMIN_ACTOR);
    const refused = await Promise.all(Array.from({ length: 5 }, () => get('/servers')));
    assert.deepEqual(
      refused.map((answer) => answer.statusCode),
      [401, 401, 401, 401, 401],
    );
  });
});
