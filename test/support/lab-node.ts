/**
 * The setup of the panel-level e2e suites: a lab (test/support/netns.ts), a database, a remote `vpn-panel node` on
 * real WireGuard in the lab's host namespace (plain HTTP), and `vpn-panel serve` without a local node and with an
 * API key of every scope; with the helpers that drive a device's client until the node limits it.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { once } from 'node:events';
import type { components } from '../../console/src/api-types.ts';
import { createTestDatabase, type TestDatabase } from './databases.ts';
import { connectDevice, endLab, LabAgent, LabPanel, need, ok } from './lab-panel.ts';
import { NetLab, run, sleep, waitFor, type WgClient } from './netns.ts';
import type { ApiClient } from './panel.ts';

type Node = components['schemas']['Node'];
type Server = components['schemas']['Server'];
type Device = components['schemas']['Device'];

export interface LabNodeOptions {
  /** The lab's namespace prefix (a random one when not given). */
  prefix?: string;
  keyName: string;
  /** An address in the lab's internet namespace (TEST-NET-2) for the clients' traffic beyond the server. */
  internetIp?: string;
  /** Starts `iperf3 -s` on `internetIp`, at `iperfPort`. */
  iperfServer?: boolean;
  /** Panel env added to the suite's. */
  env?: Record<string, string>;
}

/** When the server's counters of a peer reached a limit, and when the peer left the interface (ms since the epoch). */
export interface CutOff {
  crossedMs: number;
  cutMs: number;
}

/** How `downloadUntilCut` downloads: iperf3's `-b` (none: as fast as the tunnel goes), and how long it waits. */
export interface DownloadOptions {
  bitrate?: string;
  seconds: number;
  deadlineMs: number;
}

export class LabNode {
  readonly lab: NetLab;
  readonly database: TestDatabase;
  readonly agent: LabAgent;
  readonly panel: LabPanel;
  readonly api: ApiClient;
  /** The port of the suite's `iperf3 -s` (with `iperfServer`). */
  readonly iperfPort = 20_000 + randomInt(20_000);
  readonly #internetIp: string | undefined;
  readonly #clients: WgClient[] = [];
  #node: Node | undefined;

  private constructor(parts: { lab: NetLab; database: TestDatabase; agent: LabAgent; panel: LabPanel }, ip?: string) {
    this.lab = parts.lab;
    this.database = parts.database;
    this.agent = parts.agent;
    this.panel = parts.panel;
    this.api = parts.panel.api;
    this.#internetIp = ip;
  }

  /** Everything made, or, when a step fails, nothing left behind and the failure thrown. */
  static async start(options: LabNodeOptions): Promise<LabNode> {
    const lab = await NetLab.create(options.prefix);
    let database: TestDatabase | undefined;
    let agent: LabAgent | undefined;
    let panel: LabPanel | undefined;
    try {
      database = await createTestDatabase('sqlite');
      agent = await LabAgent.start(lab, database, { tls: false });
      panel = await LabPanel.start(database, options.keyName, { LOCAL_NODE: 'off', ...options.env });
      const made = new LabNode({ lab, database, agent, panel }, options.internetIp);
      if (options.internetIp !== undefined) {
        if (options.iperfServer === true) await lab.startIperfServer(options.internetIp, made.iperfPort);
        else await lab.addInternetAddress(options.internetIp);
      }
      return made;
    } catch (error) {
      await endLab({ panel, agents: [agent], labs: [lab], database });
      throw error;
    }
  }

  /** The agent added to the panel as node `edge` (once), online. */
  async node(): Promise<Node> {
    this.#node ??= await this.agent.addTo(this.panel, 'edge');
    return this.#node;
  }

  /** A server on the node (added first if it is not yet). */
  async addServer(name: string, body: { protocol?: Server['protocol'] } = {}): Promise<Server> {
    const node = await this.node();
    return ok(await this.api.POST('/api/v1/servers', { body: { name, node_id: node.id, ...body } }), 'POST /servers');
  }

  /** A client from the device's config, the internet address routed through its tunnel; closed by `end`. */
  async connect(server: Server, device: Device): Promise<WgClient> {
    const routed = this.#internetIp === undefined ? [] : [`${this.#internetIp}/32`];
    const client = await connectDevice(this.lab, server, device, routed);
    this.#clients.push(client);
    return client;
  }

  async device(id: number): Promise<Device> {
    return ok(await this.api.GET('/api/v1/devices/{id}', { params: { path: { id } } }), `GET /devices/${id}`);
  }

