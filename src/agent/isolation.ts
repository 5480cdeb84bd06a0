/**
 * Client isolation (docs/dataplane.md, "Client isolation"): what a server's clients may reach. Two
 * nft tables of family `inet` (so IPv6 is covered too):
 * - in the server's namespace, `inet vpnpanel_iso`: a forward chain that drops traffic from the
 *   WireGuard interface to the blocked ranges (private, loopback, link-local with cloud metadata,
 *   CGNAT, multicast and reserved space, less the node's `NODE_ALLOW_CIDRS`) and back out of the
 *   interface (client to client, unless the server allows it); an input chain that lets clients
 *   reach the server itself only with ICMP echo and, when the server offers it, DNS;
 * - in the host namespace, `inet vpnpanel_iso_PN`: an input chain that drops everything arriving
 *   from the server's veth, so no address of the host is reachable, whatever it is.
 * A drop in a base chain is final in nftables, so no other table's accept can open these.
 *
 * Each table is replaced atomically by one `nft -f -` transaction. Whether the rules in place are
 * the expected ones is read from `nft list table`, compared with the text this file would load after
 * normalising what nft prints differently (whitespace, element order, `/32` written as a bare address).
 */
import { ipv4Octets, ipv6Groups, ipv6Text } from '../domain/addresses.ts';
import { messageOf } from '../domain/errors.ts';
import type { CommandRunner } from './commands.ts';

export const SERVER_ISOLATION_TABLE = 'vpnpanel_iso';

/** An address range of one family, both ends included. */
export interface Cidr {
  family: 4 | 6;
  start: bigint;
  end: bigint;
}

/** Never reachable by clients unless the node allows it: RFC 6890 special space, less the documentation ranges. */
const BLOCKED_V4 = [
  '0.0.0.0/8', // "this network"
  '10.0.0.0/8', // RFC 1918
  '100.64.0.0/10', // shared address space (CGNAT)
  '127.0.0.0/8', // loopback
  '169.254.0.0/16', // link-local: cloud metadata (169.254.169.254) and the servers' veths
  '172.16.0.0/12', // RFC 1918
  '192.0.0.0/24', // IETF protocol assignments
  '192.168.0.0/16', // RFC 1918
  '198.18.0.0/15', // benchmarking
  '224.0.0.0/4', // multicast
  '240.0.0.0/4', // reserved and limited broadcast
];
const BLOCKED_V6 = [
  '::/127', // unspecified and loopback
  '::ffff:0:0/96', // IPv4-mapped: the IPv4 ranges above by another name
  '64:ff9b:1::/48', // local-use IPv4/IPv6 translation
  '100::/64', // discard-only
  'fc00::/7', // unique local
  'fe80::/10', // link-local
  'ff00::/8', // multicast
];

const V4_BITS = 32;
const V6_BITS = 128;

/** Parses `a.b.c.d/n` or IPv6 `addr/n` (a bare address: a single one); null when malformed or host bits are set. */
export function parseCidr(text: string): Cidr | null {
  const [addr = '', prefixText, ...rest] = text.trim().split('/');
  if (rest.length > 0) return null;
  const family = addr.includes(':') ? 6 : 4;
  const bits = family === 4 ? V4_BITS : V6_BITS;
  const value = family === 4 ? parseV4(addr) : parseV6(addr);
  if (value === null) return null;
  if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) return null;
  const prefix = prefixText === undefined ? bits : Number(prefixText);
  if (prefix > bits) return null;
  const size = 1n << BigInt(bits - prefix);
  if (value % size !== 0n) return null;
  return { family, start: value, end: value + size - 1n };
}

function parseV4(text: string): bigint | null {
  const octets = ipv4Octets(text);
  return octets === undefined ? null : octets.reduce((acc, o) => acc * 256n + BigInt(o), 0n);
}

/** Also an embedded IPv4 tail (`::ffff:10.0.0.1`), as nft prints mapped addresses. */
function parseV6(text: string): bigint | null {
  const groups = ipv6Groups(text);
  return groups === undefined ? null : groups.reduce((acc, g) => (acc << 16n) + BigInt(g), 0n);
}

function formatAddress(family: 4 | 6, value: bigint): string {
  if (family === 4) return [24n, 16n, 8n, 0n].map((shift) => String((value >> shift) & 0xffn)).join('.');
  return ipv6Text([112n, 96n, 80n, 64n, 48n, 32n, 16n, 0n].map((shift) => Number((value >> shift) & 0xffffn)));
}

