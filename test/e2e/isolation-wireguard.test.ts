/**
 * End to end, as root, on a real WireGuard data plane (wireguard-go): what a client can reach
 * (docs/dataplane.md, "Client isolation"). Two devices of one server, each brought up with `wg-quick`
 * from the config the API returned (AllowedIPs 0.0.0.0/0, ::/0: everything goes through the tunnel),
 * try every listener below with TCP connects of bounded time.
 *
 *   client ns PREFIX-c (wg-quick, device 1) ─┐
 *   client ns PREFIX-c0 (wg-quick, device 2) ┴── host ns PREFIX-h (NODE_NETNS; endpoint 192.0.2.1;
 *        a listener on every address) ── uplink 203.0.113.253 ── internet ns PREFIX-i: listeners on
 *        198.51.100.80 (documentation: the internet), 10.99.0.10 (private), 169.254.169.254 (metadata)
 *
 * A client must reach the internet listener (seen from the uplink address: through NAT) and ping its
 * server; nothing else: no host address, no private or metadata address, no port of the server, not the
 * other client, until `client_to_client` is PATCHed on. The rules stay through a panel restart, come back
 * at the resync after they were deleted by hand, and `NODE_ALLOW_CIDRS` opens the private range only.
 * Every listener is shown reachable where the rules do not apply (a positive control), so "not
 * reachable" can only mean the rules. Everything lives in namespaces this file makes (prefix `i`).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { components } from '../../console/src/api-types.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { endLab, type LabPanel, need, startLabPanel } from '../support/lab-panel.ts';
import {
  hostOf,
  INTERNET_IP,
  NetLab,
  requireRoot,
  run,
  unusedPrefix,
  UPLINK_HOST_IP,
  waitFor,
} from '../support/netns.ts';
import type { ApiClient } from '../support/panel.ts';

type Server = components['schemas']['Server'];
type Device = components['schemas']['Device'];

const skip = requireRoot([
  ['bash', 'bash'],
  ['timeout', 'coreutils'],
]);
const SUITE_TIMEOUT_MS = 240_000;
const PORT = 18_080;
const PRIVATE_IP = '10.99.0.10';
const METADATA_IP = '169.254.169.254';
/** A first handshake, or a panel's resync, comes within this. */
const REACH_TIMEOUT_MS = 15_000;

const SUITE = 'client isolation on a real WireGuard node (wg-quick clients, wireguard-go)';