  /** The device's events of `kind`. */
  async events(kind: string, deviceId: number): Promise<components['schemas']['Event'][]> {
    const query = { kind, device_id: deviceId, limit: 200 };
    return ok(await this.api.GET('/api/v1/events', { params: { query } }), 'GET /events').data;
  }

  /** Waits until the device's status is `status`; the device then. */
  waitForStatus(id: number, status: Device['status'], timeoutMs: number): Promise<Device> {
    return waitFor(
      `status ${status}`,
      async () => {
        const device = await this.device(id);
        return device.status === status ? device : undefined;
      },
      timeoutMs,
      250,
    );
  }

  /** rx+tx the server's interface counts for the peer, or undefined when the peer is not on it. */
  async peerBytes(serverId: number, publicKey: string): Promise<number | undefined> {
    const out = await run('wg', ['show', this.lab.serverNames(serverId).iface, 'transfer']);
    const line = out.split('\n').find((l) => l.startsWith(`${publicKey}\t`));
    if (line === undefined) return undefined;
    const [, rx, tx] = line.split('\t');
    return Number(rx) + Number(tx);
  }

  /** An iperf3 download (internet → client, through the tunnel) from a one-off listener, until the returned stop. */
  async download(options: { bitrate?: string; seconds: number }): Promise<() => Promise<void>> {
    const ip = need(this.#internetIp, 'the internet address of LabNode.start');
    const internetNs = await this.lab.addInternet();
    const port = String(5201 + randomInt(1000));
    const listener = this.#spawn(['netns', 'exec', internetNs, 'iperf3', '-s', '-1', '-B', ip, '-p', port]);
    const listening = async (): Promise<true | undefined> =>
      (await run('ip', ['netns', 'exec', internetNs, 'ss', '-ltn'])).includes(`:${port}`) ? true : undefined;
    await waitFor('iperf3 to listen', listening, 5000, 50);
    const rate = options.bitrate === undefined ? [] : ['-b', options.bitrate];
    const args = ['-c', ip, '-p', port, '-R', ...rate, '-t', String(options.seconds)];
    const sender = this.#spawn(['netns', 'exec', this.lab.clientNs, 'iperf3', ...args]);
    return () => stopAll([sender, listener]);
  }

  /**
   * Downloads until the node cuts the peer off, watching the server's counters every 50 ms: when the peer's bytes
   * reach `limit`, and when it leaves the interface. A node that cuts the peer off between two readings, right after
   * its counters reached the limit, leaves the crossing unseen: it happened after the last reading below the limit
   * was asked for, which then bounds the latency from above. That the cut did not come before the limit is what the
   * panel's recorded usage shows (the callers check it: the node books a peer's counters before it takes the peer off).
   */
  async downloadUntilCut(
    serverId: number,
    publicKey: string,
    limit: number,
    options: DownloadOptions,
  ): Promise<CutOff> {
    const stop = await this.download(options);
    try {
      let crossedMs: number | undefined;
      let belowMs: number | undefined;
      const deadline = Date.now() + options.deadlineMs;
      for (;;) {
        const askedMs = Date.now();
        const bytes = await this.peerBytes(serverId, publicKey);
        const now = Date.now();
        if (bytes === undefined) {
          const crossed = crossedMs ?? belowMs;
          assert.ok(crossed !== undefined, 'the peer was on the interface when the download began');
          return { crossedMs: crossed, cutMs: now };
        }
        if (bytes < limit) belowMs = askedMs;
        else crossedMs ??= now;
        assert.ok(now < deadline, `the peer was not cut off (last counters ${bytes} bytes of ${limit})`);
        await sleep(50);
      }
    } finally {
      await stop();
    }
  }

  /**
   * Runs `command` in the client's namespace (a flow towards the internet address) until the device is
   * `limit_reached`; the device then.
   */
  async flowUntilLimitReached(deviceId: number, command: readonly string[], timeoutMs = 30_000): Promise<Device> {
    const flow = this.#spawn(['netns', 'exec', this.lab.clientNs, ...command]);
    try {
      return await this.waitForStatus(deviceId, 'limit_reached', timeoutMs);
    } finally {
      await stopAll([flow]);
    }
  }

  /** Closes the clients, stops panel and agent, removes the lab, drops the database; what was left behind. */
  async end(): Promise<string[]> {
    for (const client of this.#clients) await client.close().catch(() => undefined);
    return endLab({ panel: this.panel, agents: [this.agent], labs: [this.lab], database: this.database });
  }

  #spawn(args: readonly string[]): ChildProcess {
    const child = spawn('ip', args, { stdio: 'ignore' });
    this.lab.track(child);
    return child;
  }
}

async function stopAll(children: readonly ChildProcess[]): Promise<void> {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
  }
}
