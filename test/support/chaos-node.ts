/**
 * The node side of the chaos suite (issue 27): a panel and a remote `vpn-panel node` on a real WireGuard data
 * plane (wireguard-go, the lab of test/support/netns.ts), with faults injected for real.
 *
 * The agent runs in a network namespace of its own, `PREFIX-a`, listening on that namespace's loopback, so a
 * partition is an nftables drop on the agent's port there, never a rule in the root namespace:
 *
 *   panel (root ns) ── TCP 127.0.0.1:relay ── relay (this process) ── Unix socket ── relay (PREFIX-a)
 *     ── TCP 127.0.0.1:AGENT_PORT (PREFIX-a, where `partition()` drops both directions) ── vpn-panel node
 *
 * The relays only copy bytes (the TLS link, pinned as `nodes add` pins it, goes through them unchanged); a Unix
 * socket is the one path between the namespaces that adds no link or address to the root namespace. The agent
 * drives the lab's host namespace (NODE_NETNS) as any remote node does. Everything is ended by PID and removed
 * with the lab's namespaces.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { createConnection, createServer, type Server as NetServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test, type TestContext } from 'node:test';
import type { components } from '../../console/src/api-types.ts';
import { createTestDatabase, type TestDatabase } from './databases.ts';
import { connectDevice, type DeviceBytes, endLab, LabPanel, labNodeEnv, need } from './lab-panel.ts';
import { hostOf, NetLab, run, succeeds, unusedPrefix, waitFor, type WgClient } from './netns.ts';
import { ROOT } from './panel.ts';

type Server = components['schemas']['Server'];
type Device = components['schemas']['Device'];

const CLI = join(ROOT, 'bin/vpn-panel.js');
/** The agent's port in its own namespace: the namespace is the lab's alone, so a fixed one is free. */
const AGENT_PORT = 7443;
/** TEST-NET-2, in the lab's internet namespace beyond the node's uplink: where clients download from. */
const DOWNLOAD_IP = '198.51.100.5';
/** Copies a Unix socket's connections to TCP 127.0.0.1:PORT of the namespace it runs in (argv: socket, port). */
const NS_RELAY = `
const net = require('node:net');
const [path, port] = process.argv.slice(1);
net.createServer((c) => {
  const t = net.connect(Number(port), '127.0.0.1');
  c.pipe(t).pipe(c);
  c.on('error', () => t.destroy());
  t.on('error', () => c.destroy());
  c.on('close', () => t.destroy());
  t.on('close', () => c.destroy());
}).listen(path, () => console.log('listening'));
`;

/** Pipes `a` and `b` both ways; either closing or failing ends the other. */
function splice(a: Socket, b: Socket): void {
  a.pipe(b).pipe(a);
  for (const [x, y] of [
    [a, b],
    [b, a],
  ] as const) {
    x.on('error', () => y.destroy());
    x.on('close', () => y.destroy());
  }
}

/** Waits until `output()` holds `text`, failing with the output when `child` exits first or after `timeoutMs`. */
function untilPrinted(child: ChildProcess, output: () => string, text: string, timeoutMs: number): Promise<true> {
  return waitFor(
    `"${text}" from ${child.spawnfile}`,
    async () => {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`exited early:\n${output()}`);
      return output().includes(text) ? true : undefined;
    },
    timeoutMs,
    50,
  );
}

/**
 * Starts `args` in network namespace `netns` and no other: nsenter execs it (the child's PID is the command's) and,
 * unlike `ip netns exec`, leaves the mount namespace alone, so the namespaces an agent adds (`ip netns add` mounts
 * them under /var/run/netns) are seen by everyone. Tracked by the lab.
 */
