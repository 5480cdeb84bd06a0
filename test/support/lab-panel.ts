import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type AgentProcess, startAgent } from './agent.ts';
import type { components } from '../../console/src/api-types.ts';
import type { Obfuscation } from '../../src/domain/protocols.ts';
import type { TestDatabase } from './databases.ts';
import { type NetLab, run, sleep, waitFor, type WgClient } from './netns.ts';
import { type ApiClient, type CliResult, freePort, type PanelProcess, startPanel } from './panel.ts';

type Env = Record<string, string | undefined>;
type Node = components['schemas']['Node'];
type Server = components['schemas']['Server'];
type Device = components['schemas']['Device'];

/** How long `vpn-panel serve` or `vpn-panel node` may take to exit on SIGTERM before it is killed. */
const EXIT_GRACE_MS = 5_000;

/** A value an earlier step made: a failed assertion when that step failed. */
export function need<T>(value: T | undefined, what: string): T {
  assert.ok(value !== undefined, `needs ${what} (see the failure above)`);
  return value;
}

/** The data of an openapi-fetch answer, or a failed assertion naming the call and the answer. */
export function ok<T>(result: { data?: T; error?: unknown; response: Response }, what: string): T {
  assert.ok(result.data !== undefined, `${what}: ${result.response.status} ${JSON.stringify(result.error)}`);
  return result.data;
}

/** The env that makes a node (embedded or `vpn-panel node`) drive real WireGuard in the lab's host namespace. */
export function labNodeEnv(lab: NetLab): Record<string, string> {
  return { NODE_DRIVER: 'wireguard', NODE_NETNS: lab.hostNs, NODE_NAME_PREFIX: lab.prefix, PUBLIC_HOST: lab.hostIp };
}

/**
 * `vpn-panel serve` of an e2e suite, with an API key of every scope and no rate limit. It can be stopped
 * and started again on the same database and port, so `url` and `api` stay valid across a restart.
 */
export class LabPanel {
  readonly url: string;
  readonly key: string;
  /** The typed client with the key. */
  readonly api: ApiClient;
  readonly #database: TestDatabase;
  readonly #env: Env;
  readonly #port: number;
  #process: PanelProcess | undefined;

  private constructor(database: TestDatabase, env: Env, process: PanelProcess, key: string) {
    this.#database = database;
    this.#env = env;
    this.#port = process.port;
    this.#process = process;
    this.url = process.url;
    this.key = key;
    this.api = process.client(key);
  }

  /** Starts `vpn-panel serve` on `database` with `env` added to `startPanel`'s, and makes the key. */
  static async start(database: TestDatabase, keyName: string, env: Env): Promise<LabPanel> {
    const process = await startPanel({ database, env });
    try {
      return new LabPanel(database, env, process, await process.createKey(keyName, 'all', ['--no-rate-limit']));
    } catch (error) {
      await process.stop('SIGKILL');
      throw error;
    }
  }

  /** The running process; a failed assertion while the panel is stopped. */
  get process(): PanelProcess {
    return need(this.#process, 'a running panel');
  }

  cli(args: readonly string[]): Promise<CliResult> {
    return this.process.cli(args);
  }

  /**
   * Sends `signal` and waits for the exit, with SIGKILL when SIGTERM has not ended it within 5 s.
   * Returns whether the signal was enough; true for a panel already stopped.
   */
  async stop(signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM'): Promise<boolean> {
    const running = this.#process;
    if (running === undefined) return true;
    this.#process = undefined;
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      void running.stop('SIGKILL');
    }, EXIT_GRACE_MS);
    await running.stop(signal);
    clearTimeout(timer);
    return !late;
  }

  /** Starts the stopped panel again, with the env it was made with and `env` over it. */
  async start(env: Env = {}): Promise<void> {
    assert.equal(this.#process, undefined, 'the panel is stopped before it starts again');
    this.#process = await startPanel({ database: this.#database, env: { ...this.#env, ...env }, port: this.#port });
  }

  async restart(env: Env = {}): Promise<void> {
    await this.stop();
    await this.start(env);
  }
}

/** `LabPanel.start` of a panel whose embedded node is the lab's host namespace (`env` added). */
export function startLabPanel(lab: NetLab, database: TestDatabase, keyName: string, env: Env = {}): Promise<LabPanel> {
  return LabPanel.start(database, keyName, { ...labNodeEnv(lab), ...env });
}

