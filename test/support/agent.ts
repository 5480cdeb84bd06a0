import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../../bin/vpn-panel.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface AgentProcess {
  readonly child: ChildProcess;
  /** What `node agent ready` logged: the served certificate's SHA-256 (64 hex), or undefined with AGENT_TLS=off. */
  readonly certSha256: string | undefined;
  /** Everything the agent printed. */
  output(): string;
  /** The agent's JSON log lines so far. */
  lines(): Record<string, unknown>[];
  /** Sends `signal` (SIGTERM), then SIGKILL after `graceMs` (5 s); resolves when it exited, with whether in time. */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<boolean>;
}

/** A variable set to undefined is unset in the child (Node leaves undefined values out of its environment). */
type Env = Record<string, string | undefined>;

function jsonLines(text: string): Record<string, unknown>[] {
  return text.split('\n').flatMap((line): Record<string, unknown>[] => {
    try {
      return [JSON.parse(line)];
    } catch {
      return []; // not JSON, or the last line not printed whole yet
    }
  });
}

/**
 * Starts `vpn-panel node` with `env` (at LOG_LEVEL info unless told, so its ready line with the
 * certificate's fingerprint is printed; without metrics unless told, so agents of parallel tests never
 * share a port) and waits up to 20 s for that line.
 */
export async function startAgent(env: Env, track?: (child: ChildProcess) => void): Promise<AgentProcess> {
  const options = { env: { ...process.env, LOG_LEVEL: 'info', METRICS_PORT: '0', ...env }, cwd: ROOT };
  const child = spawn(process.execPath, [CLI, 'node'], { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
  track?.(child);
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const deadline = Date.now() + 20_000;
  let ready: Record<string, unknown> | undefined;
  while (ready === undefined) {
    if (child.exitCode !== null) throw new Error(`vpn-panel node exited with ${child.exitCode}:\n${output}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`vpn-panel node was not ready within 20 s:\n${output}`);
    }
    ready = jsonLines(output).find((line) => String(line.msg).startsWith('node agent ready'));
    if (ready === undefined) await new Promise((r) => setTimeout(r, 50));
  }
  const certSha256 = typeof ready.certSha256 === 'string' ? ready.certSha256 : undefined;
  return {
    child,
    certSha256,
    output: () => output,
    lines: () => jsonLines(output),
    async stop(signal = 'SIGTERM', graceMs = 5_000) {
      if (child.exitCode !== null || child.signalCode !== null) return true;
      const exited = once(child, 'exit');
      child.kill(signal);
      let late = false;
      const timer = setTimeout(() => {
        late = true;
        child.kill('SIGKILL');
      }, graceMs);
      await exited;
      clearTimeout(timer);
      return !late;
    },
  };
}
