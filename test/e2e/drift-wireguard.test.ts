/**
 * End to end, as root, on a real WireGuard data plane (wireguard-go): the node matches the database,
 * always. A panel with its local node (in lab `g…` A's host namespace) and a remote `vpn-panel node`
 * (AGENT_TLS=off, in lab B's), both with the default drift check interval. Each test changes a node
 * behind the panel's back, as a local root user (`wg set`, `tc`, `nft`) or a holder of the node token
 * (the agent's own API) would, and waits (polling) until the node is back as the database says: within
 * 60 s, and with a `server.drift_repaired` entry by `system` in the activity log naming what differed
 * (`vpn-panel activity --json`).
 *
 * The default interval is used on purpose: the 60 s bound is the product's (DRIFT_CHECK_INTERVAL_MS,
 * two rounds for drift of what the agent was told). The local node's drifts run one after another
 * (they share a server) while the remote node's run beside them. Everything lives in namespaces of the two labs'
 * prefixes and is removed in `after()`, pass or fail.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test, type TestContext } from 'node:test';
import type { AgentPeer, DesiredServer } from '../../src/agent/protocol.ts';
import type { ActivityEntry as Activity } from '../../src/domain/activity.ts';
import type { components } from '../../console/src/api-types.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { endLab, LabAgent, type LabPanel, need, startLabPanel } from '../support/lab-panel.ts';
import { NetLab, requireRoot, run, unusedPrefix, waitFor, wgKeyPair } from '../support/netns.ts';

type Server = components['schemas']['Server'];
type Device = components['schemas']['Device'];

const skip = requireRoot([['tc', 'iproute2']]);
/** The issue's bound: drift is repaired within 60 s. */
const REPAIR_BOUND_MS = 60_000;
/** Five drifts one after another, each repaired within 60 s (the remote node's two meanwhile): about 90-160 s. */
const SUITE_TIMEOUT_MS = 8 * REPAIR_BOUND_MS;
const SPEED_LIMIT_KBPS = 1000;

/** `wg show IF allowed-ips` as public key → allowed ips. */
async function allowedIpsOf(iface: string): Promise<Map<string, string>> {
  const out = await run('wg', ['show', iface, 'allowed-ips']);
  return new Map(
    out
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => [l.split('\t')[0] ?? '', l.split('\t')[1] ?? '']),
  );
}

/** The HTB class id the driver gives a limited peer: `1:` and the low 16 bits of its address in hex. */
function classIdOf(ip: string): string {
  const [, , third, fourth] = ip.split('.').map(Number);
  return `1:${((third ?? 0) * 256 + (fourth ?? 0)).toString(16)}`;
}

const SUITE = 'drift of a node is repaired within 60 s (real WireGuard, local node and `vpn-panel node`)';

