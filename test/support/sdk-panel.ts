/**
 * The live panel the SDKs' tests (test/sdk) run against: started as the README starts it (dry-run node), with
 * webhooks allowed to this host's receivers, and two keys of every scope: one exempt from the rate limit (for
 * setting up) and one under it (10 a second, bursts of 60) for the retries.
 */
import { spawn } from 'node:child_process';
import { createTestDatabase, type TestDatabase } from './databases.ts';
import { type PanelProcess, startPanel } from './panel.ts';

export interface SdkPanel {
  readonly panel: PanelProcess;
  /** The API's base URL, `http://127.0.0.1:PORT/api/v1`, as an SDK takes it. */
  readonly baseUrl: string;
  /** Every scope, exempt from the rate limit. */
  readonly key: string;
  /** Every scope, under the rate limit. */
  readonly limitedKey: string;
  /** The environment an SDK's test process is given: VPN_PANEL_URL, VPN_PANEL_KEY, VPN_PANEL_LIMITED_KEY. */
  readonly env: Record<string, string>;
  stop(): Promise<void>;
}

export async function startSdkPanel(): Promise<SdkPanel> {
  const database: TestDatabase = await createTestDatabase('sqlite');
  const panel = await startPanel({ database, env: { WEBHOOK_ALLOW_PRIVATE: '1' } });
  const key = await panel.createKey('sdk-setup', 'all', ['--no-rate-limit']);
  const limitedKey = await panel.createKey('sdk-limited', 'all');
  const baseUrl = `${panel.url}/api/v1`;
  return {
    panel,
    baseUrl,
    key,
    limitedKey,
    env: { VPN_PANEL_URL: baseUrl, VPN_PANEL_KEY: key, VPN_PANEL_LIMITED_KEY: limitedKey },
    async stop() {
      await panel.stop();
      await database.drop();
    },
  };
}

/**
 * Runs an SDK's own test command (pytest, go test) against the live panel, its environment given; resolves with
 * its exit code and everything it printed. Killed after `timeoutMs`.
 */
export function runSdkTests(
  live: SdkPanel,
  command: string,
  args: readonly string[],
  cwd: string,
  timeoutMs = 90_000,
): Promise<{ code: number | null; output: string }> {
  const child = spawn(command, args, { cwd, env: { ...process.env, ...live.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve) => {
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/**
 * Why an SDK's toolchain cannot run its tests here (`what` is missing), as node:test's `skip` takes it; in CI
 * (CI=true) a missing toolchain is a failure instead.
 */
export function missingToolchain(what: string | undefined): string | undefined {
  if (what === undefined) return undefined;
  if (process.env.CI === 'true') throw new Error(`CI lacks ${what}`);
  return `no ${what} here`;
}
