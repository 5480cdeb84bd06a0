import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { availableParallelism, cpus, loadavg, release } from 'node:os';
import { fileURLToPath } from 'node:url';

const FILE = fileURLToPath(new URL('../docs/benchmarks.md', import.meta.url));
const HEADER =
  '# Benchmarks\n\n' +
  'Every figure here comes from a script in `bench/`, run on demand on this 2-core machine; ' +
  'each section names its command.\n';

/** Replaces the section `## title` of docs/benchmarks.md (or appends it), leaving the others alone. */
export function writeSection(title: string, body: string): void {
  const text = existsSync(FILE) ? readFileSync(FILE, 'utf8') : HEADER;
  const heading = `## ${title}`;
  const section = `${heading}\n\n${body.trim()}\n`;
  const start = text.indexOf(`${heading}\n`);
  if (start === -1) {
    writeFileSync(FILE, `${text.trimEnd()}\n\n${section}`);
    return;
  }
  const next = text.indexOf('\n## ', start + heading.length);
  writeFileSync(FILE, text.slice(0, start) + section + (next === -1 ? '' : text.slice(next)));
}

export function machine(): string {
  return (
    `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.versions.node}, ` +
    `${new Date().toISOString().slice(0, 10)}`
  );
}

/** Wall and CPU (user + system, this process) time of `work`. */
export async function timed(work: () => Promise<unknown>): Promise<{ wallMs: number; cpuMs: number }> {
  const cpu = process.cpuUsage();
  const start = performance.now();
  await work();
  const used = process.cpuUsage(cpu);
  return { wallMs: performance.now() - start, cpuMs: (used.user + used.system) / 1000 };
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/** The host as the data-plane benches name it: nproc, CPU model and kernel. */
export function host(): string {
  return `nproc ${availableParallelism()} (${cpus()[0]?.model ?? 'cpu'}), kernel ${release()}`;
}

/** The first line `cmd args` prints (a tool's version), or `?` when it cannot run. */
export function firstLine(cmd: string, args: readonly string[]): string {
  try {
    const out = execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    return out.split('\n')[0]?.trim() ?? '?';
  } catch {
    return '?';
  }
}

/** The load average over 1, 5 and 15 minutes: `0.52 / 0.61 / 0.40` (the machine is shared). */
export function loadAverage(): string {
  return loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ');
}

/** The load average over the last minute. */
export function load1(): string {
  return loadavg()[0]?.toFixed(2) ?? '?';
}

/** The `p`th percentile (0-100) of `values` by nearest rank: the smallest value with p % of them at or below it. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN;
}

/**
 * The memory settings scripts/start and the systemd units in deploy/ give the panel and the node
 * (docs/operating.md "Memory"): 2 MB semi-spaces of Node's young generation (it sizes them from the machine's
 * memory) and two glibc arenas.
 */
export const MEMORY_ENV = {
  NODE_OPTIONS: '--max-semi-space-size=2',
  MALLOC_ARENA_MAX: '2',
  MALLOC_TRIM_THRESHOLD_: '131072',
  MALLOC_MMAP_THRESHOLD_: '131072',
};

const CLOCK_TICKS_PER_S = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** CPU time (user and system) a process has used so far, in seconds: /proc/PID/stat's utime and stime. */
export function processCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_S;
}

/** A field of /proc/PID/status given in kB (VmRSS, VmHWM), in MB. */
export function procStatusMb(pid: number, field: string): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${field}:`));
  return Number(line?.replace(/\D+/g, '') ?? Number.NaN) / 1024;
}
