/**
 * A node that goes offline is in the activity log without the reason (issue 30): the reason may name the
 * certificate pin, which `GET /nodes` hides from the log's readers. The event keeps it, and `nodes list` the
 * whole detail.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { Agent } from '../../src/agent/agent.ts';
import { LocalNodeConnection, NodeCallError } from '../../src/agent/connection.ts';
import { DryRunDriver } from '../../src/agent/dry-run-driver.ts';
import type { AgentStatus } from '../../src/agent/protocol.ts';
import { isoAt, ManualClock } from '../../src/domain/clock.ts';
import { Calendar } from '../../src/domain/usage.ts';
import { quietPublisher } from '../../src/services/changes.ts';
import { NodeConnections } from '../../src/services/nodes.ts';
import { UsageService } from '../../src/services/usage.ts';
import { NodeMonitor } from '../../src/workers/node-monitor.ts';
import { DATABASE_KINDS } from '../support/databases.ts';
import { migratedStoreForSuite, seedNode } from '../support/usage-fixtures.ts';

const PIN = 'AB'.repeat(32);
const SERVED = 'CD'.repeat(32);

/** The local node's connection, answering as an agent behind a certificate other than the pinned one. */
class WrongPinConnection extends LocalNodeConnection {
  override status(): Promise<AgentStatus> {
    const mismatch = `its certificate (sha256 ${SERVED}) is not the pinned --cert-sha256 ${PIN}`;
    return Promise.reject(new NodeCallError(`node 'edge' is unreachable: ${mismatch}`, 'https://10.20.30.40:7000'));
  }
}

for (const kind of DATABASE_KINDS) {
  describe(`a node going offline, in the activity log (${kind})`, () => {
    const suite = migratedStoreForSuite(kind);

    it('is recorded without the reason; the event keeps it', async () => {
      const { db } = suite.store;
      const clock = new ManualClock(Date.parse('2026-11-24T10:00:00Z'));
      await seedNode(db, 'edge', isoAt(clock.nowMs()));
      const connections = new NodeConnections(new WrongPinConnection(new Agent(new DryRunDriver(), 'test')));
      const usage = new UsageService(db, clock, new Calendar('UTC'));
      const options = { intervalMs: 5000, offlineAfterMs: 1 };
      const changes = quietPublisher(db, clock);
      await new NodeMonitor(db, clock, connections, changes, usage, pino({ level: 'silent' }), options).checkAll();

      const logged = await db.selectFrom('activity').select(['action', 'summary', 'before', 'after']).execute();
      assert.deepEqual(logged, [
        {
          action: 'node.offline',
          summary: 'node edge is offline',
          before: '{"status":"online"}',
          after: '{"status":"offline"}',
        },
      ]);
      const event = await db.selectFrom('events').select('detail').where('kind', '=', 'node.offline').execute();
      assert.ok(event[0]?.detail.includes(PIN), 'the event says why');
    });
  });
}