function spawnIn(lab: NetLab, netns: string, args: readonly string[], env: Record<string, string>) {
  const child = spawn('nsenter', [`--net=/var/run/netns/${netns}`, '--', ...args], {
    env: { ...process.env, ...env },
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  lab.track(child);
  let output = '';
  child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  return { child, output: () => output };
}

/**
 * `vpn-panel node` in namespace `PREFIX-a` of `lab`, reached from the root namespace through the relays above.
 * It can be killed and started again with the same token, port and data (its usage journal).
 */
export class ChaosNode {
  /** What the panel is told to reach: the relay on the root namespace's loopback. */
  readonly url: string;
  readonly netns: string;
  readonly #lab: NetLab;
  readonly #env: Record<string, string>;
  readonly #tokenFile: string;
  readonly #relay: NetServer;
  readonly #connections = new Set<Socket>();
  #agent: { child: ChildProcess; output: () => string } | undefined;
  #certSha256: string | undefined;
  #partitioned = false;

  private constructor(lab: NetLab, database: TestDatabase, relay: NetServer, port: number) {
    this.#lab = lab;
    this.netns = `${lab.prefix}-a`;
    this.#relay = relay;
    this.url = `https://127.0.0.1:${port}`;
    this.#tokenFile = join(database.dataDir, `node-${lab.prefix}.token`);
    this.#env = {
      ...labNodeEnv(lab),
      AGENT_PORT: String(AGENT_PORT),
      AGENT_HOST: '127.0.0.1',
      AGENT_TOKEN: randomBytes(16).toString('hex'),
      DATA_DIR: join(database.dataDir, `node-${lab.prefix}`),
      LOG_LEVEL: 'info',
      METRICS_PORT: '0',
    };
  }

  static async start(lab: NetLab, database: TestDatabase): Promise<ChaosNode> {
    const netns = `${lab.prefix}-a`;
    await run('ip', ['netns', 'add', netns]);
    await run('ip', ['-n', netns, 'link', 'set', 'lo', 'up']);
    const socket = join(database.dataDir, `relay-${lab.prefix}.sock`);
    const nsRelay = spawnIn(lab, netns, [process.execPath, '-e', NS_RELAY, socket, String(AGENT_PORT)], {});
    await untilPrinted(nsRelay.child, nsRelay.output, 'listening', 5000);
    const relay = createServer();
    relay.listen(0, '127.0.0.1');
    await once(relay, 'listening');
    const address = relay.address();
    assert.ok(address !== null && typeof address === 'object', 'the relay listens on a TCP port');
    const node = new ChaosNode(lab, database, relay, address.port);
    relay.on('connection', (client: Socket) => {
      const upstream = createConnection(socket);
      for (const s of [client, upstream]) {
        node.#connections.add(s);
        s.once('close', () => node.#connections.delete(s));
      }
      splice(client, upstream);
    });
    try {
      await node.start();
    } catch (error) {
      await node.end();
      throw error;
    }
    return node;
  }

  /** The agent's PID; a failed assertion while it is stopped. */
  get pid(): number {
    return need(this.#agent?.child.pid, 'a running agent');
  }

  /** Starts the stopped agent and waits for its ready line. */
  async start(): Promise<void> {
    assert.equal(this.#agent, undefined, 'the agent is stopped before it starts again');
    const agent = spawnIn(this.#lab, this.netns, [process.execPath, CLI, 'node'], this.#env);
    this.#agent = agent;
    // The whole ready line (JSON, with the served certificate's fingerprint), not just its start.
    await untilPrinted(agent.child, agent.output, 'node agent ready', 20_000);
    const line = await waitFor(
      'the ready line',
      async () => /^.*node agent ready.*\n/m.exec(agent.output())?.[0],
      5000,
      20,
    );
    const ready: { certSha256?: unknown } = JSON.parse(line);
    assert.equal(typeof ready.certSha256, 'string', `the certificate's fingerprint in ${line}`);
    this.#certSha256 = String(ready.certSha256);
  }

  /** Sends `signal` to the agent's PID and waits for its exit (SIGKILL after 5 s). Whether it exited in time. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<boolean> {
    const agent = this.#agent;
    this.#agent = undefined;
    if (agent === undefined || agent.child.exitCode !== null || agent.child.signalCode !== null) return true;
    const exited = once(agent.child, 'exit');
    process.kill(need(agent.child.pid, 'a PID'), signal);
    const late = setTimeout(() => agent.child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(late);
    return agent.child.signalCode === signal || agent.child.exitCode !== null;
  }

  /**
   * Drops every packet to or from the agent's port in its namespace (`on`), or removes the drop. Connections
   * already open stall as in a real partition; none is reset. Asking for what is already so does nothing.
   */
  async partition(on: boolean): Promise<void> {
    if (on === this.#partitioned) return;
    const nft = (script: string) => run('ip', ['netns', 'exec', this.netns, 'nft', '-f', '-'], script);
    if (on) {
      const chain = 'type filter hook output priority 0; policy accept;';
      await nft(
        `table inet chaos_partition {\n  chain out {\n    ${chain}\n` +
          `    tcp dport ${AGENT_PORT} drop\n    tcp sport ${AGENT_PORT} drop\n  }\n}\n`,
      );
    } else {
      await nft('delete table inet chaos_partition\n');
    }
    this.#partitioned = on;
  }

  /** Registers the node as `vpn-panel nodes add` run by hand would (token in a 0600 file, certificate pinned). */
  async addTo(panel: LabPanel, name: string): Promise<components['schemas']['Node']> {
    writeFileSync(this.#tokenFile, this.#env.AGENT_TOKEN ?? '', { mode: 0o600 });
    const pin = ['--cert-sha256', need(this.#certSha256, 'a certificate')];
    const where = ['--url', this.url, '--public-host', this.#lab.hostIp, '--token-file', this.#tokenFile];
    const added = await panel.cli(['nodes', 'add', '--name', name, ...where, ...pin]);
    assert.equal(added.code, 0, added.stderr);
    return waitForNode(panel, name, 'online', 15_000);
  }

  /** Stops the agent (SIGTERM) and the relay; whether the agent exited within 5 s. */
  async end(): Promise<boolean> {
    await this.partition(false).catch(() => undefined);
    const inTime = await this.stop();
    for (const s of this.#connections) s.destroy();
    this.#relay.close();
    return inTime;
  }
}

/** Waits until the panel shows node `name` with `status`. */
export function waitForNode(panel: LabPanel, name: string, status: 'online' | 'offline', timeoutMs: number) {
  return waitFor(
    `node ${name} to be ${status}`,
    async () => {
      const { data } = await panel.api.GET('/api/v1/nodes');
      return data?.data.find((node) => node.name === name && node.status === status);
    },
    timeoutMs,
    250,
  );
}

/** A panel, a ChaosNode registered with it as `edge`, and a server on that node, in a lab of prefix `cnXX`. */
export interface ChaosLab {
  lab: NetLab;
  panel: LabPanel;
  node: ChaosNode;
  server: Server;
  clients: WgClient[];
  /** Ends everything, pass or fail; what went wrong or was left behind. */
  end(): Promise<string[]>;
}

/** Builds a ChaosLab; `panelEnv` is added to the panel's environment. Partly built parts are removed on a failure. */
export async function startChaosLab(panelEnv: Record<string, string> = {}): Promise<ChaosLab> {
  const lab = await NetLab.create(`cn${(await unusedPrefix('n')).slice(2)}`);
  let database: TestDatabase | undefined;
  let node: ChaosNode | undefined;
  let panel: LabPanel | undefined;
  const clients: WgClient[] = [];
  const end = async (): Promise<string[]> => {
    for (const client of clients) await client.close().catch(() => undefined);
    const problems = (await node?.end()) === false ? ['vpn-panel node did not exit within 5 s of SIGTERM'] : [];
    return [...problems, ...(await endLab({ panel, labs: [lab], database }))];
  };
  try {
    await lab.addInternetAddress(DOWNLOAD_IP);
    database = await createTestDatabase('sqlite');
    node = await ChaosNode.start(lab, database);
    panel = await LabPanel.start(database, 'chaos-node', { LOCAL_NODE: 'off', ...panelEnv });
    const edge = await node.addTo(panel, 'edge');
    const created = await panel.api.POST('/api/v1/servers', { body: { name: 'chaos', node_id: edge.id } });
    assert.equal(created.response.status, 201, JSON.stringify(created.error));
    const server = need(created.data, 'a server');
    return { lab, panel, node, server, clients, end };
  } catch (error) {
    await end();
    throw error;
  }
}

/** A device made through the API on the lab's server, and a client brought up from its config that reaches it. */
export async function deviceWithClient(
  chaos: ChaosLab,
  body: { data_limit?: number; limit_period?: 'total'; speed_limit?: number },
): Promise<Device> {
  const created = await chaos.panel.api.POST('/api/v1/devices', { body: { server_id: chaos.server.id, ...body } });
  assert.equal(created.response.status, 201, JSON.stringify(created.error));
  const device = need(created.data, 'a device');
  chaos.clients.push(await connectDevice(chaos.lab, chaos.server, device, [`${DOWNLOAD_IP}/32`]));
  const serverIp = hostOf(chaos.server.address);
  const ping = ['netns', 'exec', chaos.lab.clientNs, 'ping', '-c1', '-W1', serverIp];
  await waitFor(
    'the client to reach the server',
    async () => ((await succeeds('ip', ping)) ? true : undefined),
    10_000,
  );
  return device;
}

/** A download in progress: what iperf3 printed on both ends so far, and what stops it. */
export interface Download {
  output(): string;
  stop(): Promise<void>;
}

/** An iperf3 download (internet → device, through the tunnel) at `bitrate` (iperf3's `-b`) for up to `seconds`. */
export async function startDownload(chaos: ChaosLab, bitrate: string, seconds: number): Promise<Download> {
  const { lab } = chaos;
  const internetNs = await lab.addInternet();
  const port = String(5201 + Math.floor(Math.random() * 1000));
  const listener = spawnIn(lab, internetNs, ['iperf3', '-s', '-1', '--forceflush', '-B', DOWNLOAD_IP, '-p', port], {});
  await untilPrinted(listener.child, listener.output, 'Server listening', 5000);
  const args = ['iperf3', '-c', DOWNLOAD_IP, '-p', port, '-R', '--forceflush', '-b', bitrate, '-t', String(seconds)];
  const sender = spawnIn(lab, lab.clientNs, args, {});
  return {
    output: () => `iperf3 -s: ${listener.output()}\niperf3 -c: ${sender.output()}`,
    async stop() {
      for (const { child } of [sender, listener]) {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill('SIGKILL');
          await once(child, 'exit');
        }
      }
    },
  };
}

/** Waits until the server counts `bytes` downloaded by `publicKey`; fails with iperf3's output. */
export async function downloaded(chaos: ChaosLab, download: Download, publicKey: string, bytes: number) {
  await waitFor(
    'the download to flow',
    async () => ((await peerCounters(chaos, publicKey))?.rx_bytes ?? 0) >= bytes || undefined,
    15_000,
    100,
  ).catch((error: unknown) => assert.fail(`${String(error)}\n${download.output()}`));
}

/**
 * The server interface's counters of `publicKey` (`wg show IF transfer` in the server's namespace; its receive
 * is the device's upload), or undefined when the peer is not on the interface.
 */
export async function peerCounters(chaos: ChaosLab, publicKey: string): Promise<DeviceBytes | undefined> {
  const n = chaos.lab.serverNames(chaos.server.id);
  const out = await run('ip', ['netns', 'exec', n.netns, 'wg', 'show', n.iface, 'transfer']).catch(() => '');
  const line = out.split('\n').find((l) => l.startsWith(`${publicKey}\t`));
  if (line === undefined) return undefined;
  const [, received, sent] = line.split('\t');
  return { rx_bytes: Number(sent), tx_bytes: Number(received) };
}

/** The device's usage this month as the panel shows it. */
export async function panelUsage(chaos: ChaosLab, deviceId: number): Promise<DeviceBytes & { status: string }> {
  const got = await chaos.panel.api.GET('/api/v1/devices/{id}', { params: { path: { id: deviceId } } });
  const device = need(got.data, `device ${deviceId}`);
  return { rx_bytes: device.month_usage.rx_bytes, tx_bytes: device.month_usage.tx_bytes, status: device.status };
}

/** Waits (up to `timeoutMs`) until the panel's usage of the device equals `expected`; fails showing both. */
export async function expectLedger(chaos: ChaosLab, deviceId: number, expected: DeviceBytes, timeoutMs = 30_000) {
  const same = (u: DeviceBytes) => u.rx_bytes === expected.rx_bytes && u.tx_bytes === expected.tx_bytes;
  const settled = await waitFor(
    'the ledger to equal the counters',
    async () => {
      const usage = await panelUsage(chaos, deviceId);
      return same(usage) ? usage : undefined;
    },
    timeoutMs,
    250,
  ).catch(() => undefined);
  const last = settled ?? (await panelUsage(chaos, deviceId));
  assert.deepEqual({ rx_bytes: last.rx_bytes, tx_bytes: last.tx_bytes }, expected, 'the ledger equals the counters');
}

/** Events of `kind` (comma-separated kinds allowed), oldest first; of one device when `deviceId` is given. */
export async function eventsOf(chaos: ChaosLab, kind: string, deviceId?: number) {
  const query = { kind, limit: 200, ...(deviceId === undefined ? {} : { device_id: deviceId }) };
  const { data } = await chaos.panel.api.GET('/api/v1/events', { params: { query } });
  return need(data, 'the events').data;
}

/**
 * A suite of one test on its own ChaosLab: built in before() with `panelEnv` added to the panel's environment,
 * ended in after(), which fails when something was left behind.
 */
export function chaosTest(
  suite: string,
  options: { skip: string | false; timeoutMs: number; panelEnv?: Record<string, string> },
  name: string,
  body: (t: TestContext, chaos: ChaosLab) => Promise<void>,
): void {
  describe(suite, { skip: options.skip, timeout: options.timeoutMs }, () => {
    let chaos: ChaosLab | undefined;
    before(async () => {
      chaos = await startChaosLab(options.panelEnv);
    });
    after(async () => {
      assert.deepEqual((await chaos?.end()) ?? [], [], 'cleanup left nothing behind');
    });
    test(name, (t) => body(t, need(chaos, 'the lab')));
  });
}