describe(SUITE, { skip, timeout: SUITE_TIMEOUT_MS }, () => {
  let lab: NetLab | undefined;
  let db: TestDatabase | undefined;
  let panel: LabPanel | undefined;
  let api: ApiClient;
  let server: Server | undefined;
  let devices: Device[] = [];
  let internetNs = '';
  let secondNs = '';

  /** The host end of the server's veth, as the host has it. */
  async function vethHostIp(): Promise<string> {
    const l = need(lab, 'the lab');
    const n = l.serverNames(need(server, 'the server').id);
    const out = await run('ip', ['-n', l.hostNs, '-o', '-4', 'addr', 'show', 'dev', n.vethHost]);
    return need(/inet (\S+)\//.exec(out)?.[1], `an address on ${n.vethHost}`);
  }

  /**
   * Every target a client in `netns` must not reach, by what it is. The lab's first client namespace
   * is on the endpoint's own /24, a route wg-quick keeps before the tunnel (`suppress_prefixlength 0`):
   * the endpoint is tried from the second one, which reaches it only through its default route.
   */
  async function forbidden(netns: string): Promise<[string, string][]> {
    const s = need(server, 'the server');
    const l = need(lab, 'the lab');
    return [
      ...(netns === l.clientNs ? [] : [['the endpoint (host address)', l.hostIp] as [string, string]]),
      ['the uplink address', UPLINK_HOST_IP],
      ["the host end of the server's veth", await vethHostIp()],
      ['a private address beyond the uplink', PRIVATE_IP],
      ['the metadata address', METADATA_IP],
      ["a TCP port of the server's tunnel address", hostOf(s.address)],
    ];
  }

  /** Of `targets`, those a TCP connect from `netns` reaches (all tried at once, each for at most 1.5 s). */
  async function reached(netns: string, targets: readonly [string, string][]): Promise<string[]> {
    const l = need(lab, 'the lab');
    const tried = async ([what, ip]: [string, string]): Promise<string | null> =>
      (await l.tcpConnects(netns, ip, PORT)) ? `${what} ${ip}` : null;
    const results = await Promise.all(targets.map(tried));
    return results.filter((r): r is string => r !== null);
  }

  /** Waits until the first client reaches the internet listener; its answer names the address the listener saw. */
  async function waitForInternet(netns: string): Promise<string> {
    const l = need(lab, 'the lab');
    const what = `${netns} to reach ${INTERNET_IP}:${PORT} through the tunnel`;
    return waitFor(what, () => l.tcpRead(netns, INTERNET_IP, PORT), REACH_TIMEOUT_MS, 100);
  }

  /** Both isolation tables of the server as nft lists them. */
  async function tables(): Promise<string[]> {
    const l = need(lab, 'the lab');
    const n = l.serverNames(need(server, 'the server').id);
    return Promise.all([
      run('ip', ['netns', 'exec', n.netns, 'nft', 'list', 'table', 'inet', 'vpnpanel_iso']),
      run('ip', ['netns', 'exec', l.hostNs, 'nft', 'list', 'table', 'inet', n.isolationTable]),
    ]);
  }

  /** Restarts the panel with `env` over the env it was made with. */
  const restartPanel = (env: Record<string, string> = {}): Promise<void> => need(panel, 'the panel').restart(env);

  async function patchClientToClient(value: boolean): Promise<void> {
    const id = need(server, 'the server').id;
    const body = { client_to_client: value };
    const patched = await api.PATCH('/api/v1/servers/{id}', { params: { path: { id } }, body });
    assert.equal(patched.response.status, 200, JSON.stringify(patched.error));
    assert.equal(patched.data?.client_to_client, value);
  }

  before(async () => {
    lab = await NetLab.create(await unusedPrefix('i'));
    internetNs = await lab.addInternet();
    for (const ip of [INTERNET_IP, PRIVATE_IP, METADATA_IP]) {
      await lab.addInternetAddress(ip);
      await lab.listenTcp(internetNs, ip, PORT, 'internet');
    }
    await lab.listenTcp(lab.hostNs, '0.0.0.0', PORT, 'host');
    secondNs = await lab.addClientNamespace();
    db = await createTestDatabase('sqlite');
    // Drift repair would put deleted tables back on its own (test/e2e/drift-wireguard.test.ts shows that);
    // off here, so the test can show what the host is without them and that a resync restores them.
    panel = await startLabPanel(lab, db, 'e2e-isolation', { DRIFT_CHECK_INTERVAL: 'off' });
    api = panel.api;
  });

  after(async () => {
    assert.deepEqual(await endLab({ panel, labs: [lab], database: db }), [], 'cleanup left nothing behind');
  });

  test('every listener answers where no tunnel is in the way (the positive control)', async () => {
    const l = need(lab, 'the lab');
    assert.ok(await l.tcpConnects(l.clientNs, l.hostIp, PORT), 'the host listener on the endpoint, from the client');
    assert.ok(await l.tcpConnects(secondNs, l.hostIp, PORT), 'and from the second client namespace');
    assert.ok(await l.tcpConnects(internetNs, UPLINK_HOST_IP, PORT), 'the host listener on the uplink address');
    for (const ip of [INTERNET_IP, PRIVATE_IP, METADATA_IP]) {
      assert.ok(await l.tcpConnects(l.hostNs, ip, PORT), `${ip} from the host namespace`);
    }
  });

  test('a new server is isolated: a client reaches the internet through NAT, pings its server, no more', async (t) => {
    const l = need(lab, 'the lab');
    const created = await api.POST('/api/v1/servers', { body: { name: 'iso' } });
    assert.equal(created.response.status, 201, JSON.stringify(created.error));
    const s = need(created.data, 'a server body');
    server = s;
    assert.equal(s.client_to_client, false, 'client_to_client is off by default');
    const n = l.serverNames(s.id);
    await l.listenTcp(n.netns, '0.0.0.0', PORT, 'server');
    devices = [];
    for (const [name, ns] of [
      ['one', l.clientNs],
      ['two', secondNs],
    ] as const) {
      const made = await api.POST('/api/v1/devices', { body: { server_id: s.id, name } });
      assert.equal(made.response.status, 201, JSON.stringify(made.error));
      const device = need(made.data, 'a device body');
      devices.push(device);
      const config = need(device.config ?? undefined, 'a config with its private key');
      await l.wgQuickUp(`${l.prefix}-q${devices.length}`, config, ns);
    }
    const [one, two] = devices;
    const startMs = Date.now();
    const seen = await waitForInternet(l.clientNs);
    t.diagnostic(`first connect through the tunnel after ${Date.now() - startMs} ms`);
    assert.equal(seen, `internet ${UPLINK_HOST_IP}`, 'the internet listener sees the uplink address: through NAT');
    assert.equal(await waitForInternet(secondNs), `internet ${UPLINK_HOST_IP}`, 'the second client works too');
    assert.ok(await l.pingFrom(l.clientNs, hostOf(s.address)), 'ping to the server tunnel address works');
    assert.ok(await l.pingFrom(secondNs, hostOf(s.address)), 'from the second client too');

    await l.listenTcp(secondNs, need(two, 'device two').address, PORT, 'client');
    const [oneIp, twoIp] = [need(one, 'device one').address, need(two, 'device two').address];
    assert.deepEqual(await reached(l.clientNs, [...(await forbidden(l.clientNs)), ['the other client', twoIp]]), []);
    assert.deepEqual(await reached(secondNs, [...(await forbidden(secondNs)), ['the other client', oneIp]]), []);
    assert.equal(await l.pingFrom(l.clientNs, twoIp, 1), false, 'no ping to the other client');
  });

  test('client_to_client: a PATCH lets clients reach each other (not the host), another takes it back', async () => {
    const l = need(lab, 'the lab');
    const two = need(devices[1], 'device two');
    const n = l.serverNames(need(server, 'the server').id);
    const interfaceBefore = await run('ip', ['-n', n.netns, '-o', 'link', 'show', 'dev', n.iface]);
    await patchClientToClient(true);
    const oneIp = need(devices[0], 'device one').address;
    assert.equal(await l.tcpRead(l.clientNs, two.address, PORT), `client ${oneIp}`, 'client one reaches client two');
    assert.ok(await l.pingFrom(l.clientNs, two.address), 'and pings it');
    assert.deepEqual(await reached(secondNs, await forbidden(secondNs)), []);
    const interfaceAfter = await run('ip', ['-n', n.netns, '-o', 'link', 'show', 'dev', n.iface]);
    const index = (line: string): string | undefined => /^(\d+):/.exec(line)?.[1];
    assert.equal(index(interfaceAfter), index(interfaceBefore), 'the interface was not made anew');

    await patchClientToClient(false);
    assert.equal(await l.tcpConnects(l.clientNs, two.address, PORT), false, 'isolated again');

    const open = await api.POST('/api/v1/servers', { body: { name: 'iso-open', client_to_client: true } });
    assert.equal(open.response.status, 201, JSON.stringify(open.error));
    const openServer = need(open.data, 'a server body');
    assert.equal(openServer.client_to_client, true, 'client_to_client given at creation');
    const on = l.serverNames(openServer.id);
    const nftArgs = ['netns', 'exec', on.netns, 'nft', 'list', 'chain', 'inet', 'vpnpanel_iso', 'forward'];
    const forward = await run('ip', nftArgs);
    assert.match(forward, new RegExp(`iifname "${on.iface}" oifname "${on.iface}" accept`));
    const deleted = await api.DELETE('/api/v1/servers/{id}', { params: { path: { id: openServer.id }, query: {} } });
    assert.equal(deleted.response.status, 204);
    assert.deepEqual(await l.leftoversOf(openServer.id), [], 'its isolation table went with it');

    const log = await need(panel, 'the panel').cli(['activity', '--resource', 'server', '--json']);
    const page = JSON.parse(log.stdout) as { data: { action: string; before: unknown; after: unknown }[] };
    const entries = page.data.filter((e) => e.action === 'server.updated');
    assert.deepEqual(
      entries.map((e) => [e.before, e.after]),
      [
        [{ client_to_client: false }, { client_to_client: true }],
        [{ client_to_client: true }, { client_to_client: false }],
      ],
      'the activity log shows the change as API booleans',
    );
  });

  test('the rules survive a panel restart, and a table deleted by hand comes back at the resync', async () => {
    const l = need(lab, 'the lab');
    const n = l.serverNames(need(server, 'the server').id);
    const expected = await tables();
    await restartPanel();
    assert.deepEqual(await tables(), expected, 'the same rules after the restart');
    assert.deepEqual(await reached(secondNs, await forbidden(secondNs)), []);

    await run('ip', ['netns', 'exec', n.netns, 'nft', 'delete', 'table', 'inet', 'vpnpanel_iso']);
    await run('ip', ['netns', 'exec', l.hostNs, 'nft', 'delete', 'table', 'inet', n.isolationTable]);
    // Without the rules the same client reaches them: the rules were what kept it out.
    assert.ok(await l.tcpConnects(secondNs, PRIVATE_IP, PORT), 'without the rules the private listener is reachable');
    assert.ok(await l.tcpConnects(secondNs, l.hostIp, PORT), 'and so is the host, at the endpoint address');

    await restartPanel();
    await waitFor(
      'the isolation tables to be back',
      async () => {
        const now = await tables().catch(() => null);
        return now !== null && JSON.stringify(now) === JSON.stringify(expected) ? true : undefined;
      },
      REACH_TIMEOUT_MS,
    );
    assert.deepEqual(await reached(secondNs, await forbidden(secondNs)), []);
    assert.equal(await waitForInternet(secondNs), `internet ${UPLINK_HOST_IP}`);
  });

  test('NODE_ALLOW_CIDRS opens the private range it names, and nothing else', async () => {
    const l = need(lab, 'the lab');
    await restartPanel({ NODE_ALLOW_CIDRS: '10.99.0.0/16, fd00:99::/32' });
    const privateOpen = async (): Promise<boolean> => l.tcpConnects(secondNs, PRIVATE_IP, PORT);
    const opened = async (): Promise<true | undefined> => ((await privateOpen()) ? true : undefined);
    await waitFor(`${PRIVATE_IP} to be reachable`, opened, REACH_TIMEOUT_MS);
    assert.equal(await l.tcpRead(secondNs, PRIVATE_IP, PORT), `internet ${UPLINK_HOST_IP}`);
    const rest = (await forbidden(secondNs)).filter(([, ip]) => ip !== PRIVATE_IP);
    assert.deepEqual(await reached(secondNs, rest), [], 'metadata, the host and the server stay closed');

    await restartPanel();
    const closed = async (): Promise<true | undefined> => ((await privateOpen()) ? undefined : true);
    await waitFor(`${PRIVATE_IP} to be closed again`, closed, REACH_TIMEOUT_MS);
  });

  test('a malformed NODE_ALLOW_CIDRS stops the panel with one line naming it', async () => {
    const p = need(panel, 'the panel');
    await p.stop();
    const failed = await p.start({ NODE_ALLOW_CIDRS: '10.99.0.1/16' }).then(
      async () => {
        await p.stop('SIGKILL');
        return null;
      },
      (error: unknown) => String(error),
    );
    const line = /invalid configuration: NODE_ALLOW_CIDRS must be comma-separated networks: '10\.99\.0\.1\/16' is not/;
    assert.match(failed ?? 'it started', line);
    await p.start();
  });
});
