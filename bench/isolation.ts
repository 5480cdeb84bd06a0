/**
 * What client isolation costs a tunnel's throughput (docs/dataplane.md, "Client isolation"): one server
 * made by the wireguard driver (wireguard-go), one real client (wireguard-go in its own namespace), and
 * iperf3 beyond the host namespace's uplink (the lab's internet namespace), TCP, download and upload.
 * Rounds alternate "with the isolation rules" (as `up()` loads them) and "without" (both tables
 * deleted, the NAT alone), in a rotated order, since the 2 cores are shared and one run of iperf3
 * varies by ±20 % under load; medians and their ratio are reported.
 *
 * Run as root: node bench/isolation.ts   (IPERF_SECONDS and ROUNDS may be set)
 * Writes the section "## Client isolation (wireguard-go)" of docs/benchmarks.md.
 */
import { ExecRunner } from '../src/agent/commands.ts';
import type { ServerSpec } from '../src/agent/driver.ts';
import { SERVER_ISOLATION_TABLE } from '../src/agent/isolation.ts';
import { WireGuardDriver } from '../src/agent/wireguard/driver.ts';
import { generateKeyPair, publicKeyOf } from '../src/domain/wireguard-keys.ts';
import { CHILD_LOG_DIR, NetLab, requireRoot, run } from '../test/support/netns.ts';
import { firstLine, host, loadAverage, writeSection } from './report.ts';

const IPERF_SECONDS = Number(process.env.IPERF_SECONDS ?? 4);
const ROUNDS = Number(process.env.ROUNDS ?? 6);
const SECTION = 'Client isolation (wireguard-go)';
/** TEST-NET-2, on the internet namespace's loopback, reached from the client only through the tunnel. */
const INTERNET_IP = '198.51.100.1';
const IPERF_PORT = 5201;

type Variant = 'with' | 'without';

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;
}

async function main(): Promise<void> {
  const skip = requireRoot([['iperf3', 'iperf3']]);
  if (skip !== false) throw new Error(skip);
  const loadAtStart = loadAverage();
  const lab = await NetLab.create();
  const runner = new ExecRunner(CHILD_LOG_DIR);
  const { prefix: namePrefix, hostNs: hostNetns } = lab;
  const driver = new WireGuardDriver({ runner, namePrefix, hostNetns, implementation: 'wireguard-go' });
  const privateKey = generateKeyPair().privateKey;
  const server: ServerSpec = { serverId: 1, privateKey, listenPort: 51820, address: '10.97.0.1/24', mtu: 1420 };
  const client = generateKeyPair();
  const n = driver.names(server.serverId);
  try {
    await driver.up(server);
    const peer = { publicKey: client.publicKey, allowedIp: '10.97.0.2/32', speedLimitKbps: 0 };
    await driver.setPeers(server.serverId, [peer]);
    await lab.startIperfServer(INTERNET_IP, IPERF_PORT);
    const wg = await lab.connectClient({
      serverPublicKey: publicKeyOf(server.privateKey),
      endpoint: lab.hostIp,
      port: server.listenPort,
      privateKey: client.privateKey,
      address: '10.97.0.2/24',
      allowedIps: ['10.97.0.0/24', `${INTERNET_IP}/32`],
    });
    await run('ip', ['-n', lab.clientNs, 'route', 'add', `${INTERNET_IP}/32`, 'dev', wg.iface]);
    if (!(await lab.waitForPing(INTERNET_IP))) throw new Error(`the client does not reach ${INTERNET_IP}`);

    const setVariant = async (variant: Variant): Promise<void> => {
      if (variant === 'with') await driver.up(server);
      else {
        // Already gone when the previous measurement was "without" too (the order alternates per round); checked below.
        const drop = (netns: string, table: string): Promise<unknown> =>
          run('ip', ['netns', 'exec', netns, 'nft', 'delete', 'table', 'inet', table]).catch(() => undefined);
        await drop(n.netns, SERVER_ISOLATION_TABLE);
        await drop(lab.hostNs, n.isolationTable);
      }
      const problems = await driver.isolationProblems(server);
      const expected = variant === 'with' ? 0 : 2;
      if (problems.length !== expected) {
        throw new Error(`${variant} the rules, yet: ${problems.join('; ') || 'none missing'}`);
      }
    };
    const samples = new Map<Variant, [number, number][]>([
      ['with', []],
      ['without', []],
    ]);
    for (let round = 0; round < ROUNDS; round++) {
      const order: Variant[] = round % 2 === 0 ? ['with', 'without'] : ['without', 'with'];
      for (const variant of order) {
        await setVariant(variant);
        const down = await lab.iperf(INTERNET_IP, IPERF_PORT, 'download', IPERF_SECONDS);
        const up = await lab.iperf(INTERNET_IP, IPERF_PORT, 'upload', IPERF_SECONDS);
        console.log(`round ${round + 1}, ${variant} the rules: down ${down.toFixed(1)} / up ${up.toFixed(1)} Mbit/s`);
        samples.get(variant)?.push([down, up]);
      }
    }
    await setVariant('with');
    await wg.close();

    const median = (variant: Variant, d: 0 | 1): number =>
      percentile(
        (samples.get(variant) ?? []).map((x) => x[d]),
        0.5,
      );
    const range = (variant: Variant, d: 0 | 1): string => {
      const values = (samples.get(variant) ?? []).map((x) => x[d]);
      return `${Math.min(...values).toFixed(0)}-${Math.max(...values).toFixed(0)}`;
    };
    const line = (label: string, d: 0 | 1): string => {
      const [withRules, without] = [median('with', d), median('without', d)];
      const cells = [`${withRules.toFixed(1)} (${range('with', d)})`, `${without.toFixed(1)} (${range('without', d)})`];
      return `| ${label} | ${cells.join(' | ')} | ${(withRules / without).toFixed(2)} |`;
    };
    const body = [
      `Command: \`node bench/isolation.ts\` (as root; \`IPERF_SECONDS=${IPERF_SECONDS} ROUNDS=${ROUNDS}\`). ` +
        `Machine: ${host()}, ` +
        `${firstLine('wireguard-go', ['--version'])}, ${firstLine('nft', ['--version'])}, ` +
        `${firstLine('iperf3', ['--version'])}, Node ${process.versions.node}, ` +
        `${new Date().toISOString().slice(0, 10)}.`,
      '',
      `Load average (1/5/15 min) at the start: ${loadAtStart}; at the end: ${loadAverage()} (the machine is shared).`,
      '',
      "One real client (wireguard-go in its own namespace) through one server's tunnel and both NATs to iperf3 " +
        `beyond the host's uplink, TCP, ${IPERF_SECONDS} s each way, Mbit/s as the receiver counted them. ` +
        '"With": the two isolation tables as `up()` loads them (forward chain with the blocked interval sets, ' +
        `input chains); "without": both tables deleted. ${ROUNDS} rounds alternating the order, median (min-max):`,
      '',
      '| direction | with the rules | without | with / without |',
      '|---|---|---|---|',
      line('download (to the client)', 0),
      line('upload (from the client)', 1),
      '',
      'A ratio within the spread of the runs of one variant is noise: the rules cost no measurable throughput.',
    ].join('\n');
    writeSection(SECTION, body);
    console.log(body);
  } finally {
    await driver.down(server.serverId).catch(() => undefined);
    await driver.close();
    const problems = await lab.cleanup();
    if (problems.length > 0) console.error(`cleanup: ${problems.join('; ')}`);
  }
}

await main();
