/**
 * The text of kernel allowances (docs/dataplane.md, "Where each byte is counted"): the nft statements that make
 * and move them, and the reading of what `nft -j list table` prints back. Pure: quotas.ts runs them.
 *
 * One `inet` table per server namespace holds, per limited peer, a named quota (`over N bytes`: it drops once it
 * has counted more than N) and a counter of the same name that counts exactly what the quota counts (a quota
 * lists its count capped at its limit, and the next limit is set from the true count), with maps address → quota
 * and address → counter, one of each per family, so the peer's IPv4 and IPv6 traffic count toward one quota.
 * The prerouting chain counts what arrives from the WireGuard interface (the peer's upload, forwarded or to the
 * server's own address), the postrouting chain what leaves through it (the download, forwarded or from the
 * server itself): every inner packet passes one of them, once. Each rule costs two map lookups, whatever the
 * number of peers.
 */
import { isDeepStrictEqual } from 'node:util';
import Type from 'typebox';
import Value from 'typebox/value';
import { RECOUNT_BELOW } from './allowance.ts';

export const QUOTA_TABLE = 'vpnpanel_quota';
const TABLE = `inet ${QUOTA_TABLE}`;
type Family = 'ip' | 'ip6';
const FAMILIES: readonly Family[] = ['ip', 'ip6'];
const ADDRESS_TYPE: Record<Family, string> = { ip: 'ipv4_addr', ip6: 'ipv6_addr' };
type ObjectType = 'quota' | 'counter';
const OBJECT_TYPES: readonly ObjectType[] = ['quota', 'counter'];
const MAPS: Record<ObjectType, Record<Family, string>> = {
  quota: { ip: 'quota4', ip6: 'quota6' },
  counter: { ip: 'count4', ip6: 'count6' },
};

/** Where a server's allowances live: its namespace and its WireGuard interface. */
export interface QuotaPlace {
  netns: string;
  wg: string;
}

/** A peer's quota as the host holds it: the count it drops above, and what its counter counted (undefined: none). */
export interface HostQuota {
  limit: number | undefined;
  counted: number | undefined;
}

export interface QuotaTable {
  /** ok: the table holds exactly our maps and chains (the quotas, counters and elements aside). */
  state: 'ok' | 'damaged' | 'missing';
  /** By name. */
  quotas: Map<string, HostQuota>;
  /** Map elements: `quota ADDRESS` or `counter ADDRESS` → object name. */
  elements: Map<string, string>;
}

/** A peer's quota as wanted: its name, its addresses (bare), the count it may reach. */
export interface WantedQuota {
  name: string;
  addresses: readonly string[];
  limit: number;
}

/** The quota of a peer is named after its public key (in hex: nft names take no `+`, `/` or `=`). */
export function quotaName(publicKey: string): string {
  return `k${Buffer.from(publicKey, 'base64').toString('hex')}`;
}

/** The public key a quota is named after; undefined for a name of no peer. */
export function publicKeyOf(name: string): string | undefined {
  return /^k[0-9a-f]{64}$/.test(name) ? Buffer.from(name.slice(1), 'hex').toString('base64') : undefined;
}

function familyOf(address: string): Family {
  return address.includes(':') ? 'ip6' : 'ip';
}

const CHAINS = {
  prerouting: { hook: 'prerouting', prio: -300, iface: 'iifname', field: 'saddr' },
  postrouting: { hook: 'postrouting', prio: 0, iface: 'oifname', field: 'daddr' },
} as const;
type ChainName = keyof typeof CHAINS;
const CHAIN_NAMES: readonly ChainName[] = ['prerouting', 'postrouting'];

/**
 * A chain's rules as nft statements: small packets counted again (allowance.ts), then every packet counted once
 * more and dropped when over. The counter comes first in each rule, so it counts whatever the quota counts.
 */
