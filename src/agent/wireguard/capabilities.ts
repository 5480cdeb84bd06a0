/** Whether this host and process can run the wireguard driver, with which WireGuard, and whether AmneziaWG too. */
import type { CommandRunner } from '../commands.ts';

export type WireGuardImplementation = 'kernel' | 'wireguard-go';

/** A userspace daemon found on PATH: where, and the version its `--version` names. */
export interface UserspaceTool {
  path: string;
  version: string;
}

export type WireGuardCheck =
  | {
      ok: true;
      implementation: WireGuardImplementation;
      /** null when not installed (the kernel module runs WireGuard servers then). */
      wireguardGo: UserspaceTool | null;
      /** null when not installed: the node runs no AmneziaWG servers. */
      amneziawgGo: UserspaceTool | null;
    }
  | { ok: false; reason: string };

/** Debian's wireguard-go package (v0.0.20220316 on Debian 12): older than scripts/go-tools.sh's pin. */
const DEBIAN_WIREGUARD_GO = '/usr/bin/wireguard-go';

/** Bits in CapEff: CAP_NET_ADMIN for links, addresses and nft; CAP_SYS_ADMIN for the mounts of `ip netns add`. */
const CAPABILITY_BITS = { CAP_NET_ADMIN: 12n, CAP_SYS_ADMIN: 21n } as const;

/**
 * Whether this process can run the wireguard driver. The capabilities are read from a child the
 * runner starts, because the driver's commands run as children too (a capability that is not
 * ambient would not reach them).
 */
export async function canRunWireGuard(runner: CommandRunner): Promise<WireGuardCheck> {
  const status = await runner.run('cat', ['/proc/self/status']).catch(() => null);
  const capEff = /^CapEff:\s*([0-9a-f]+)$/im.exec(status?.stdout ?? '')?.[1];
  if (capEff === undefined) return { ok: false, reason: 'cannot read the process capabilities (/proc/self/status)' };
  const caps = BigInt(`0x${capEff}`);
  const missing = (['CAP_NET_ADMIN', 'CAP_SYS_ADMIN'] as const).filter(
    (name) => ((caps >> CAPABILITY_BITS[name]) & 1n) === 0n,
  );
  if (missing.length > 0) {
    return { ok: false, reason: `needs root or ${missing.join(' and ')} (commands the agent runs lack them)` };
  }
  const tools = [
    ['ip', '-V', 'iproute2'],
    ['wg', '--version', 'wireguard-tools'],
    ['nft', '--version', 'nftables'],
    ['sysctl', '--version', 'procps'],
  ] as const;
  for (const [tool, flag, pkg] of tools) {
    const found = await runner.run(tool, [flag]).then(
      () => true,
      () => false,
    );
    if (!found) return { ok: false, reason: `\`${tool}\` not found (install ${pkg})` };
  }
  const [kernel, wireguardGo, amneziawgGo] = await Promise.all([
    hasKernelModule(runner),
    findTool(runner, 'wireguard-go'),
    findTool(runner, 'amneziawg-go'),
  ]);
  const implementation = kernel ? 'kernel' : wireguardGo === null ? null : 'wireguard-go';
  if (implementation === null) {
    return { ok: false, reason: 'no kernel WireGuard module and no `wireguard-go` (install wireguard-go)' };
  }
  return { ok: true, implementation, wireguardGo, amneziawgGo };
}

/**
 * The node's one line at start on what runs its servers, e.g. "WireGuard: kernel module; wireguard-go
 * v0.0.20250522 (/usr/local/bin/wireguard-go); AmneziaWG: amneziawg-go 0.0.20250522 (/usr/local/bin/amneziawg-go)".
 */
export function describeDataplane(check: Extract<WireGuardCheck, { ok: true }>): string {
  const { implementation, wireguardGo, amneziawgGo } = check;
  const tool = (name: string, found: UserspaceTool): string => `${name} ${found.version} (${found.path})`;
  let userspace = 'no wireguard-go';
  if (wireguardGo !== null) {
    userspace = tool('wireguard-go', wireguardGo);
    if (wireguardGo.path === DEBIAN_WIREGUARD_GO) {
      userspace += ": Debian's older one, without the current one's offloads (bash scripts/go-tools.sh installs it)";
    }
  }
  const wireguard = implementation === 'kernel' ? `kernel module; ${userspace}` : userspace;
  const amneziawg =
    amneziawgGo === null
      ? 'not available (amneziawg-go not found: bash scripts/go-tools.sh builds it)'
      : tool('amneziawg-go', amneziawgGo);
  return `WireGuard: ${wireguard}; AmneziaWG: ${amneziawg}`;
}

/** `binary` on PATH when its `--version` runs: its path and the version it names; null when it does not run. */
export async function findTool(runner: CommandRunner, binary: string): Promise<UserspaceTool | null> {
  const printed = await runner.run(binary, ['--version']).catch(() => null);
  if (printed === null) return null;
  const path = await runner.run('sh', ['-c', 'command -v "$1"', 'sh', binary]).catch(() => null);
  // "wireguard-go v0.0.20250522" or "amneziawg-go 0.0.20250522" on the first line.
  const version = /^\S+\s+(\S+)/.exec(printed.stdout)?.[1] ?? 'of unknown version';
  return { path: path?.stdout.trim() || binary, version };
}

async function hasKernelModule(runner: CommandRunner): Promise<boolean> {
  const ok = (cmd: string, args: readonly string[]): Promise<boolean> =>
    runner.run(cmd, args).then(
      () => true,
      () => false,
    );
  return (await ok('test', ['-d', '/sys/module/wireguard'])) || (await ok('modprobe', ['-q', 'wireguard']));
}

/** The kernel module when it is loaded or loads, else wireguard-go when installed, else null. */
export async function detectImplementation(runner: CommandRunner): Promise<WireGuardImplementation | null> {
  if (await hasKernelModule(runner)) return 'kernel';
  return (await findTool(runner, 'wireguard-go')) === null ? null : 'wireguard-go';
}
