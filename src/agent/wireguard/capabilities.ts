/** Whether this host and process can run the wireguard driver, and with which WireGuard. */
import type { CommandRunner } from '../commands.ts';

export type WireGuardImplementation = 'kernel' | 'wireguard-go';

export type WireGuardCheck = { ok: true; implementation: WireGuardImplementation } | { ok: false; reason: string };

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
  const implementation = await detectImplementation(runner);
  if (implementation === null) {
    return { ok: false, reason: 'no kernel WireGuard module and no `wireguard-go` (install wireguard-go)' };
  }
  return { ok: true, implementation };
}

/** The kernel module when it is loaded or loads, else wireguard-go when installed, else null. */
export async function detectImplementation(runner: CommandRunner): Promise<WireGuardImplementation | null> {
  const ok = (cmd: string, args: readonly string[]): Promise<boolean> =>
    runner.run(cmd, args).then(
      () => true,
      () => false,
    );
  if ((await ok('test', ['-d', '/sys/module/wireguard'])) || (await ok('modprobe', ['-q', 'wireguard']))) {
    return 'kernel';
  }
  return (await ok('wireguard-go', ['--version'])) ? 'wireguard-go' : null;
}