function ruleTexts(chain: ChainName, wg: string): string[] {
  const { iface, field } = CHAINS[chain];
  return FAMILIES.flatMap((family) => {
    const lookup = (type: ObjectType) => `${type} name ${family} ${field} map @${MAPS[type][family]}`;
    const count = `${lookup('counter')} ${lookup('quota')}`;
    return [
      ...RECOUNT_BELOW.map((below) => `${iface} "${wg}" meta length < ${below} ${count}`),
      `${iface} "${wg}" ${count} drop`,
    ];
  });
}

/** The same rules as `nft -j` prints their expressions. */
function ruleJson(chain: ChainName, wg: string): unknown[][] {
  const { iface, field } = CHAINS[chain];
  return FAMILIES.flatMap((family) => {
    const head = { match: { op: '==', left: { meta: { key: iface } }, right: wg } };
    const lookup = (type: ObjectType) => ({
      [type]: { map: { key: { payload: { protocol: family, field } }, data: `@${MAPS[type][family]}` } },
    });
    const count = [lookup('counter'), lookup('quota')];
    const length = (below: number) => ({ match: { op: '<', left: { meta: { key: 'length' } }, right: below } });
    return [...RECOUNT_BELOW.map((below) => [head, length(below), ...count]), [head, ...count, { drop: null }]];
  });
}

/** Creates the table, its maps and chains where missing, and writes the chains' rules anew; all else stays. */
export function ensureScript(place: QuotaPlace): string {
  const lines = [`add table ${TABLE}`];
  for (const type of OBJECT_TYPES) {
    for (const family of FAMILIES)
      lines.push(`add map ${TABLE} ${MAPS[type][family]} { type ${ADDRESS_TYPE[family]} : ${type}; }`);
  }
  for (const chain of CHAIN_NAMES) {
    const { hook, prio } = CHAINS[chain];
    lines.push(`add chain ${TABLE} ${chain} { type filter hook ${hook} priority ${prio}; policy accept; }`);
    lines.push(`flush chain ${TABLE} ${chain}`);
    for (const rule of ruleTexts(chain, place.wg)) lines.push(`add rule ${TABLE} ${chain} ${rule}`);
  }
  return `${lines.join('\n')}\n`;
}

/**
 * Makes the table afresh (replacing whatever is there) holding `wanted`, each counter and quota starting from
 * what it had counted (`counted`, by name), so that limits set from those counts still hold.
 */
export function tableScript(
  place: QuotaPlace,
  wanted: readonly WantedQuota[],
  counted: ReadonlyMap<string, number>,
): string {
  const lines = [`table ${TABLE} {}`, `delete table ${TABLE}`, ensureScript(place).trimEnd()];
  for (const q of wanted) lines.push(...objectStatements(q.name, q.limit, counted.get(q.name) ?? 0));
  lines.push(...elementStatements('add', entriesOf(wanted)));
  return `${lines.join('\n')}\n`;
}

/** Each wanted address's map entries, for its quota and its counter: [`type address`, name]. */
export function entriesOf(wanted: readonly WantedQuota[]): [string, string][] {
  return wanted.flatMap((q) =>
    q.addresses.flatMap((a) => OBJECT_TYPES.map((type): [string, string] => [`${type} ${a}`, q.name])),
  );
}

/** A new counter and quota that have counted `counted` bytes. */
export function objectStatements(name: string, limit: number, counted: number): string[] {
  return [
    `add counter ${TABLE} ${name} { packets 0 bytes ${counted} }`,
    `add quota ${TABLE} ${name} { over ${limit} bytes used ${counted} bytes }`,
  ];
}

/** Moves an existing quota's limit; what it counted stays. */
export function limitStatement(name: string, limit: number): string {
  return `add quota ${TABLE} ${name} { over ${limit} bytes }`;
}

/** Deletes a peer's quota and counter (after their map elements). */
export function deleteObjectStatements(name: string, host: HostQuota): string[] {
  const types = OBJECT_TYPES.filter((type) => (type === 'quota' ? host.limit : host.counted) !== undefined);
  return types.map((type) => `delete ${type} ${TABLE} ${name}`);
}

