/**
 * A server's IPv6 beyond its interface (docs/dataplane.md, "IPv6"), which depends on the node. With an IPv6
 * default route in the host namespace (an uplink), the veth pair gets a /126 of the project's ULA (names.ts)
 * beside its IPv4 /30 and the server namespace routes IPv6 through it: masqueraded on both sides as IPv4 is
 * (NAT66), or, for a prefix the operator routes to the node (`routed6`), without NAT and with a host route back
 * to the prefix. Without one, the server has no IPv6 default route, so only its own address answers inside the
 * tunnel and anything else fails at once (ICMPv6 unreachable) instead of silently.
 */
import { canonicalNetwork } from '../../domain/addresses.ts';
import type { Ipv6Mode, ServerSpec } from '../driver.ts';
import type { Step } from './failures.ts';
import { ipIn, type Ipv6Snapshot, type Link, type Route } from './host-readers.ts';
import { type Names, VETH6_PREFIX_BITS } from './names.ts';
import { natTableScript, SERVER_NFT_TABLE } from './uplink.ts';

const FORWARDING = 'net.ipv6.conf.all.forwarding';

/** What is there of a server's IPv6 uplink before ensureUplink6 changes anything. */
export interface Uplink6State {
  /** The veth's ends as they are now (undefined: missing, or just made and without addresses). */
  serverVeth: Link | undefined;
  hostVeth: Link | undefined;
  serverTables: ReadonlySet<string>;
  hostTables: ReadonlySet<string>;
  routes: Ipv6Snapshot;
}

/** What the server's IPv6 is on a node whose host namespace has `hostDefaultRoutes`. */
export function ipv6Mode(spec: ServerSpec, hostDefaultRoutes: readonly Route[]): Ipv6Mode {
  if (spec.address6 === undefined) return 'off';
  if (hostDefaultRoutes.length === 0) return 'tunnel_only';
  return spec.routed6 === true ? 'routed' : 'nat66';
}

/** Whether anything of an IPv6 uplink is on the host: a server without address6 then has some to remove. */
export function hasIpv6Uplink(
  n: Names,
  serverVeth: Link | undefined,
  hostVeth: Link | undefined,
  serverTables: ReadonlySet<string>,
  hostTables: ReadonlySet<string>,
): boolean {
  return (
    (serverVeth?.addrs6.length ?? 0) > 0 ||
    (hostVeth?.addrs6.length ?? 0) > 0 ||
    serverTables.has(`ip6 ${SERVER_NFT_TABLE}`) ||
    hostTables.has(`ip6 ${n.hostTable}`)
  );
}

/**
 * What the host should hold for `spec` in `mode`. Only a way out uses the veth's IPv6, so tunnel_only needs nothing
 * of the host namespace (which may even have IPv6 turned off).
 */
function wanted(spec: ServerSpec, n: Names, mode: Ipv6Mode) {
  const network = spec.address6 === undefined ? undefined : canonicalNetwork(spec.address6);
  const out = mode === 'nat66' || mode === 'routed';
  return {
    vethAddresses: out,
    defaultRoute: out ? `${n.hostIp6} ${n.vethServer}` : '',
    hostForwarding: out,
    nat: mode === 'nat66',
    hostRoutes: mode === 'routed' && network !== undefined ? [network] : [],
  };
}

/**
 * Makes the server's IPv6 uplink what `spec` asks for on this node, adding what is missing and removing what
 * its mode does not use (all of it when `spec` has no address6); returns the mode.
 */
