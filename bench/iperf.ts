/**
 * Throughput with its CPU, for the data-plane benches (bench/dataplane.ts, bench/speed-at-scale.ts): one iperf3 run
 * (TCP, JSON report) with the goodput the receiver counted and each end's own CPU as iperf3 reports it, the CPU time
 * of given processes (a tunnel's daemons) over the run from /proc, and the whole machine's busy CPU from /proc/stat
 * (shared with whatever else runs: a context figure, not a per-tunnel one).
 */
import { spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { belongsTo, type NetLab, run, waitFor } from '../test/support/netns.ts';
import { percentile, processCpuSeconds } from './report.ts';

/** Where amneziawg-go keeps its UAPI sockets (wireguard-go's are under /var/run/wireguard). */
export const AWG_SOCKET_DIR = '/var/run/amneziawg';

export type Direction = 'upload' | 'download';
export const DIRECTIONS: readonly Direction[] = ['upload', 'download'];

export interface Throughput {
  /** TCP goodput the receiving end counted, Mbit/s. */
  mbps: number;
  /** iperf3's own CPU (user + system, all threads) on the client and the server end, in cores (1 = one core busy). */
  clientIperfCores: number;
  serverIperfCores: number;
  /** CPU of each process in `watch` over the run, in cores, in its order. */
  watched: number[];
  /** The machine's busy CPU over the run (every process and kernel thread), in cores. */
  machineCores: number;
}

/** A value at `path` in parsed JSON, or undefined. */
function at(value: unknown, ...path: string[]): unknown {
  let here = value;
  for (const key of path) {
    if (typeof here !== 'object' || here === null) return undefined;
    here = Object.entries(here).find(([k]) => k === key)?.[1];
  }
  return here;
}

function numberAt(json: unknown, ...path: string[]): number {
  const value = at(json, ...path);
  if (typeof value !== 'number') throw new Error(`no ${path.join('.')} in iperf3's report`);
  return value;
}

/** Busy and total jiffies of the whole machine so far (/proc/stat's first line; idle and iowait are not busy). */
function machineJiffies(): { busy: number; total: number } {
  const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1, 9).map(Number);
  const total = fields.reduce((a, b) => a + b, 0);
  return { busy: total - (fields[3] ?? 0) - (fields[4] ?? 0), total };
}

/** Cores the machine has, as /proc/stat counts them (cpuN lines). */
const CORES = readFileSync('/proc/stat', 'utf8')
  .split('\n')
  .filter((l) => /^cpu\d/.test(l)).length;

/**
 * One iperf3 run from namespace `netns` to `ip`:`port` (download = `-R`), `seconds` long, at most `bitrate`
 * (iperf3's `-b`) when given; `watch`: pids whose CPU over the run is reported.
 */
export async function iperf(
  netns: string,
  ip: string,
  port: number,
  direction: Direction,
  seconds: number,
  watch: readonly number[] = [],
): Promise<Throughput> {
  const args = ['netns', 'exec', netns, 'iperf3', '-c', ip, '-p', String(port), '-t', String(seconds), '-J'];
  if (direction === 'download') args.push('-R');
  args.push('--connect-timeout', '3000');
  const cpuBefore = watch.map(processCpuSeconds);
  const machineBefore = machineJiffies();
  const start = performance.now();
  const json: unknown = JSON.parse(await run('ip', args));
  const wallS = (performance.now() - start) / 1000;
  const machineAfter = machineJiffies();
  const busyShare = (machineAfter.busy - machineBefore.busy) / (machineAfter.total - machineBefore.total);
  const cpu = ['end', 'cpu_utilization_percent'];
  return {
    mbps: numberAt(json, 'end', 'sum_received', 'bits_per_second') / 1e6,
    clientIperfCores: numberAt(json, ...cpu, 'host_total') / 100,
    serverIperfCores: numberAt(json, ...cpu, 'remote_total') / 100,
    watched: watch.map((pid, i) => (processCpuSeconds(pid) - (cpuBefore[i] ?? 0)) / wallS),
    machineCores: busyShare * CORES,
  };
}

/** Starts `iperf3 -s` in `netns` on `port` (every address), ended at the lab's cleanup; resolves once it listens. */
export async function startIperfServerIn(lab: NetLab, netns: string, port: number): Promise<void> {
  const server = spawn('ip', ['netns', 'exec', netns, 'iperf3', '-s', '--forceflush', '-p', String(port)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  lab.track(server);
  let output = '';
  server.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  server.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  await waitFor('iperf3 -s to listen', async () => (output.includes('Server listening') ? true : undefined), 5000, 50);
}

/** The median of `values`, by nearest rank. */
export const medianOf = (values: readonly number[]): number => percentile(values, 50);

/** `412` / `1,234` / `15,900` Mbit/s as written in the tables. */
export const mbit = (value: number): string => Math.round(value).toLocaleString('en');

/** `0.43` cores. */
export const cores = (value: number): string => value.toFixed(2);

/**
 * `dp` and two more letters that no namespace or socket of this host starts with: the name prefix of the data-plane
 * benches' labs (and of the driver's servers in them), theirs alone.
 */
export async function dpPrefix(): Promise<string> {
  const sockets = ['/var/run/wireguard', AWG_SOCKET_DIR].flatMap((dir) =>
    existsSync(dir) ? readdirSync(dir).map((file) => file.replace(/\.sock$/, '')) : [],
  );
  const namespaces = (await run('ip', ['netns', 'list'])).split('\n').map((l) => l.split(' ')[0] ?? '');
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  for (let i = 0; i < 100; i++) {
    const prefix = `dp${letters[randomInt(26)]}${letters[randomInt(26)]}`;
    if (![...namespaces, ...sockets].some((name) => belongsTo(prefix, name))) return prefix;
  }
  throw new Error('no unused dp prefix');
}
