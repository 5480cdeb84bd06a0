/**
 * End to end, as root, on a real WireGuard data plane (wireguard-go): IPv6 through the panel (issue 15,
 * docs/dataplane.md "IPv6"). `vpn-panel serve` (SQLite, no local node) drives a remote `vpn-panel node` (TLS,
 * pinned) in the lab's host namespace, whose underlay has IPv6 (2001:db8::/32 documentation addresses as the
 * internet). Servers and devices are made over the API; each device's config, as GET /devices/{id}/config serves
 * it, is brought up with wg-quick.
 *
 *   client ns PREFIX-c  192.0.2.2, 2001:db8:c::2 ── endpoint 192.0.2.1 ──────┐ (server six, default ULA /64)
 *   IPv6-only ns PREFIX-60  2001:db8:d:0::2 ── endpoint [2001:db8:c::1] ─────┴ host ns PREFIX-h (the node)
 *        (server six-only, a given /64)       ── uplink 203.0.113.253, 2001:db8:f::1 ── internet ns PREFIX-i:
 *        listeners on 198.51.100.80 and 2001:db8:1::80, iperf3 on 2001:db8:1::81
 *
 * Checked: the servers' subnet6 (default and given) and the mode the node reports (nat66); a dual-stack client
 * pings the server's address6 and reaches the IPv6 host beyond the node through NAT66, IPv4 still works; an
 * IPv6-only client handshakes over an IPv6 endpoint written in brackets; the usage the panel books equals the
 * server's own counters after an IPv6 download; a cut-off over the API (enabled: false) stops IPv6 too; a
 * server row that says off (as one made before migration 017 did) shows the node's mode after the resync a
 * restarted agent gets. Everything lives in namespaces of this file's prefix (`p…`), removed in `after()`.
 */
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { components } from '../../console/src/api-types.ts';
import { openStore } from '../../src/store/open.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { endLab, LabAgent, LabPanel, need, ok, settledPeerBytes } from '../support/lab-panel.ts';
import {
  HOST_IP6,
  hostOf,
  INTERNET_IP,
  INTERNET_IP6,
  IPERF_IP6,
  NetLab,
  requireRoot,
  run,
  unusedPrefix,
  UPLINK_HOST_IP,
  UPLINK_HOST_IP6,
  waitFor,
} from '../support/netns.ts';
import type { ApiClient } from '../support/panel.ts';

type Server = components['schemas']['Server'];
type Device = components['schemas']['Device'];

const skip = requireRoot([
  ['iperf3', 'iperf3'],
  ['wg-quick', 'wireguard-tools'],
  ['bash', 'bash'],
  ['timeout', 'coreutils'],
]);
const SUITE_TIMEOUT_MS = 150_000;
const PORT = 18_087;
/** The given subnet6 of the second server: host bits zero give the server the first address. */
const GIVEN_SUBNET6 = 'fd3a:1b2c:4d5e:9::/64';
/** A first handshake comes within this. */
const REACH_TIMEOUT_MS = 15_000;

/** The value of the first `Key = value` line of a wg-quick config. */
function confValue(text: string, key: string): string | undefined {
  return new RegExp(`^${key}\\s*=\\s*(.+)$`, 'm').exec(text)?.[1]?.trim();
}