export async function ensureUplink6(
  spec: ServerSpec,
  n: Names,
  state: Uplink6State,
  hostNetns: string | undefined,
  run: Step,
): Promise<Ipv6Mode> {
  const mode = ipv6Mode(spec, state.routes.hostDefaultRoutes);
  const want = wanted(spec, n, mode);
  const hostIp = ipIn(hostNetns);
  const ends = [
    [state.hostVeth, hostIp, n.vethHost, n.hostIp6],
    [state.serverVeth, ['-n', n.netns], n.vethServer, n.serverIp6],
  ] as const;
  for (const [link, where, dev, ip] of ends) {
    if (link === undefined) continue;
    const cidr = `${ip}/${VETH6_PREFIX_BITS}`;
    const has = link.addrs6.includes(cidr);
    // nodad: a veth address is usable at once (duplicate detection would hold it back about a second).
    if (want.vethAddresses && !has) await run('ip', [...where, 'addr', 'add', cidr, 'dev', dev, 'nodad']);
    if (!want.vethAddresses && has) await run('ip', [...where, 'addr', 'del', cidr, 'dev', dev]);
  }
  const { routes } = state;
  if (mode !== 'off' && !routes.serverForwarding) {
    await run('sysctl', ['-w', `${FORWARDING}=1`], { netns: n.netns });
  }
  if (want.hostForwarding && !routes.hostForwarding) {
    // A forwarding host ignores router advertisements unless accept_ra is 2: a default route learned from them
    // would lapse.
    for (const dev of new Set(routes.hostDefaultRoutes.filter((r) => r.protocol === 'ra').map((r) => r.dev))) {
      await run('sysctl', ['-w', `net.ipv6.conf.${dev}.accept_ra=2`], { netns: hostNetns });
    }
    await run('sysctl', ['-w', `${FORWARDING}=1`], { netns: hostNetns });
  }
  if (routes.serverDefaultRoute !== want.defaultRoute) {
    const [via = '', dev = ''] = want.defaultRoute.split(' ');
    await run('ip', [
      '-n',
      n.netns,
      '-6',
      'route',
      ...(via === '' ? ['del', 'default'] : ['replace', 'default', 'via', via, 'dev', dev]),
    ]);
  }
  for (const dst of routes.hostRoutesViaVeth.filter((d) => !want.hostRoutes.includes(d))) {
    await run('ip', [...hostIp, '-6', 'route', 'del', dst, 'dev', n.vethHost]);
  }
  for (const dst of want.hostRoutes.filter((d) => !routes.hostRoutesViaVeth.includes(d))) {
    await run('ip', [...hostIp, '-6', 'route', 'replace', dst, 'via', n.serverIp6, 'dev', n.vethHost]);
  }
  const tables = [
    [state.serverTables, n.netns, SERVER_NFT_TABLE, `oifname "${n.vethServer}" masquerade`],
    [state.hostTables, hostNetns, n.hostTable, `ip6 saddr ${n.serverIp6} oifname != "${n.vethHost}" masquerade`],
  ] as const;
  for (const [present, netns, name, rule] of tables) {
    const has = present.has(`ip6 ${name}`);
    if (want.nat && !has) await run('nft', ['-f', '-'], { netns, input: natTableScript('ip6', name, rule) });
    if (!want.nat && has) await run('nft', ['delete', 'table', 'ip6', name], { netns });
  }
  return mode;
}

/** How the server's IPv6 uplink differs from what ensureUplink6 makes of it, one line each (the drift check). */
export function uplink6Problems(spec: ServerSpec, n: Names, state: Uplink6State): string[] {
  const mode = ipv6Mode(spec, state.routes.hostDefaultRoutes);
  const want = wanted(spec, n, mode);
  const { routes } = state;
  const found: string[] = [];
  const ends = [
    [state.hostVeth, n.vethHost, n.hostIp6],
    [state.serverVeth, n.vethServer, n.serverIp6],
  ] as const;
  for (const [link, dev, ip] of ends) {
    const has = link?.addrs6.includes(`${ip}/${VETH6_PREFIX_BITS}`) ?? false;
    if (want.vethAddresses && !has) found.push(`uplink ${dev} lacks its IPv6 address ${ip}`);
    if (!want.vethAddresses && has) found.push(`uplink ${dev} has IPv6 address ${ip}, which IPv6 ${mode} does not use`);
  }
  if (mode !== 'off' && !routes.serverForwarding) found.push(`IPv6 forwarding is off in namespace ${n.netns}`);
  if (want.hostForwarding && !routes.hostForwarding) found.push('IPv6 forwarding is off in the host namespace');
  if (routes.serverDefaultRoute !== want.defaultRoute) {
    const is = routes.serverDefaultRoute === '' ? 'none' : `via ${routes.serverDefaultRoute}`;
    const should = want.defaultRoute === '' ? `none (IPv6 ${mode})` : `via ${want.defaultRoute}`;
    found.push(`IPv6 default route of namespace ${n.netns} is ${is}, not ${should}`);
  }
  for (const dst of routes.hostRoutesViaVeth.filter((d) => !want.hostRoutes.includes(d))) {
    found.push(`the host namespace routes ${dst} over ${n.vethHost}, which IPv6 ${mode} does not use`);
  }
  for (const dst of want.hostRoutes.filter((d) => !routes.hostRoutesViaVeth.includes(d))) {
    found.push(`the host namespace has no route to ${dst} over ${n.vethHost}`);
  }
  const tables = [
    [state.serverTables, `namespace ${n.netns}`, SERVER_NFT_TABLE],
    [state.hostTables, 'the host namespace', n.hostTable],
  ] as const;
  for (const [present, where, name] of tables) {
    const has = present.has(`ip6 ${name}`);
    if (want.nat && !has) found.push(`nft table ip6 ${name} is missing from ${where}`);
    if (!want.nat && has) found.push(`nft table ip6 ${name} is in ${where}, but IPv6 is ${mode}, not nat66`);
  }
  return found;
}