/**
 * `vpn-panel node` driving real WireGuard in a lab's host namespace: its own port and token, its data
 * (usage journal, TLS key and certificate) beside the suite's database, so they go with it. With `tls`
 * (the default) it serves HTTPS with its own certificate, which `addTo` pins; without, plain HTTP.
 * It can be stopped and started again with the same port, token and data.
 */
export class LabAgent {
  readonly url: string;
  readonly token: string;
  readonly #lab: NetLab;
  readonly #env: Record<string, string>;
  readonly #tokenFile: string;
  #process: AgentProcess | undefined;

  private constructor(lab: NetLab, env: Record<string, string>, url: string, tokenFile: string) {
    this.#lab = lab;
    this.#env = env;
    this.url = url;
    this.token = env.AGENT_TOKEN ?? '';
    this.#tokenFile = tokenFile;
  }

  static async start(lab: NetLab, database: TestDatabase, options: { tls?: boolean } = {}): Promise<LabAgent> {
    const tls = options.tls ?? true;
    const port = await freePort();
    const env: Record<string, string> = {
      ...labNodeEnv(lab),
      AGENT_PORT: String(port),
      AGENT_HOST: '127.0.0.1',
      AGENT_TOKEN: randomBytes(16).toString('hex'),
      DATA_DIR: join(database.dataDir, `node-${lab.prefix}`),
      ...(tls ? {} : { AGENT_TLS: 'off' }),
    };
    const url = `${tls ? 'https' : 'http'}://127.0.0.1:${port}`;
    const agent = new LabAgent(lab, env, url, join(database.dataDir, `node-${lab.prefix}.token`));
    await agent.start();
    return agent;
  }