describe('IPv6 through the panel: servers and devices over the API, a remote node (wg-quick, wireguard-go)', {
  skip,
  timeout: SUITE_TIMEOUT_MS,
}, () => {
  let lab: NetLab | undefined;
  let db: TestDatabase | undefined;
  let panel: LabPanel | undefined;
  let agent: LabAgent | undefined;
  let api: ApiClient;
  let ipv6OnlyNs = '';
  const iperfPort = 20_000 + randomInt(20_000);
  /** Server six (default subnet6, IPv4 endpoint) and server six-only (given subnet6, IPv6 endpoint). */
  let six: Server | undefined;
  let sixOnly: Server | undefined;
  /** The dual-stack client's device on six. */
  let dual: Device | undefined;

  const iface = (n: number): string => `${need(lab, 'the lab').prefix}-q${n}`;

  async function fetchConfig(id: number): Promise<string> {
    const { url, key } = need(panel, 'the panel');
    const res = await fetch(`${url}/api/v1/devices/${id}/config`, { headers: { authorization: `Bearer ${key}` } });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    return text;
  }

  async function getDevice(id: number): Promise<Device> {
    return ok(await api.GET('/api/v1/devices/{id}', { params: { path: { id } } }), `GET /devices/${id}`);
  }

  async function getServer(id: number): Promise<Server> {
    return ok(await api.GET('/api/v1/servers/{id}', { params: { path: { id } } }), `GET /servers/${id}`);
  }

  async function createDevice(server: Server, name: string): Promise<Device> {
    const created = await api.POST('/api/v1/devices', { body: { server_id: server.id, name } });
    assert.equal(created.response.status, 201, JSON.stringify(created.error));
    return need(created.data, 'a device body');
  }

  /** What `wg show IF allowed-ips` lists for the device's peer on its server. */
  async function allowedIpsOnNode(server: Server, device: Device): Promise<string | undefined> {
    const out = await run('wg', ['show', need(lab, 'the lab').serverNames(server.id).iface, 'allowed-ips']);
    return out
      .split('\n')
      .find((l) => l.startsWith(`${device.public_key}\t`))
      ?.split('\t')[1];
  }

  /** The first line the listener at `ip` sends a client in `netns` through the tunnel, waiting for a handshake. */
  const reachThrough = (netns: string, ip: string): Promise<string> =>
    waitFor(
      `${netns} to reach ${ip}:${PORT}`,
      () => need(lab, 'the lab').tcpRead(netns, ip, PORT),
      REACH_TIMEOUT_MS,
      100,
    );

  before(async () => {
    lab = await NetLab.create(await unusedPrefix('p'));
    const internetNs = await lab.addInternet();
    await lab.addIpv6();
    for (const ip of [INTERNET_IP, INTERNET_IP6]) await lab.addInternetAddress(ip);
    await lab.listenTcp(internetNs, '::', PORT, 'internet');
    await lab.startIperfServer(IPERF_IP6, iperfPort);
    ipv6OnlyNs = await lab.addIpv6ClientNamespace();
    db = await createTestDatabase('sqlite');
    agent = await LabAgent.start(lab, db);
    // No drift check: the last test shows what the resync alone stores (the drift check would store it too).
    panel = await LabPanel.start(db, 'e2e-ipv6', { LOCAL_NODE: 'off', DRIFT_CHECK_INTERVAL: 'off' });
    api = panel.api;
    const node = await agent.addTo(panel, 'edge6');
    const first = await api.POST('/api/v1/servers', { body: { name: 'six', node_id: node.id } });
    assert.equal(first.response.status, 201, JSON.stringify(first.error));
    six = first.data;
    const given = { name: 'six-only', node_id: node.id, endpoint: HOST_IP6, address6: GIVEN_SUBNET6 };
    const second = await api.POST('/api/v1/servers', { body: given });
    assert.equal(second.response.status, 201, JSON.stringify(second.error));
    sixOnly = second.data;
  });

  after(async () => {
    const problems = await endLab({ panel, agents: [agent], labs: [lab], database: db });
    assert.deepEqual(problems, [], 'cleanup left nothing behind');
  });

  test('servers made over the API have a subnet6 (a default ULA /64, a given one) and the node runs NAT66', () => {
    const [a, b] = [need(six, 'server six'), need(sixOnly, 'server six-only')];
    assert.match(need(a.subnet6 ?? undefined, 'a default subnet6'), /^fd[0-9a-f]{2}:[0-9a-f:]+::\/64$/);
    assert.equal(a.address6, `${(a.subnet6 ?? '').replace('/64', '')}1/64`, 'the first address of it');
    assert.equal(b.subnet6, GIVEN_SUBNET6);
    assert.equal(b.address6, 'fd3a:1b2c:4d5e:9::1/64');
    assert.equal(b.endpoint, HOST_IP6);
    assert.deepEqual([a.ipv6, b.ipv6], ['nat66', 'nat66'], 'the node has an IPv6 uplink');
  });

  test("a config from the API, up with wg-quick: the server's address6, IPv6 beyond (NAT66), IPv4 too", async () => {
    const l = need(lab, 'the lab');
    const server = need(six, 'server six');
    const device = await createDevice(server, 'dual');
    dual = device;
    assert.ok(device.address6 !== null, 'a device of an IPv6 server has an address6');
    const config = await fetchConfig(device.id);
    assert.equal(confValue(config, 'Address'), `${device.address}/32, ${device.address6}/128`);
    assert.equal(confValue(config, 'AllowedIPs'), '0.0.0.0/0, ::/0');
    assert.equal(confValue(config, 'Endpoint'), `${l.hostIp}:${server.listen_port}`);
    assert.equal(await allowedIpsOnNode(server, device), `${device.address}/32 ${device.address6}/128`);

    await l.wgQuickUp(iface(1), config);
    const serverIp6 = hostOf(need(server.address6 ?? undefined, 'address6'));
    assert.ok(await l.waitForPingFrom(l.clientNs, serverIp6, REACH_TIMEOUT_MS), `ping ${serverIp6} through the tunnel`);
    assert.equal(await reachThrough(l.clientNs, INTERNET_IP6), `internet ${UPLINK_HOST_IP6}`, 'seen as the uplink');
    assert.equal(await l.tcpRead(l.clientNs, INTERNET_IP, PORT), `internet ${UPLINK_HOST_IP}`, 'IPv4 through NAT');
    assert.ok(await l.pingFrom(l.clientNs, hostOf(server.address)), "ping the server's IPv4 address");
  });

  test('an IPv6-only client handshakes over the IPv6 endpoint, written in brackets in its config', async () => {
    const l = need(lab, 'the lab');
    const server = need(sixOnly, 'server six-only');
    const device = await createDevice(server, 'v6-only');
    const config = await fetchConfig(device.id);
    assert.equal(confValue(config, 'Endpoint'), `[${HOST_IP6}]:${server.listen_port}`);
    await l.wgQuickUp(iface(2), config, ipv6OnlyNs);
    const serverIp6 = hostOf(need(server.address6 ?? undefined, 'address6'));
    assert.ok(await l.waitForPingFrom(ipv6OnlyNs, serverIp6, REACH_TIMEOUT_MS), `ping ${serverIp6} through the tunnel`);
    const endpoints = await run('wg', ['show', l.serverNames(server.id).iface, 'endpoints']);
    assert.match(endpoints, /\[2001:db8:d::2\]:\d+/, 'the server saw it come over IPv6');
    assert.equal(await reachThrough(ipv6OnlyNs, INTERNET_IP6), `internet ${UPLINK_HOST_IP6}`);
    const seen = await waitFor(
      'the panel to book the handshake',
      async () => ((await getDevice(device.id)).last_handshake === null ? undefined : true),
      15_000,
      250,
    );
    assert.ok(seen);
  });

  test("the usage the panel books covers IPv6: equal to the server's counters after an IPv6 download", async (t) => {
    const l = need(lab, 'the lab');
    const [server, device] = [need(six, 'server six'), need(dual, 'the dual-stack device')];
    const mbps = await l.iperf(IPERF_IP6, iperfPort, 'download', 2, '20M');
    t.diagnostic(`IPv6 download through the tunnel: ${mbps.toFixed(1)} Mbit/s`);
    const truth = await settledPeerBytes(l, server.id, device.public_key);
    assert.ok(truth.rx_bytes > 1_000_000, `an IPv6 download happened: ${JSON.stringify(truth)}`);
    const booked = async () => {
      const month = (await getDevice(device.id)).month_usage;
      return { rx_bytes: month.rx_bytes, tx_bytes: month.tx_bytes };
    };
    const recorded = await waitFor(
      'the panel to book every byte',
      async () => {
        const month = await booked();
        return month.rx_bytes === truth.rx_bytes && month.tx_bytes === truth.tx_bytes ? month : undefined;
      },
      20_000,
      500,
    ).catch(booked);
    t.diagnostic(`server counters ${JSON.stringify(truth)}, panel ${JSON.stringify(recorded)}`);
    assert.deepEqual(recorded, truth, 'exactly the bytes the interface counted');
  });

  test('a cut-off over the API (enabled: false) stops IPv6 traffic too', async () => {
    const l = need(lab, 'the lab');
    const [server, device] = [need(six, 'server six'), need(dual, 'the dual-stack device')];
    const serverIp6 = hostOf(need(server.address6 ?? undefined, 'address6'));
    assert.ok(await l.pingFrom(l.clientNs, serverIp6), 'it works before');
    const patched = await api.PATCH('/api/v1/devices/{id}', {
      params: { path: { id: device.id } },
      body: { enabled: false },
    });
    assert.equal(ok(patched, 'PATCH enabled: false').status, 'disabled');
    assert.equal(await allowedIpsOnNode(server, device), undefined, 'the peer left the interface');
    assert.equal(await l.pingFrom(l.clientNs, serverIp6, 2), false, "no IPv6 ping to the server's address6");
    assert.equal(await l.tcpConnects(l.clientNs, INTERNET_IP6, PORT), false, 'no IPv6 beyond the node');
    assert.equal(await l.tcpConnects(l.clientNs, INTERNET_IP, PORT), false, 'nor IPv4');
  });

  test('a row that says off (made before migration 017) shows what the node runs after the resync', async () => {
    const d = need(db, 'the database');
    const [a, b] = [need(six, 'server six'), need(sixOnly, 'server six-only')];
    const store = openStore({ databaseUrl: d.env.DATABASE_URL, dataDir: d.dataDir });
    try {
      await store.db.updateTable('servers').set({ ipv6: 'off' }).execute();
    } finally {
      await store.close();
    }
    assert.deepEqual([(await getServer(a.id)).ipv6, (await getServer(b.id)).ipv6], ['off', 'off']);
    const node = need(agent, 'the agent');
    await node.stop();
    await node.start();
    // A new boot id: the panel's next monitor round resyncs the node and stores what its report names.
    const modes = await waitFor(
      'GET /servers to show the mode the node reported',
      async () => {
        const { data } = await api.GET('/api/v1/servers');
        const modes = (data?.data ?? []).map((s) => s.ipv6);
        return modes.length === 2 && modes.every((m) => m === 'nat66') ? modes : undefined;
      },
      20_000,
      250,
    );
    assert.deepEqual(modes, ['nat66', 'nat66']);
  });
});