export function deleteTableStatement(): string {
  return `delete table ${TABLE}`;
}

/**
 * `add element` (address → object) or `delete element` (addresses alone) statements for entries [`type address`,
 * name], one per map that has some.
 */
export function elementStatements(verb: 'add' | 'delete', entries: readonly [string, string][]): string[] {
  return OBJECT_TYPES.flatMap((type) =>
    FAMILIES.flatMap((family) => {
      const own = entries.flatMap(([key, name]): [string, string][] => {
        const [entryType, address = ''] = key.split(' ');
        return entryType === type && familyOf(address) === family ? [[address, name]] : [];
      });
      if (own.length === 0) return [];
      const list = own.map(([address, name]) => (verb === 'add' ? `${address} : "${name}"` : address)).join(', ');
      return [`${verb} element ${TABLE} ${MAPS[type][family]} { ${list} }`];
    }),
  );
}

const ListingSchema = Type.Object({ nftables: Type.Array(Type.Record(Type.String(), Type.Unknown())) });
const ObjectSchema = Type.Object({ name: Type.String(), bytes: Type.Integer() });
const MapSchema = Type.Object({
  name: Type.String(),
  type: Type.String(),
  map: Type.String(),
  elem: Type.Optional(Type.Array(Type.Tuple([Type.String(), Type.String()]))),
});
const ChainSchema = Type.Object({
  name: Type.String(),
  hook: Type.String(),
  prio: Type.Integer(),
  policy: Type.String(),
});
const RuleSchema = Type.Object({ chain: Type.String(), expr: Type.Array(Type.Unknown()) });

/** What `nft -j list table inet vpnpanel_quota` printed ('' when it failed: no table). */
export function parseTable(stdout: string, place: QuotaPlace): QuotaTable {
  const table: QuotaTable = { state: 'missing', quotas: new Map(), elements: new Map() };
  if (stdout.trim() === '') return table;
  const listing: unknown = JSON.parse(stdout);
  if (!Value.Check(ListingSchema, listing)) return { ...table, state: 'damaged' };
  const maps = new Set<string>();
  const chains = new Set<string>();
  const rules = new Map<string, unknown[][]>();
  const objectOf = (name: string) => table.quotas.get(name) ?? { limit: undefined, counted: undefined };
  for (const entry of listing.nftables) {
    const { quota, counter, map, chain, rule } = entry;
    if (Value.Check(ObjectSchema, quota)) table.quotas.set(quota.name, { ...objectOf(quota.name), limit: quota.bytes });
    else if (Value.Check(ObjectSchema, counter))
      table.quotas.set(counter.name, { ...objectOf(counter.name), counted: counter.bytes });
    else if (Value.Check(MapSchema, map)) {
      const type = OBJECT_TYPES.find((t) => t === map.map);
      if (type === undefined) continue;
      if (FAMILIES.some((f) => MAPS[type][f] === map.name && ADDRESS_TYPE[f] === map.type)) maps.add(map.name);
      for (const [address, name] of map.elem ?? []) table.elements.set(`${type} ${address}`, name);
    } else if (Value.Check(ChainSchema, chain)) {
      const wanted = CHAIN_NAMES.map((name) => CHAINS[name]).find((c) => c.hook === chain.name);
      if (wanted?.hook === chain.hook && wanted.prio === chain.prio && chain.policy === 'accept')
        chains.add(chain.name);
    } else if (Value.Check(RuleSchema, rule)) rules.set(rule.chain, [...(rules.get(rule.chain) ?? []), rule.expr]);
  }
  const intact =
    maps.size === FAMILIES.length * OBJECT_TYPES.length &&
    CHAIN_NAMES.every((name) => chains.has(name) && isDeepStrictEqual(rules.get(name), ruleJson(name, place.wg)));
  return { ...table, state: intact ? 'ok' : 'damaged' };
}
