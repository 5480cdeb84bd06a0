/** The panel's client of a remote agent (src/agent/connection.ts) with an agent older than a field it reads. */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { HttpNodeConnection } from '../../src/agent/connection.ts';
import { ipv6OfResync } from '../../src/services/servers.ts';
import { TEST_SERVER, testPeer } from '../support/agent-peers.ts';
import { FakeAgent } from '../support/fake-agent.ts';
import type { DesiredServer } from '../../src/agent/protocol.ts';

async function* itemsOf<T>(items: readonly T[]): AsyncGenerator<T> {
  for (const item of items) yield item;
}

describe('the connection to a remote agent', () => {
  const agent = new FakeAgent();
  before(() => agent.start());
  after(() => agent.stop());

  test('an agent that predates IPv6 answers a deploy without `ipv6`: it made none, so it reads as off', async () => {
    const node = new HttpNodeConnection({ name: 'old', url: agent.url, token: agent.token, certSha256: null });
    const desired = { server: { ...TEST_SERVER, address6: 'fd00:9::1/64' }, peers: [] };
    const state = await node.applyServer(desired);
    assert.equal(state.ipv6, 'off');
  });

  test('an agent that predates the resync report names no IPv6: read as is, every server it applied off', async () => {
    const node = new HttpNodeConnection({ name: 'old', url: agent.url, token: agent.token, certSha256: null });
    const report = await node.resync(itemsOf([{ server: { ...TEST_SERVER, address6: 'fd00:9::1/64' }, peers: [] }]));
    assert.deepEqual(report, { applied: [TEST_SERVER.serverId], removed: [], failures: [] });
    assert.deepEqual([...ipv6OfResync(report)], [[TEST_SERVER.serverId, 'off']]);
  });
  test('a resync is sent a server at a time as the panel reads them, and the agent gets them all', async () => {
    const node = new HttpNodeConnection({ name: 'n', url: agent.url, token: agent.token, certSha256: null });
    const servers: DesiredServer[] = [1, 2, 3].map((n) => ({
      server: { ...TEST_SERVER, serverId: n, listenPort: 51000 + n },
      peers: [testPeer(n), testPeer(n + 10)],
    }));
    const report = await node.resync(itemsOf(servers));
    assert.deepEqual(report.applied, [1, 2, 3]);
    assert.deepEqual([...agent.held.values()], servers);
  });

  test('a resync whose source fails mid-way fails with the source error, not as the node unreachable', async () => {
    const node = new HttpNodeConnection({ name: 'n', url: agent.url, token: agent.token, certSha256: null });
    async function* failing(): AsyncGenerator<DesiredServer> {
      yield { server: TEST_SERVER, peers: [] };
      throw new Error('the database went away');
    }
    await assert.rejects(node.resync(failing()), /the database went away/);
  });
});