  /** The running process; a failed assertion while the agent is stopped. */
  get process(): AgentProcess {
    return need(this.#process, 'a running agent');
  }

  /** Starts the stopped agent again (waits for its ready line). */
  async start(): Promise<void> {
    assert.equal(this.#process, undefined, 'the agent is stopped before it starts again');
    this.#process = await startAgent(this.#env, (child) => this.#lab.track(child));
  }

  /** Sends `signal` (SIGTERM), SIGKILL after `graceMs` (5 s); whether it exited in time. True when stopped already. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', graceMs = EXIT_GRACE_MS): Promise<boolean> {
    const running = this.#process;
    if (running === undefined) return true;
    this.#process = undefined;
    return running.stop(signal, graceMs);
  }

  /**
   * Registers the agent with the panel as `vpn-panel nodes add --name NAME` would be run by hand (the
   * token in an owner-only file, so it is in no process list; the certificate pinned under TLS) and
   * waits until the panel has it online. Returns the node as the API shows it.
   */
  async addTo(panel: LabPanel, name: string, onlineWithinMs = 15_000): Promise<Node> {
    writeFileSync(this.#tokenFile, this.token, { mode: 0o600 });
    const certSha256 = this.process.certSha256;
    const pin = certSha256 === undefined ? [] : ['--cert-sha256', certSha256];
    const where = ['--url', this.url, '--public-host', this.#lab.hostIp, '--token-file', this.#tokenFile];
    const added = await panel.cli(['nodes', 'add', '--name', name, ...where, ...pin]);
    assert.equal(added.code, 0, added.stderr);
    return waitFor(
      `node ${name} to be online`,
      async () => {
        const { data } = await panel.api.GET('/api/v1/nodes');
        return data?.data.find((node) => node.name === name && node.status === 'online');
      },
      onlineWithinMs,
      250,
    );
  }
}

/**
 * A wireguard-go client in the lab's client namespace with the device's key from the config the API
 * returned; `routed` are destinations beyond the server (the lab's internet) sent through it.
 */
export async function connectDevice(
  lab: NetLab,
  server: Server,
  device: Device,
  routed: readonly string[] = [],
): Promise<WgClient> {
  const privateKey = /^PrivateKey\s*=\s*(\S+)$/m.exec(device.config)?.[1];
  const obfuscation = obfuscationOf(device.config);
  const client = await lab.connectClient({
    ...(obfuscation === undefined ? {} : { obfuscation }),
    serverPublicKey: server.public_key,
    endpoint: server.endpoint,
    port: server.listen_port,
    privateKey: need(privateKey, 'a PrivateKey line in the config'),
    // The subnet's prefix length gives the client a route to the server's address.
    address: `${device.address}/${server.subnet.split('/')[1] ?? '24'}`,
    allowedIps: [server.subnet, ...routed],
  });
  for (const destination of routed) {
    await run('ip', ['-n', lab.clientNs, 'route', 'replace', destination, 'dev', client.iface]);
  }
  return client;
}

/** The AmneziaWG parameters of a config's `[Interface]` (`Jc = 4`, `H1 = 100-200`, ...); undefined when it has none. */
export function obfuscationOf(config: string): Obfuscation | undefined {
  const keys = new Map<string, string>();
  for (const [, key, value] of (config.split(/^\[Peer\]/m)[0] ?? '').matchAll(/^(\w+)\s*=\s*(.+?)\s*$/gm)) {
    if (key !== undefined && value !== undefined) keys.set(key.toLowerCase(), value);
  }
  if (!keys.has('jc')) return undefined;
  const text = (key: string): string => need(keys.get(key), `${key} in the config's [Interface]`);
  const number = (key: string): number => Number(text(key));
  const obfuscation: Obfuscation = {
    jc: number('jc'),
    jmin: number('jmin'),
    jmax: number('jmax'),
    s1: number('s1'),
    s2: number('s2'),
    s3: number('s3'),
    s4: number('s4'),
    h1: text('h1'),
    h2: text('h2'),
    h3: text('h3'),
    h4: text('h4'),
  };
  for (const key of ['i1', 'i2', 'i3', 'i4', 'i5'] as const) {
    const value = keys.get(key);
    if (value !== undefined) obfuscation[key] = value;
  }
  return obfuscation;
}

/** Bytes as the API counts a device's: `rx_bytes` what it downloaded, `tx_bytes` what it uploaded. */
export interface DeviceBytes {
  rx_bytes: number;
  tx_bytes: number;
}

/**
 * The server interface's own counters of the device's peer (`wg show IF transfer`, whose receive is the
 * device's upload) once the last packets in flight are through: the same in two reads a second apart.
 */
export async function settledPeerBytes(lab: NetLab, serverId: number, publicKey: string): Promise<DeviceBytes> {
  const read = async (): Promise<DeviceBytes> => {
    const out = await run('wg', ['show', lab.serverNames(serverId).iface, 'transfer']);
    const line = out.split('\n').find((l) => l.startsWith(`${publicKey}\t`)) ?? '';
    const [, uploaded, downloaded] = line.split('\t');
    return { rx_bytes: Number(downloaded), tx_bytes: Number(uploaded) };
  };
  let last = await read();
  for (let same = 0; same < 2; ) {
    await sleep(1000);
    const next = await read();
    same = next.rx_bytes === last.rx_bytes && next.tx_bytes === last.tx_bytes ? same + 1 : 0;
    last = next;
  }
  return last;
}

/**
 * The end of an e2e suite, pass or fail: stops the panels and the agents (SIGKILL where SIGTERM has not
 * ended one within 5 s), removes the labs and drops the database. Returns what went wrong or was left behind.
 */
export async function endLab(parts: {
  panel?: LabPanel | undefined;
  /** More panels on the same database. */
  panels?: readonly (LabPanel | undefined)[];
  agents?: readonly (LabAgent | undefined)[];
  labs?: readonly (NetLab | undefined)[];
  database?: TestDatabase | undefined;
}): Promise<string[]> {
  const problems: string[] = [];
  for (const panel of [parts.panel, ...(parts.panels ?? [])]) {
    if (panel !== undefined && !(await panel.stop())) {
      problems.push('vpn-panel serve did not exit within 5 s of SIGTERM; killed');
    }
  }
  for (const agent of parts.agents ?? []) {
    if (agent !== undefined && !(await agent.stop())) {
      problems.push('vpn-panel node did not exit within 5 s of SIGTERM; killed');
    }
  }
  for (const lab of parts.labs ?? []) if (lab !== undefined) problems.push(...(await lab.cleanup()));
  await parts.database?.drop();
  return problems;
}
