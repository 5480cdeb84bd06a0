/**
 * A server's way out: a veth pair from its namespace to the host namespace (a /30 each, names.ts), the
 * server namespace's default route through it, IPv4 forwarding, and NAT on both sides: clients leave
 * their namespace as the veth's address, and the host as its uplink's address.
 */
import type { Step } from './failures.ts';
import { ipIn, type Link, type Snapshot } from './host-readers.ts';
import type { Names } from './names.ts';

/** nft table of a server's own namespace (one per namespace, so a fixed name; `ip6` beside `ip` for NAT66). */
export const SERVER_NFT_TABLE = 'vpnpanel';

/** Adds what is missing of the uplink; true when it made the veth. */
export async function ensureUplink(
  n: Names,
  snap: Snapshot,
  hostNetns: string | undefined,
  run: Step,
): Promise<boolean> {
  const absent: Link = { up: false, mtu: 0, addrs: [], addrs6: [] };
  const hostIp = ipIn(hostNetns);
  if (!(snap.serverLinks.get('lo')?.up ?? false)) await run('ip', ['-n', n.netns, 'link', 'set', 'lo', 'up']);
  let vethServer = snap.serverLinks.get(n.vethServer);
  let vethHost = snap.hostLinks.get(n.vethHost);
  const vethMissing = vethServer === undefined || vethHost === undefined;
  if (vethMissing) {
    // Deleting either end of a veth deletes both: only a half-moved pair leaves one behind.
    if (vethServer !== undefined) await run('ip', ['-n', n.netns, 'link', 'del', n.vethServer]);
    if (vethHost !== undefined) await run('ip', [...hostIp, 'link', 'del', n.vethHost]);
    const pair = [n.vethHost, 'type', 'veth', 'peer', 'name', n.vethServer, 'netns', n.netns];
    const made = await run('ip', [...hostIp, 'link', 'add', ...pair]);
    vethServer = made ? absent : undefined;
    vethHost = made ? absent : undefined;
  }
  if (vethHost !== undefined) {
    if (!vethHost.addrs.includes(`${n.hostIp}/30`)) {
      await run('ip', [...hostIp, 'addr', 'add', `${n.hostIp}/30`, 'dev', n.vethHost]);
    }
    if (!vethHost.up) await run('ip', [...hostIp, 'link', 'set', n.vethHost, 'up']);
  }
  if (vethServer !== undefined) {
    if (!vethServer.addrs.includes(`${n.serverIp}/30`)) {
      await run('ip', ['-n', n.netns, 'addr', 'add', `${n.serverIp}/30`, 'dev', n.vethServer]);
    }
    if (!vethServer.up) await run('ip', ['-n', n.netns, 'link', 'set', n.vethServer, 'up']);
    if (snap.defaultRoute !== `${n.hostIp} ${n.vethServer}`) {
      await run('ip', ['-n', n.netns, 'route', 'replace', 'default', 'via', n.hostIp, 'dev', n.vethServer]);
    }
  }
  if (!snap.serverForwarding) await run('sysctl', ['-w', 'net.ipv4.ip_forward=1'], { netns: n.netns });
  if (!snap.hostForwarding) await run('sysctl', ['-w', 'net.ipv4.ip_forward=1'], { netns: hostNetns });
  if (!snap.serverTables.has(`ip ${SERVER_NFT_TABLE}`)) {
    const input = natTableScript('ip', SERVER_NFT_TABLE, `oifname "${n.vethServer}" masquerade`);
    await run('nft', ['-f', '-'], { netns: n.netns, input });
  }
  if (!snap.hostTables.has(`ip ${n.hostTable}`)) {
    const input = natTableScript('ip', n.hostTable, `ip saddr ${n.serverIp} oifname != "${n.vethHost}" masquerade`);
    await run('nft', ['-f', '-'], { netns: hostNetns, input });
  }
  return vethMissing;
}

/**
 * How the uplink differs from what ensureUplink makes, one line each (the drift check), from the
 * server namespace's links and both namespaces' nft tables.
 */
export function uplinkProblems(
  n: Names,
  serverLinks: Map<string, Link>,
  serverTables: Set<string>,
  hostTables: Set<string>,
): string[] {
  const found: string[] = [];
  const veth = serverLinks.get(n.vethServer);
  if (veth === undefined || !veth.up || !veth.addrs.includes(`${n.serverIp}/30`)) {
    found.push(`uplink ${n.vethServer} is missing, down or without its address`);
  }
  if (!serverTables.has(`ip ${SERVER_NFT_TABLE}`)) {
    found.push(`nft table ${SERVER_NFT_TABLE} is missing from namespace ${n.netns}`);
  }
  if (!hostTables.has(`ip ${n.hostTable}`)) {
    found.push(`nft table ${n.hostTable} is missing from the host namespace`);
  }
  return found;
}

/**
 * Removes what of the uplink is in the host namespace, NAT66 included (the rest goes with the server's namespace,
 * the host's routes over the veth with the veth).
 */
export async function removeUplink(
  n: Names,
  hostLinks: Map<string, Link>,
  hostTables: Set<string>,
  hostNetns: string | undefined,
  run: Step,
): Promise<void> {
  if (hostLinks.has(n.vethHost)) await run('ip', [...ipIn(hostNetns), 'link', 'del', n.vethHost]);
  for (const family of ['ip', 'ip6']) {
    if (hostTables.has(`${family} ${n.hostTable}`)) {
      await run('nft', ['delete', 'table', family, n.hostTable], { netns: hostNetns });
    }
  }
}

/** An nft script that replaces table `family name` atomically: a postrouting NAT chain with one rule. */
export function natTableScript(family: 'ip' | 'ip6', name: string, rule: string): string {
  const hook = 'type nat hook postrouting priority srcnat; policy accept;';
  const chain = `  chain postrouting {\n    ${hook}\n    ${rule}\n  }\n`;
  const table = `${family} ${name}`;
  return `table ${table} {}\ndelete table ${table}\ntable ${table} {\n${chain}}\n`;
}
