import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../test/support/panel.ts';

const CLI = fileURLToPath(new URL('../bin/vpn-panel.js', import.meta.url));
/** How long a panel may take to answer /healthz, or to exit on SIGTERM before it is killed. */
const START_MS = 60_000;
const EXIT_MS = 30_000;

/**
 * A bench's `vpn-panel serve`, run as an operator runs it: SQLite in a temp DATA_DIR, the dry-run
 * driver, LOG_LEVEL=warn, on 127.0.0.1 and a free port, its output on the bench's. It can be stopped
 * and started again on the same data.
 */
export class BenchPanel {
  readonly dataDir: string;
  readonly env: NodeJS.ProcessEnv;
  readonly #cli: string;
  #child: ChildProcess | undefined;
  #base: string | undefined;

  /** `env` goes over the bench's own environment and the defaults; `cli` is a checkout's `bin/vpn-panel.js`. */
  constructor(name: string, env: NodeJS.ProcessEnv = {}, cli = CLI) {
    this.dataDir = mkdtempSync(join(tmpdir(), `vpn-panel-bench-${name}-`));
    this.env = {
      ...process.env,
      DATA_DIR: this.dataDir,
      NODE_DRIVER: 'dry-run',
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
      PUBLIC_HOST: '192.0.2.1',
      ...env,
    };
    this.#cli = cli;
  }

  /** A key made by `vpn-panel keys create --no-rate-limit`, as an operator would; names are unique among live keys. */
  createKey(scopes = 'all', name = 'bench'): string {
    const args = [this.#cli, 'keys', 'create', '--name', name, '--scopes', scopes, '--no-rate-limit'];
    const key = execFileSync(process.execPath, args, { env: this.env, encoding: 'utf8' }).trim().split('\n').at(-1);
    if (key === undefined) throw new Error('keys create printed no key');
    return key;
  }

  /** `http://127.0.0.1:PORT` of the running panel. */
  get base(): string {
    if (this.#base === undefined) throw new Error('the panel is not running');
    return this.#base;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /**
   * Starts `serve` and waits for /healthz. With CPU_PROF_DIR set, the process writes
   * `<profileName>.cpuprofile` there when it exits.
   */
  async start(profileName = 'panel'): Promise<void> {
    const port = await freePort();
    const dir = process.env.CPU_PROF_DIR;
    const profile =
      dir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${dir}`, `--cpu-prof-name=${profileName}.cpuprofile`];
    const env = { ...this.env, PORT: String(port) };
    const child = spawn(process.execPath, [...profile, this.#cli, 'serve'], { env, stdio: 'inherit' });
    this.#child = child;
    const base = `http://127.0.0.1:${port}`;
    await answers(`${base}/healthz`, child);
    this.#base = base;
  }

  /** SIGTERM, and SIGKILL after 30 s; resolves when it exited. */
  async stop(): Promise<void> {
    const child = this.#child;
    this.#child = undefined;
    this.#base = undefined;
    if (child !== undefined) await stop(child);
  }

  /** Stops the panel and removes its data. */
  async remove(): Promise<void> {
    await this.stop();
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/** Waits up to 60 s for `url` to answer 2xx; fails at once when `child`, which should answer it, exits. */
export async function answers(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + START_MS;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${url}: its process exited (${child.exitCode ?? child.signalCode})`);
    }
    if (
      await fetch(url).then(
        (r) => r.ok,
        () => false,
      )
    )
      return;
    if (Date.now() > deadline) throw new Error(`${url} did not answer within ${START_MS / 1000} s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Ends a child of the bench: SIGTERM, and SIGKILL after 30 s; resolves when it exited. */
export function stop(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill('SIGKILL'), EXIT_MS);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
