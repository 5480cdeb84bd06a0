/**
 * Dependencies of the panel that the store chaos tests break on purpose: a PostgreSQL cluster and a Redis
 * of the test's own (the machine's shared ones serve every other test, so they are never stopped), and a
 * loop of API writes that records every answer.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { chownSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { TestDatabase } from './databases.ts';
import { FakeAgent } from './fake-agent.ts';
import { sleep, waitFor } from './netns.ts';
import {
  type ApiAnswer,
  callApi,
  callApiUnchecked,
  freePort,
  type PanelProcess,
  startPanel,
  type UncheckedAnswer,
} from './panel.ts';

function postgresBin(tool: string): string {
  const version = readdirSync('/usr/lib/postgresql').sort().at(-1);
  if (version === undefined) throw new Error('no PostgreSQL under /usr/lib/postgresql');
  return `/usr/lib/postgresql/${version}/bin/${tool}`;
}

/** A PostgreSQL cluster in a temp dir, run as the postgres user on a port of its own (trust auth). */
export class OwnPostgres {
  readonly port: number;
  readonly #dir: string;

  private constructor(dir: string, port: number) {
    this.#dir = dir;
    this.port = port;
  }

  static async start(): Promise<OwnPostgres> {
    const dir = mkdtempSync(join(tmpdir(), 'chaos-store-pg-'));
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }));
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }));
    chownSync(dir, uid, gid);
    const own = new OwnPostgres(dir, await freePort());
    own.#asPostgres(postgresBin('initdb'), ['-D', own.#data, '-U', 'postgres', '-A', 'trust', '--no-sync']);
    own.start();
    return own;
  }

  get #data(): string {
    return join(this.#dir, 'data');
  }

  #asPostgres(command: string, args: readonly string[]): void {
    execFileSync('runuser', ['-u', 'postgres', '--', command, ...args], { stdio: 'pipe', cwd: this.#dir });
  }

  #ctl(args: readonly string[]): void {
    this.#asPostgres(postgresBin('pg_ctl'), ['-D', this.#data, '-w', ...args]);
  }

  /** A database of its own in this cluster for a panel, with the DATA_DIR `dataDir`. */
  database(dataDir: string): TestDatabase {
    return {
      kind: 'postgres',
      dataDir,
      env: { DATA_DIR: dataDir, DATABASE_URL: `postgres://postgres@127.0.0.1:${this.port}/postgres` },
      drop: async () => rmSync(dataDir, { recursive: true, force: true }),
    };
  }

  start(): void {
    const options = `-p ${this.port} -k ${this.#dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
    this.#ctl(['-o', options, '-l', join(this.#dir, 'log'), 'start']);
  }

  /** `pg_ctl stop -m fast`: clients are disconnected, the server shuts down cleanly. */
  stop(): void {
    this.#ctl(['-m', 'fast', 'stop']);
  }

  restart(): void {
    this.stop();
    this.start();
  }

  /** Stops the cluster (immediately) if it runs and removes its files. */
  destroy(): void {
    try {
      this.#ctl(['-m', 'immediate', 'stop']);
    } catch {
      // not running
    }
    rmSync(this.#dir, { recursive: true, force: true });
  }
}

/** A redis-server of the test's own, without persistence, on a port of its own; killed by pid. */
export class OwnRedis {
  readonly port: number;
  #process: ChildProcess | undefined;

  private constructor(port: number) {
    this.port = port;
  }

  static async start(): Promise<OwnRedis> {
    const own = new OwnRedis(await freePort());
    await own.start();
    return own;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts it on its port and waits until it answers PING. */
  async start(): Promise<void> {
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
    this.#process = spawn('redis-server', args, { stdio: 'ignore' });
    await waitFor(
      `redis on port ${this.port}`,
      async () => {
        try {
          const out = execFileSync('redis-cli', ['-p', String(this.port), 'ping'], { encoding: 'utf8', stdio: 'pipe' });
          return out.trim() === 'PONG' ? true : undefined;
        } catch {
          return undefined;
        }
      },
      10_000,
      50,
    );
  }

  /** SIGKILL, as a crash; resolves once it has exited. */
  async kill(): Promise<void> {
    const child = this.#process;
    this.#process = undefined;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }
}

/** Panels, the server they put devices on, and an all-scopes key exempt from rate limits. */
export interface PanelPair {
  readonly panels: readonly PanelProcess[];
  readonly agent: FakeAgent;
  readonly key: string;
  readonly serverId: number;
  stop(): Promise<void>;
}

/**
 * A panel on each database given (several sharing one PostgreSQL, each its own DATA_DIR), set up as
 * docs/operating.md "Several panels" says: the same secret, LOCAL_NODE=off and one node (a FakeAgent) with
 * one server on it.
 */
export async function startPanelPair(
  databases: readonly TestDatabase[],
  env: Record<string, string> = {},
): Promise<PanelPair> {
  const agent = new FakeAgent();
  await agent.start();
  const shared = { LOCAL_NODE: 'off', PANEL_SECRET: randomBytes(32).toString('base64'), ...env };
  const panels: PanelProcess[] = [];
  const stop = async () => {
    for (const panel of panels) await panel.stop();
    await agent.stop();
  };
  try {
    for (const database of databases) panels.push(await startPanel({ database, env: shared }));
    const [first] = panels;
    if (first === undefined) throw new Error('no panel');
    const added = await first.cli(['nodes', 'add', '--name', 'fake', '--url', agent.url, '--token', agent.token]);
    if (added.code !== 0) throw new Error(`nodes add: ${added.stderr}`);
    const key = await first.createKey('chaos', 'all', ['--no-rate-limit']);
    const nodes = (await callApi(first.url, key, 'GET', '/nodes')).expect(200).data;
    const nodeId = nodes.find((n) => n.name === 'fake')?.id;
    const server = (await callApi(first.url, key, 'POST', '/servers', { name: 'chaos', node_id: nodeId })).expect(201);
    return { panels, agent, key, serverId: server.id, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** One answer of a loop of requests: when it was sent, and what came back (undefined status: no answer). */
export interface Answered {
  readonly at: number;
  readonly method: string;
  readonly path: string;
  readonly status: number | undefined;
  readonly answer: UncheckedAnswer | undefined;
}

/** Sends one request and records it; a refused connection is recorded without a status. */
export async function record(
  log: Answered[],
  base: string,
  key: string,
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<UncheckedAnswer | undefined> {
  const at = Date.now();
  try {
    const answer = await callApiUnchecked(base, key, method, path, body);
    log.push({ at, method, path, status: answer.status, answer });
    return answer;
  } catch {
    log.push({ at, method, path, status: undefined, answer: undefined });
    return undefined;
  }
}

/** The answers with a 5xx other than a 503 with the error body: what no outage may give. */
export function forbiddenServerErrors(log: readonly Answered[]): string[] {
  return log
    .filter((a) => a.status !== undefined && a.status >= 500)
    .filter((a) => a.status !== 503 || a.answer?.error === undefined)
    .map((a) => `${a.method} ${a.path}: ${a.status} ${JSON.stringify(a.answer?.json)}`);
}

/**
 * What a write loop knows the panels acknowledged: for each device it made and did not see deleted, the
 * names it may have (the last acknowledged one, and any later rename that got no 2xx, which may have
 * committed all the same); the devices whose delete was acknowledged; those whose delete got no 2xx.
 */
export interface Acknowledged {
  readonly live: Map<number, string[]>;
  readonly deleted: Set<number>;
  readonly maybeDeleted: Set<number>;
}

/**
 * Creates, renames and deletes devices through `bases` in turn until `stop()` returns true, recording
 * every answer in `log` and every acknowledged (2xx) write in the result.
 */
export async function writeLoop(
  bases: readonly string[],
  key: string,
  serverId: number,
  stop: () => boolean,
  log: Answered[],
): Promise<Acknowledged> {
  const acked: Acknowledged = { live: new Map(), deleted: new Set(), maybeDeleted: new Set() };
  for (let i = 0; !stop(); i++) {
    const base = bases[i % bases.length] ?? '';
    const created = await record(log, base, key, 'POST', '/devices', { server_id: serverId, name: `w-${i}` });
    const id = idOf(created);
    if (id !== undefined) acked.live.set(id, [`w-${i}`]);
    const ids = [...acked.live.keys()];
    const target = ids[i % Math.max(1, ids.length)];
    const names = target === undefined ? undefined : acked.live.get(target);
    if (target !== undefined && names !== undefined && i % 3 === 1) {
      const renamed = await record(log, base, key, 'PATCH', `/devices/${target}`, { name: `r-${i}` });
      acked.live.set(target, renamed?.status === 200 ? [`r-${i}`] : [...names, `r-${i}`]);
    }
    if (target !== undefined && i % 3 === 2) {
      const removed = await record(log, base, key, 'DELETE', `/devices/${target}`);
      acked.live.delete(target);
      (removed?.status === 204 ? acked.deleted : acked.maybeDeleted).add(target);
    }
    // A refused write is tried again by the next round; no point spinning on a panel that refuses at once.
    if (created === undefined || created.status >= 500) await sleep(100);
  }
  return acked;
}

/** What of `acked` the panel at `base` has lost, as lines naming each device; empty when nothing. */
export async function lostWrites(base: string, key: string, acked: Acknowledged): Promise<string[]> {
  const lost: string[] = [];
  for (const [id, names] of acked.live) {
    const read = await callApiUnchecked(base, key, 'GET', `/devices/${id}`);
    const json = read.json;
    const name = typeof json === 'object' && json !== null && 'name' in json ? json.name : undefined;
    if (read.status !== 200 || typeof name !== 'string' || !names.includes(name))
      lost.push(`device ${id}: ${read.status} ${String(name)}, acknowledged as ${names.join(' or ')}`);
  }
  for (const id of acked.deleted) {
    const read = await callApiUnchecked(base, key, 'GET', `/devices/${id}`);
    if (read.status !== 404) lost.push(`device ${id}: deleted but answers ${read.status}`);
  }
  return lost;
}

function idOf(answer: UncheckedAnswer | ApiAnswer<unknown> | undefined): number | undefined {
  if (answer?.status !== 201) return undefined;
  const json = answer.json;
  if (typeof json !== 'object' || json === null || !('id' in json) || typeof json.id !== 'number') return undefined;
  return json.id;
}