describe(SUITE, { skip, timeout: SUITE_TIMEOUT_MS }, () => {
  let labA: NetLab | undefined;
  let labB: NetLab | undefined;
  let db: TestDatabase | undefined;
  let panel: LabPanel | undefined;
  let agent: LabAgent | undefined;
  let local: { server: Server; open: Device; limited: Device } | undefined;
  let remote: { server: Server; device: Device } | undefined;

  async function repairs(): Promise<Activity[]> {
    const args = ['activity', '--json', '--actor', 'system', '--resource', 'server', '--limit', '200'];
    const listed = await need(panel, 'the panel').cli(args);
    assert.equal(listed.code, 0, listed.stderr);
    const page: { data: Activity[] } = JSON.parse(listed.stdout);
    return page.data.filter((entry) => entry.action === 'server.drift_repaired');
  }

  /**
   * Makes the drift, waits until `repaired` says the node is as the database says (at most 60 s from
   * the drift), then for the activity entry of the repair, which must match `summary`.
   */
  async function expectRepair(
    t: TestContext,
    drift: () => Promise<void>,
    repaired: () => Promise<boolean>,
    summary: RegExp,
  ): Promise<void> {
    const before = (await repairs()).length;
    const startMs = Date.now();
    await drift();
    await waitFor('the node to be repaired', async () => ((await repaired()) ? true : undefined), REPAIR_BOUND_MS, 200);
    t.diagnostic(`repaired ${((Date.now() - startMs) / 1000).toFixed(1)} s after the drift`);
    const since = async () => (await repairs()).slice(before);
    const found = async () => (await since()).find((e) => summary.test(e.summary));
    const entry = await waitFor('its activity entry', found, 5000, 200).catch(async (error: unknown) => {
      assert.fail(`${String(error)}; entries since: ${JSON.stringify((await since()).map((e) => e.summary))}`);
    });
    assert.equal(entry.actor, 'system');
    assert.equal(entry.request_id, null);
  }

  const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

  /** A call to the remote agent's own API with the node token, as its holder could make it. */
  async function agentCall(method: string, path: string, body: unknown): Promise<void> {
    const { url, token } = need(agent, 'the agent');
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const response = await fetch(`${url}${path}`, { method, headers, body: JSON.stringify(body) });
    assert.ok(response.ok, `${method} ${path}: ${response.status} ${await response.text()}`);
  }

  function plantedPeer(publicKey: string): AgentPeer {
    const limits = { remainingBytes: null, journalId: 'x', meter: 0, dataLimit: 0 };
    // No data limit and no end: what a token holder would grant.
    const forever = { periodEndsAtMs: null, expiresAtMs: null };
    return {
      deviceId: 999_999,
      publicKey,
      allowedIp: '0.0.0.0/0',
      speedLimitKbps: 0,
      limits: { ...limits, ...forever },
    };
  }

  before(async () => {
    labA = await NetLab.create(await unusedPrefix('g'));
    labB = await NetLab.create(await unusedPrefix('g'));
    db = await createTestDatabase('sqlite');
    panel = await startLabPanel(labA, db, 'e2e-drift');
    const api = panel.api;
    agent = await LabAgent.start(labB, db, { tls: false });
    const edge = await agent.addTo(panel, 'edge');

    const server = async (body: { name: string; node_id?: number }): Promise<Server> => {
      const created = await api.POST('/api/v1/servers', { body });
      assert.equal(created.response.status, 201, JSON.stringify(created.error));
      return need(created.data, 'a server');
    };
    const device = async (serverId: number, name: string, speedLimit = 0): Promise<Device> => {
      const body = { server_id: serverId, name, speed_limit: speedLimit };
      const created = await api.POST('/api/v1/devices', { body });
      assert.equal(created.response.status, 201, JSON.stringify(created.error));
      return need(created.data, 'a device');
    };
    const localServer = await server({ name: 'drift-local' });
    const open = await device(localServer.id, 'open');
    local = { server: localServer, open, limited: await device(localServer.id, 'limited', SPEED_LIMIT_KBPS) };
    const remoteServer = await server({ name: 'drift-remote', node_id: edge.id });
    remote = { server: remoteServer, device: await device(remoteServer.id, 'remote') };
  });

  after(async () => {
    const problems = await endLab({ panel, agents: [agent], labs: [labA, labB], database: db });
    assert.deepEqual(problems, [], 'cleanup left nothing behind');
  });

  // The local node's drifts one after another (they share a server), beside the remote node's.
  describe('two nodes at once', { concurrency: 2 }, () => {
    describe('the local node, changed by a local root user', { concurrency: 1 }, () => {
      test('a peer planted with `wg set` on the server interface is gone', async (t) => {
        const { server } = need(local, 'the local server');
        const iface = need(labA, 'lab A').serverNames(server.id).iface;
        const planted = (await wgKeyPair()).publicKey;
        await expectRepair(
          t,
          () => run('wg', ['set', iface, 'peer', planted, 'allowed-ips', '0.0.0.0/0']).then(() => undefined),
          async () => !(await allowedIpsOf(iface)).has(planted),
          new RegExp(
            `drift-local.*peer ${escapeRegExp(planted)} \\(0\\.0\\.0\\.0/0\\) is on ${iface} but was not applied`,
          ),
        );
      });

      test("a device's peer removed by hand comes back", async (t) => {
        const { server, open } = need(local, 'the local server');
        const iface = need(labA, 'lab A').serverNames(server.id).iface;
        await expectRepair(
          t,
          () => run('wg', ['set', iface, 'peer', open.public_key, 'remove']).then(() => undefined),
          async () => (await allowedIpsOf(iface)).get(open.public_key) === `${open.address}/32 ${open.address6}/128`,
          new RegExp(`peer ${escapeRegExp(open.public_key)} is missing from ${iface}`),
        );
      });

      test('a changed allowed ip is put back', async (t) => {
        const { server, open } = need(local, 'the local server');
        const iface = need(labA, 'lab A').serverNames(server.id).iface;
        await expectRepair(
          t,
          () => run('wg', ['set', iface, 'peer', open.public_key, 'allowed-ips', '0.0.0.0/0']).then(() => undefined),
          async () => (await allowedIpsOf(iface)).get(open.public_key) === `${open.address}/32 ${open.address6}/128`,
          new RegExp(
            `peer ${escapeRegExp(open.public_key)} has allowed ips 0\\.0\\.0\\.0/0, ` +
              `not ${escapeRegExp(`${open.address}/32,${open.address6}/128`)}`,
          ),
        );
      });

      test('a deleted tc class of a speed-limited device comes back', async (t) => {
        const { server, limited } = need(local, 'the local server');
        const n = need(labA, 'lab A').serverNames(server.id);
        const classId = classIdOf(limited.address);
        const limitedClass = new RegExp(`^class htb ${classId} .*rate ${SPEED_LIMIT_KBPS / 1000}Mbit`, 'm');
        const classes = () => run('tc', ['-n', n.netns, 'class', 'show', 'dev', n.iface]);
        const hasClass = async () => limitedClass.test(await classes());
        assert.ok(await hasClass(), `the limited device has class ${classId} on ${n.iface}`);
        await expectRepair(
          t,
          () => run('tc', ['-n', n.netns, 'class', 'del', 'dev', n.iface, 'classid', classId]).then(() => undefined),
          hasClass,
          new RegExp(`speed limit of ${escapeRegExp(limited.address)}: class ${classId} is missing on ${n.iface}`),
        );
      });

      test('a deleted nft NAT table of a server comes back', async (t) => {
        const { server } = need(local, 'the local server');
        const lab = need(labA, 'lab A');
        const table = lab.serverNames(server.id).hostTable;
        const nft = (...args: string[]) => run('ip', ['netns', 'exec', lab.hostNs, 'nft', ...args]);
        const hasTable = async () => (await nft('list', 'tables')).includes(`table ip ${table}`);
        assert.ok(await hasTable());
        const drift = () => nft('delete', 'table', 'ip', table).then(() => undefined);
        await expectRepair(t, drift, hasTable, new RegExp(`nft table ${table} is missing`));
      });

      test('a deleted client-isolation table of a server comes back', async (t) => {
        const { server } = need(local, 'the local server');
        const lab = need(labA, 'lab A');
        const table = lab.serverNames(server.id).isolationTable;
        const nft = (...args: string[]) => run('ip', ['netns', 'exec', lab.hostNs, 'nft', ...args]);
        const hasTable = async () => (await nft('list', 'tables')).includes(`table inet ${table}`);
        assert.ok(await hasTable());
        const drift = () => nft('delete', 'table', 'inet', table).then(() => undefined);
        await expectRepair(t, drift, hasTable, new RegExp(`table inet ${table} in \\S+ is missing`));
      });
    });

    describe('the remote node, changed by a holder of the node token', { concurrency: 1 }, () => {
      test('a 0.0.0.0/0 peer added with the node token (POST /v1/servers/:id/peers) is gone', async (t) => {
        const { server } = need(remote, 'the remote server');
        const iface = need(labB, 'lab B').serverNames(server.id).iface;
        const planted = (await wgKeyPair()).publicKey;
        await expectRepair(
          t,
          () => agentCall('POST', `/v1/servers/${server.id}/peers`, { upsert: [plantedPeer(planted)], remove: [] }),
          async () => !(await allowedIpsOf(iface)).has(planted),
          /drift-remote.*on node edge.*the desired state the agent holds differs from the database/,
        );
      });

      test('a server replaced with the node token (PUT /v1/servers/:id: new key and peer) is put back', async (t) => {
        const { server, device } = need(remote, 'the remote server');
        const iface = need(labB, 'lab B').serverNames(server.id).iface;
        const [planted, serverKeys] = [await wgKeyPair(), await wgKeyPair()];
        const replaced: DesiredServer = {
          server: {
            serverId: server.id,
            privateKey: serverKeys.privateKey,
            listenPort: server.listen_port,
            address: server.address,
            mtu: server.mtu,
          },
          peers: [
            { ...plantedPeer(device.public_key), deviceId: device.id, allowedIp: `${device.address}/32` },
            plantedPeer(planted.publicKey),
          ],
        };
        await expectRepair(
          t,
          () => agentCall('PUT', `/v1/servers/${server.id}`, replaced),
          async () => {
            const peers = await allowedIpsOf(iface);
            const key = (await run('wg', ['show', iface, 'public-key'])).trim();
            const deviceBack = peers.get(device.public_key) === `${device.address}/32 ${device.address6}/128`;
            return !peers.has(planted.publicKey) && deviceBack && key === server.public_key;
          },
          /drift-remote.*on node edge.*the desired state the agent holds differs from the database/,
        );
      });
    });
  });

  test('nothing else was repaired: the devices and servers made through the API never read as drift', async () => {
    assert.equal((await repairs()).length, 8);
  });
});
