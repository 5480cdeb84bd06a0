import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { isoAt, ManualClock } from '../../src/domain/clock.ts';
import { eventDraft, recordEvent } from '../../src/services/events.ts';
import { openStore, type Store, write } from '../../src/store/db.ts';
import { listEvents } from '../../src/store/events.ts';
import { migrate } from '../../src/store/migrate.ts';
import { Housekeeping } from '../../src/workers/housekeeping.ts';

const DAY_MS = 24 * 60 * 60 * 1000;

describe('housekeeping with a fake clock', () => {
  let dataDir: string;
  let store: Store;
  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'vpn-panel-housekeeping-'));
    store = openStore({ databaseUrl: undefined, dataDir });
    await migrate(store);
  });
  after(async () => {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('prunes events older than 90 days and keeps the rest', async () => {
    const clock = new ManualClock(Date.parse('2026-01-01T00:00:00Z'));
    const record = (detail: string) => write(store.db, (tx) => recordEvent(tx, clock, eventDraft({ kind: 'server.created', detail, actor: 'system' })));
    await record('old');
    clock.advance(30 * DAY_MS);
    await record('younger');
    clock.advance(61 * DAY_MS);
    await record('new');
    await new Housekeeping(store.db, clock, pino({ level: 'silent' })).runOnce();
    const left = await listEvents(store.db, {}, { afterId: 0, limit: 10 });
    assert.deepEqual(left.map((e) => e.detail), ['younger', 'new'], `now is ${isoAt(clock.nowMs())}`);
    clock.advance(60 * DAY_MS);
    await new Housekeeping(store.db, clock, pino({ level: 'silent' })).runOnce();
    assert.deepEqual((await listEvents(store.db, {}, { afterId: 0, limit: 10 })).map((e) => e.detail), ['new']);
  });
});