/** The smallest list of prefixes covering a range exactly, as `addr/len`. */
function rangeToPrefixes(range: Cidr): string[] {
  const bits = range.family === 4 ? V4_BITS : V6_BITS;
  const out: string[] = [];
  let start = range.start;
  while (start <= range.end) {
    let size = 1n;
    let prefix = bits;
    while (prefix > 0 && start % (size * 2n) === 0n && start + size * 2n - 1n <= range.end) {
      size *= 2n;
      prefix--;
    }
    out.push(`${formatAddress(range.family, start)}/${prefix}`);
    start += size;
  }
  return out;
}

/** `ranges` less every range of `remove`, of the same family, sorted. */
function subtract(ranges: readonly Cidr[], remove: readonly Cidr[]): Cidr[] {
  let left = [...ranges];
  for (const cut of remove) {
    left = left.flatMap((r) => {
      if (r.family !== cut.family || cut.end < r.start || cut.start > r.end) return [r];
      const pieces: Cidr[] = [];
      if (cut.start > r.start) pieces.push({ family: r.family, start: r.start, end: cut.start - 1n });
      if (cut.end < r.end) pieces.push({ family: r.family, start: cut.end + 1n, end: r.end });
      return pieces;
    });
  }
  return left.sort((a, b) => a.family - b.family || (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
}

function parseAll(list: readonly string[]): Cidr[] {
  return list.map((text) => {
    const cidr = parseCidr(text);
    if (cidr === null) throw new Error(`not a CIDR: ${text}`);
    return cidr;
  });
}

/** The blocked destinations, less `allow`, as the prefixes of the two nft sets. */
export function blockedPrefixes(allow: readonly Cidr[]): { v4: string[]; v6: string[] } {
  const left = subtract(parseAll([...BLOCKED_V4, ...BLOCKED_V6]), allow);
  return {
    v4: left.filter((r) => r.family === 4).flatMap(rangeToPrefixes),
    v6: left.filter((r) => r.family === 6).flatMap(rangeToPrefixes),
  };
}

/** `NODE_ALLOW_CIDRS`: comma-separated CIDRs; the problem with the first bad one, or the list. */
export function parseAllowCidrs(text: string): Cidr[] | string {
  const items = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const out: Cidr[] = [];
  for (const item of items) {
    const cidr = item.includes('/') ? parseCidr(item) : null;
    if (cidr === null) return `'${item}' is not an IPv4 or IPv6 network such as 10.8.0.0/16 or fd00::/8`;
    out.push(cidr);
  }
  return out;
}

/** What the rules of one server allow. */
export interface IsolationPolicy {
  /** Clients of the server may reach each other. */
  clientToClient: boolean;
  /** The server answers DNS on its tunnel address (udp and tcp 53). */
  dnsOnServer: boolean;
  /** The node's `NODE_ALLOW_CIDRS`: taken out of the blocked set. */
  allow: readonly Cidr[];
}

/** Where a server's rules live. */
export interface IsolationPlace {
  serverNetns: string;
  /** The WireGuard interface in the server namespace. */
  wg: string;
  /** The server's own tunnel address, bare (`10.128.0.1`). */
  serverIp: string;
  /** undefined: the process's own namespace. */
  hostNetns: string | undefined;
  /** The host end of the server's veth. */
  vethHost: string;
  /** The host table's name, unique per server. */
  hostTable: string;
}

function elements(prefixes: readonly string[]): string {
  return prefixes.length === 0 ? '' : `\n\t\telements = { ${prefixes.join(', ')} }`;
}

/** The server namespace's table, as it is loaded and (after normalising) as nft lists it. */
export function serverTableText(place: IsolationPlace, policy: IsolationPolicy): string {
  const { v4, v6 } = blockedPrefixes(policy.allow);
  const wg = JSON.stringify(place.wg);
  const ip = place.serverIp;
  const dns = policy.dnsOnServer ? [`ip daddr ${ip} udp dport 53 accept`, `ip daddr ${ip} tcp dport 53 accept`] : [];
  const forward = [
    `iifname ${wg} oifname ${wg} ${policy.clientToClient ? 'accept' : 'drop'}`,
    ...(v4.length > 0 ? [`iifname ${wg} ip daddr @blocked4 drop`] : []),
    ...(v6.length > 0 ? [`iifname ${wg} ip6 daddr @blocked6 drop`] : []),
  ];
  const input = [
    `iifname != ${wg} accept`,
    'ct state established,related accept',
    `ip daddr ${ip} icmp type echo-request accept`,
    ...dns,
    'drop',
  ];
  return [
    `table inet ${SERVER_ISOLATION_TABLE} {`,
    `\tset blocked4 {\n\t\ttype ipv4_addr\n\t\tflags interval${elements(v4)}\n\t}`,
    `\tset blocked6 {\n\t\ttype ipv6_addr\n\t\tflags interval${elements(v6)}\n\t}`,
    chain('forward', forward),
    chain('input', input),
    '}',
  ].join('\n');
}

/** The host namespace's table: nothing from the server's veth is delivered to the host itself. */
export function hostTableText(place: IsolationPlace): string {
  const input = chain('input', [`iifname ${JSON.stringify(place.vethHost)} drop`]);
  return [`table inet ${place.hostTable} {`, input, '}'].join('\n');
}

function chain(name: 'forward' | 'input', rules: readonly string[]): string {
  const head = `\tchain ${name} {\n\t\ttype filter hook ${name} priority filter; policy accept;\n`;
  return `${head}${rules.map((r) => `\t\t${r}\n`).join('')}\t}`;
}

/**
 * An `nft -f -` script that replaces the table `text` defines in one transaction: made empty if
 * missing, deleted, made anew.
 */
export function replaceScript(text: string): string {
  const head = /^table (\S+ \S+) \{/.exec(text)?.[1] ?? '';
  return `table ${head} {}\ndelete table ${head}\n${text}\n`;
}

/** Orders parsed set elements by family, then address; what does not parse goes last. */
function elementKey(cidr: Cidr | null): [number, bigint] {
  return cidr === null ? [9, 0n] : [cidr.family, cidr.start];
}

/**
 * A table's text in a form where what nft prints and what this file writes compare equal: one space
 * for any whitespace, and each set's elements parsed and sorted (nft lists a /32 as a bare address,
 * an IPv4-mapped address in dotted form, and wraps long lists).
 */
export function normaliseTable(text: string): string {
  const collapsed = text.replace(/\s+/g, ' ').trim();
  return collapsed.replace(/elements = \{([^}]*)\}/g, (_, list: string) => {
    const parsed = list.split(',').map((item) => {
      const cidr = parseCidr(item.trim());
      return { key: elementKey(cidr), text: cidr === null ? item.trim() : rangeToPrefixes(cidr).join(',') };
    });
    parsed.sort((a, b) => a.key[0] - b.key[0] || (a.key[1] < b.key[1] ? -1 : a.key[1] > b.key[1] ? 1 : 0));
    return `elements = { ${parsed.map((p) => p.text).join(', ')} }`;
  });
}

interface TableAt {
  netns: string | undefined;
  name: string;
  text: string;
}

/** The two tables of a server with where each lives. */
function tablesOf(place: IsolationPlace, policy: IsolationPolicy): TableAt[] {
  return [
    { netns: place.serverNetns, name: SERVER_ISOLATION_TABLE, text: serverTableText(place, policy) },
    { netns: place.hostNetns, name: place.hostTable, text: hostTableText(place) },
  ];
}

/** 'ok' when the table in place is the expected one. */
async function stateOf(runner: CommandRunner, table: TableAt): Promise<'ok' | 'missing' | 'differs'> {
  const listed = await runner.run('nft', ['list', 'table', 'inet', table.name], { netns: table.netns }).then(
    (r) => r.stdout,
    () => null,
  );
  if (listed === null) return 'missing';
  return normaliseTable(listed) === normaliseTable(table.text) ? 'ok' : 'differs';
}

/**
 * What differs between the rules in place and the expected ones: one line per table that is missing
 * or not as expected; empty when both are as expected. Reads only (two `nft list table`).
 */
export async function isolationProblems(
  runner: CommandRunner,
  place: IsolationPlace,
  policy: IsolationPolicy,
): Promise<string[]> {
  const problems: string[] = [];
  for (const table of tablesOf(place, policy)) {
    const state = await stateOf(runner, table);
    const where = `table inet ${table.name} in ${table.netns ?? 'the host namespace'}`;
    if (state === 'missing') problems.push(`${where} is missing`);
    else if (state === 'differs') problems.push(`${where} differs from the expected rules`);
  }
  return problems;
}

/**
 * Makes both tables what `policy` says: each one that is missing or differs is loaded anew (atomically,
 * so no packet passes between the old rules and the new). Failures go to `failures`.
 */
export async function ensureIsolation(
  runner: CommandRunner,
  place: IsolationPlace,
  policy: IsolationPolicy,
  failures: string[],
): Promise<void> {
  for (const table of tablesOf(place, policy)) {
    if ((await stateOf(runner, table)) === 'ok') continue;
    const input = replaceScript(table.text);
    await runner.run('nft', ['-f', '-'], { netns: table.netns, input }).catch((error: unknown) => {
      failures.push(messageOf(error));
    });
  }
}
