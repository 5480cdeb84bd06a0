/**
 * The node's WireGuard driver against a RecordingRunner, as the agent tests script it: server 1 of name prefix
 * `vp` (interface vp1, namespace vp-s1) on a node whose host namespace is `hh`.
 */
import { RecordingRunner } from '../../src/agent/commands.ts';
import { WireGuardDriver } from '../../src/agent/wireguard/driver.ts';

/** The driver on `runner`, reaching wireguard-go through `wg` (the recorded commands; UAPI has no commands). */
export function driverOn(runner: RecordingRunner): WireGuardDriver {
  return new WireGuardDriver({
    runner,
    namePrefix: 'vp',
    hostNetns: 'hh',
    implementation: 'wireguard-go',
    wireguardGoConfig: 'wg',
  });
}

/** A host with nothing of server 1 on it. */
export function emptyHost(): RecordingRunner {
  return new RecordingRunner()
    .on('ip netns list', { stdout: 'hh\n' })
    .on('wg show vp1 dump', { exitCode: 1, stderr: 'Unable to access interface: No such file or directory' })
    .on(/nft list table inet /, { exitCode: 1, stderr: 'Error: No such file or directory' })
    .on(/sysctl -n/, { stdout: '0\n' });
}

/** A driver's read of the host, after the optional `[namespace] ` prefix of a recorded line. */
const HOST_READ = new RegExp(
  /^(\[[^\]]+\] )?/.source +
    /(ip netns list|ip (-n \S+ )?-j |wg show |nft list |sysctl -n |tc -n \S+ (qdisc|class) show |test -d )/.source,
);

/** Whether a recorded command line changes the host (the driver's reads are not). */
export const isChange = (line: string): boolean => !HOST_READ.test(line);

/**
 * Server 1's speed-limit table of `family` as `nft list table` prints it: its map's `elements` as nft lists them
 * ('' for none), and the forward chain's rules (ours unless given).
 */
export function listedShapingTable(family: 'ip' | 'ip6', elements: string, forward?: readonly string[]): string {
  const ours = [
    `oifname "vp1" meta priority set ${family} daddr map @limited`,
    `oifname "vp1s" meta priority set ${family} saddr map @limited`,
  ];
  return [
    `table ${family} vpnpanel_shape {`,
    '\tmap limited {',
    `\t\ttype ${family === 'ip' ? 'ipv4' : 'ipv6'}_addr : classid`,
    ...(elements === '' ? [] : [`\t\telements = { ${elements} }`]),
    '\t}',
    '',
    '\tchain forward {',
    '\t\ttype filter hook forward priority filter; policy accept;',
    ...(forward ?? ours).map((rule) => `\t\t${rule}`),
    '\t}',
    '',
    '\tchain output {',
    '\t\ttype filter hook output priority filter; policy accept;',
    `\t\toifname "vp1" meta priority set ${family} daddr map @limited`,
    '\t}',
    '}',
    '',
  ].join('\n');
}
