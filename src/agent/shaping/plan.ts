/**
 * What to change for speed limits (docs/dataplane.md, "Speed limits"): from the limits wanted and the state read
 * from the host (or remembered), the tc batch lines and the nft script to run, and what to remember afterwards.
 * Pure: shaper.ts reads the host and runs what these plan; the text itself is tc-nft.ts's.
 */
import type { PeerSpec } from '../driver.ts';
import {
  type BatchLine,
  type DeviceState,
  FAMILIES,
  SHAPING_TABLE,
  type ShapingPlace,
  type ShapingState,
  classDeleteLine,
  classId,
  classMinor,
  deleteTableScript,
  elementStatements,
  ensureTableScript,
  familyOf,
  parsePrintedRate,
  printedRate,
  rootDeleteLine,
  rootLine,
  shapeLines,
  tableScript,
  unshapeLine,
} from './tc-nft.ts';

/**
 * A peer's limit: its bare IPv4 address (which names its class), its bare IPv6 one if any, and kbit/s;
 * `kbps` is NaN when not known exactly (a step failed, or it was read back from the host).
 */
export interface Limit {
  ip: string;
  ip6?: string;
  kbps: number;
}

/** A convergence's commands: one `tc -batch` (none when empty), then one nft transaction (none when ''). */
export interface Convergence {
  lines: BatchLine[];
  script: string;
  /** The IPv4 address (class) of each peer whose map entries the script adds: its limit failed if the script does. */
  scriptOwners: string[];
}

/** A change's commands, and the limits to remember (by public key) unless a step fails. */
export interface ChangePlan extends Convergence {
  known: Map<string, Limit>;
  /** The peers whose limit cannot be applied, as failures. */
  problems: string[];
  /** Makes the tables of the script's entries, kept as they are where present (the script's second try). */
  ensure: string;
}

/** The limits the drift check compares the host with: kbit/s by IPv4 address, and the map entries wanted. */
export interface CheckedLimits {
  kbps: Map<string, number>;
  entries: Map<string, string>;
}

/** A limit's map entries: each address of the peer → the class of its IPv4 address. */
function entriesOf(limit: Limit): [string, string][] {
  const id = classId(limit.ip);
  return limit.ip6 === undefined
    ? [[limit.ip, id]]
    : [
        [limit.ip, id],
        [limit.ip6, id],
      ];
}

/** A limit of `kbps` for a peer with these addresses (bare, as `wg` prints them); null without an IPv4 one. */
function limitAt(addresses: readonly string[], kbps: number): Limit | null {
  const ip = addresses.find((a) => familyOf(a) === 'ip');
  const ip6 = addresses.find((a) => familyOf(a) === 'ip6');
  if (ip === undefined) return null;
  return ip6 === undefined ? { ip, kbps } : { ip, ip6, kbps };
}

/**
 * The limit to apply for a peer (its allowed ips as `wg` prints them, its limit checked by the driver):
 * null when it has none (0), else the limit or what is wrong with it. A limit needs a single IPv4
 * address whose class id is not the qdisc's own (minor 0), and an IPv6 address, if any, of one address.
 */
function limitOf(peer: PeerSpec): Limit | null | string {
  const kbps = peer.speedLimitKbps;
  if (kbps === 0) return null;
  const ip = /^(\d{1,3}(?:\.\d{1,3}){3})\/32$/.exec(peer.allowedIp)?.[1];
  if (ip === undefined) return `a speed limit needs a single IPv4 address, not ${peer.allowedIp}`;
  if (classMinor(ip) === 0) return `${ip} ends in .0.0, which has no class id of its own`;
  if (peer.allowedIp6 === undefined) return { ip, kbps };
  const ip6 = /^([0-9a-f:]+)\/128$/.exec(peer.allowedIp6)?.[1];
  if (ip6 === undefined) return `a speed limit needs a single IPv6 address, not ${peer.allowedIp6}`;
  return { ip, ip6, kbps };
}

function clashProblem(publicKey: string, ip: string, other: string): string {
  return `peer ${publicKey}: ${ip} has the class id of ${other} (a subnet larger than /16)`;
}

/** A peer's limit as the host holds it (class of its map entry on either device), 0 when none. */
function hostLimit(state: ShapingState, ip: string): number {
  if (state.elements.get(ip) !== classId(ip)) return 0;
  const minor = classMinor(ip);
  const rate = state.wg.classes.get(minor)?.rate ?? state.uplink.classes.get(minor)?.rate;
  const kbps = rate === undefined ? Number.NaN : parsePrintedRate(rate);
  return Number.isFinite(kbps) ? kbps : 0;
}

function devicesOf(place: ShapingPlace, state: ShapingState): (readonly [string, DeviceState])[] {
  return [
    [place.wg, state.wg],
    [place.uplink, state.uplink],
  ];
}

/**
 * setPeers: the limits of `peers` by public key, and what is wrong with the others. Of peers whose addresses
 * share a class id, the first by public key gets it.
 */
export function wantedLimits(peers: readonly PeerSpec[]): { want: Map<string, Limit>; problems: string[] } {
  const want = new Map<string, Limit>();
  const problems: string[] = [];
  const byMinor = new Map<number, string>();
  for (const peer of [...peers].sort((a, b) => (a.publicKey < b.publicKey ? -1 : 1))) {
    const limit = limitOf(peer);
    if (typeof limit === 'string') problems.push(`peer ${peer.publicKey}: ${limit}`);
    if (limit === null || typeof limit === 'string') continue;
    const taken = byMinor.get(classMinor(limit.ip));
    if (taken !== undefined && taken !== limit.ip) {
      problems.push(clashProblem(peer.publicKey, limit.ip, taken));
      continue;
    }
    byMinor.set(classMinor(limit.ip), limit.ip);
    want.set(peer.publicKey, limit);
  }
  return { want, problems };
}

/**
 * up() after the interface or the veth was made again: the limits of `peers` (public key → bare addresses) as
 * remembered in `known`, or as the surviving half of the host's state says.
 */
export function restoredLimits(
  state: ShapingState,
  known: ReadonlyMap<string, Limit> | undefined,
  peers: ReadonlyMap<string, readonly string[]>,
): Map<string, Limit> {
  const want = new Map<string, Limit>();
  for (const [publicKey, addresses] of peers) {
    const found = limitAt(addresses, Number.NaN);
    if (found === null) continue;
    const remembered = known?.get(publicKey);
    const kbps =
      remembered?.ip === found.ip && Number.isFinite(remembered.kbps) ? remembered.kbps : hostLimit(state, found.ip);
    if (kbps > 0) want.set(publicKey, { ...found, kbps });
  }
  return want;
}

/** The limited peers among `peers` (public key → bare addresses) by the host's map entries, their rates unknown. */
export function limitsOnHost(state: ShapingState, peers: ReadonlyMap<string, readonly string[]>): Map<string, Limit> {
  const known = new Map<string, Limit>();
  for (const [publicKey, addresses] of peers) {
    // Printed rates are rounded above 1 Gbit/s: NaN makes the next upsert apply its limit whatever it is.
    const limit = limitAt(addresses, Number.NaN);
    if (limit !== null && state.elements.has(limit.ip)) known.set(publicKey, limit);
  }
  return known;
}

/** `limits` with the rate of each peer whose address failed unknown (NaN), so that its limit is applied again. */
export function withFailed(limits: ReadonlyMap<string, Limit>, failed: ReadonlySet<string>): Map<string, Limit> {
  return new Map([...limits].map(([key, l]) => [key, failed.has(l.ip) ? { ...l, kbps: Number.NaN } : l]));
}

/**
 * Makes the host hold exactly `want` (by public key), leaving the shaping of `keepIps` alone; `previous` is what
 * was remembered, whose exact rates tell a change that tc's printed rates hide.
 */
export function planConvergence(
  place: ShapingPlace,
  state: ShapingState,
  want: ReadonlyMap<string, Limit>,
  keepIps: ReadonlySet<string>,
  previous: ReadonlyMap<string, Limit> | undefined,
): Convergence {
  const wanted = new Map([...want.values()].map((l) => [l.ip, l]));
  const keptMinors = new Set([...keepIps].filter((ip) => familyOf(ip) === 'ip').map(classMinor));
  const devices = devicesOf(place, state);
  if (wanted.size === 0 && !devices.some(([, d]) => [...keptMinors].some((m) => d.classes.has(m)))) {
    // Nothing limited: no shaping state at all, so unlimited servers pay nothing for it.
    const present = FAMILIES.filter((family) => state.tables[family] !== 'missing');
    return {
      lines: devices.filter(([, d]) => d.htbRoot).map(([dev]) => rootDeleteLine(dev)),
      script: present.map((family) => deleteTableScript(family)).join(''),
      scriptOwners: [],
    };
  }
  const exact = new Map([...(previous?.values() ?? [])].map((l) => [l.ip, l.kbps]));
  return {
    lines: convergenceLines(devices, wanted, keptMinors, exact),
    ...convergenceScript(place, state, want, keepIps),
  };
}

/** The classes of `wanted` (by IPv4 address) that differ from the host's, and those of no wanted or kept peer. */
function convergenceLines(
  devices: readonly (readonly [string, DeviceState])[],
  wanted: ReadonlyMap<string, Limit>,
  keptMinors: ReadonlySet<number>,
  exact: ReadonlyMap<string, number>,
): BatchLine[] {
  const wantedMinors = new Set([...wanted.keys()].map(classMinor));
  const lines: BatchLine[] = [];
  for (const [dev, device] of devices) {
    if (!device.htbRoot) lines.push(rootLine(dev, true));
    for (const minor of device.classes.keys()) {
      if (!wantedMinors.has(minor) && !keptMinors.has(minor)) lines.push(classDeleteLine(dev, minor));
    }
    for (const limit of wanted.values()) {
      const current = device.classes.get(classMinor(limit.ip));
      const printed = printedRate(limit.kbps);
      const same =
        current !== undefined &&
        current.rate === printed &&
        current.ceil === printed &&
        current.leaf &&
        (exact.get(limit.ip) ?? limit.kbps) === limit.kbps;
      if (!same) lines.push(...shapeLines(dev, limit.ip, limit.kbps));
    }
  }
  return lines;
}

/**
 * The map entries of `want` that differ from the host's, and those of no wanted or kept peer: element changes
 * in a table that is intact, else the table made afresh (or deleted when nothing is left for it).
 */
function convergenceScript(
  place: ShapingPlace,
  state: ShapingState,
  want: ReadonlyMap<string, Limit>,
  keepIps: ReadonlySet<string>,
): Omit<Convergence, 'lines'> {
  const wantedEntries = new Map([...want.values()].flatMap(entriesOf));
  const scripts: string[] = [];
  /** The IPv4 address (class) of each wanted address, to mark a peer failed when its table's script fails. */
  const owners = new Map([...want.values()].flatMap((l) => entriesOf(l).map(([a]): [string, string] => [a, l.ip])));
  const touched: string[] = [];
  for (const family of FAMILIES) {
    const mine = <T>(entries: Iterable<[string, T]>): [string, T][] =>
      [...entries].filter(([address]) => familyOf(address) === family);
    const wantedHere = mine(wantedEntries);
    const kept = mine(state.elements).filter(([address]) => keepIps.has(address));
    if (state.tables[family] === 'ok') {
      const stale = mine(state.elements).filter(
        ([address, id]) => !keepIps.has(address) && wantedEntries.get(address) !== id,
      );
      const missing = wantedHere.filter(([address, id]) => state.elements.get(address) !== id);
      scripts.push(...elementStatements('delete', stale).map((l) => `${l}\n`));
      scripts.push(...elementStatements('add', missing).map((l) => `${l}\n`));
      touched.push(...missing.map(([address]) => address));
    } else if (wantedHere.length > 0 || kept.length > 0) {
      scripts.push(tableScript(place, family, new Map([...kept, ...wantedHere])));
      touched.push(...wantedHere.map(([address]) => address));
    } else if (state.tables[family] === 'damaged') scripts.push(deleteTableScript(family));
  }
  return { script: scripts.join(''), scriptOwners: touched.map((address) => owners.get(address) ?? address) };
}

/** What changePeers changes, peer by peer, against what was applied. */
interface LimitDiff {
  known: Map<string, Limit>;
  problems: string[];
  /** IPv4 addresses whose classes go, and the limits whose classes are made or changed, by IPv4 address. */
  unshape: Set<string>;
  shape: Map<string, Limit>;
  /** Map entries to drop, and to add with the peer they are for. */
  dropEntries: Map<string, string>;
  addEntries: Map<string, { id: string; publicKey: string }>;
}

function diffLimits(
  previous: ReadonlyMap<string, Limit>,
  upsert: readonly PeerSpec[],
  remove: readonly string[],
): LimitDiff {
  const known = new Map(previous);
  const problems: string[] = [];
  const unshape = new Set<string>();
  const shape = new Map<string, Limit>();
  const dropEntries = new Map<string, string>();
  const addEntries = new Map<string, { id: string; publicKey: string }>();
  for (const key of remove) {
    const old = known.get(key);
    if (old === undefined) continue;
    unshape.add(old.ip);
    for (const [address, id] of entriesOf(old)) dropEntries.set(address, id);
    known.delete(key);
  }
  for (const peer of upsert) {
    const limit = limitOf(peer);
    if (typeof limit === 'string') {
      problems.push(`peer ${peer.publicKey}: ${limit}`);
      continue;
    }
    const old = known.get(peer.publicKey);
    if (old !== undefined && old.ip !== limit?.ip) unshape.add(old.ip);
    known.delete(peer.publicKey);
    const newEntries = new Map(limit === null ? [] : entriesOf(limit));
    for (const [address, id] of old === undefined ? [] : entriesOf(old)) {
      if (newEntries.get(address) !== id) dropEntries.set(address, id);
    }
    if (limit === null) continue;
    const clash = [...known.values()].find(
      (other) => other.ip !== limit.ip && classMinor(other.ip) === classMinor(limit.ip),
    );
    if (clash !== undefined) {
      problems.push(clashProblem(peer.publicKey, limit.ip, clash.ip));
      continue;
    }
    known.set(peer.publicKey, limit);
    // A rate change of a peer whose map entries are in place needs tc alone.
    if (old?.ip !== limit.ip || old.kbps !== limit.kbps) shape.set(limit.ip, limit);
    const applied = new Map(old !== undefined && Number.isFinite(old.kbps) ? entriesOf(old) : []);
    for (const [address, id] of newEntries) {
      if (applied.get(address) !== id) addEntries.set(address, { id, publicKey: peer.publicKey });
    }
  }
  for (const ip of shape.keys()) unshape.delete(ip);
  for (const address of addEntries.keys()) dropEntries.delete(address);
  return { known, problems, unshape, shape, dropEntries, addEntries };
}

/**
 * changePeers: applies the limits of `upsert` and removes those of the keys in `remove` (`previous`: the limits
 * applied, by public key), touching only peers whose limit differs from what was applied.
 */
export function planChange(
  place: ShapingPlace,
  previous: ReadonlyMap<string, Limit>,
  upsert: readonly PeerSpec[],
  remove: readonly string[],
): ChangePlan {
  const { known, problems, unshape, shape, dropEntries, addEntries } = diffLimits(previous, upsert, remove);
  const lines: BatchLine[] = [];
  for (const dev of [place.wg, place.uplink]) {
    if (shape.size > 0) lines.push(rootLine(dev, false));
    for (const ip of unshape) lines.push(unshapeLine(dev, ip, true));
    for (const limit of shape.values()) lines.push(...shapeLines(dev, limit.ip, limit.kbps));
  }
  // Adding first makes deleting an entry that is already gone succeed (nft 1.0.6 has no `destroy`).
  const drops = [...dropEntries];
  const adds = [...addEntries].map(([address, { id }]): [string, string] => [address, id]);
  const statements = [
    ...elementStatements('add', drops),
    ...elementStatements('delete', drops),
    ...elementStatements('add', adds),
  ];
  const families = new Set([...drops, ...adds].map(([address]) => familyOf(address)));
  return {
    known,
    problems,
    lines,
    script: statements.length === 0 ? '' : `${statements.join('\n')}\n`,
    ensure: [...families].map((family) => ensureTableScript(place, family)).join(''),
    scriptOwners: [...addEntries.values()].flatMap(({ publicKey }) => {
      const limit = known.get(publicKey);
      return limit === undefined ? [] : [limit.ip];
    }),
  };
}

/**
 * The drift check's limits of `peers` (allowed ips as `wg` prints them); peers whose limit is wrong are left
 * out (setPeers reports them).
 */
export function checkedLimits(peers: readonly PeerSpec[]): CheckedLimits {
  const kbps = new Map<string, number>();
  const entries = new Map<string, string>();
  for (const peer of peers) {
    const limit = limitOf(peer);
    if (limit === null || typeof limit === 'string') continue;
    kbps.set(limit.ip, limit.kbps);
    for (const [address, id] of entriesOf(limit)) entries.set(address, id);
  }
  return { kbps, entries };
}

/** How the host's shaping differs from `wanted`, one line a difference. */
export function driftOf(place: ShapingPlace, state: ShapingState, wanted: CheckedLimits): string[] {
  const found: string[] = [];
  for (const family of FAMILIES) {
    const table = state.tables[family];
    const needed = family === 'ip' || [...wanted.entries.keys()].some((a) => familyOf(a) === family);
    if (table !== 'ok' && (needed || table === 'damaged'))
      found.push(`nft table ${family} ${SHAPING_TABLE} is ${table}`);
  }
  const wantedMinors = new Set([...wanted.kbps.keys()].map(classMinor));
  for (const [dev, device] of devicesOf(place, state)) {
    for (const [ip, kbps] of wanted.kbps) {
      const current = device.classes.get(classMinor(ip));
      const printed = printedRate(kbps);
      const name = `speed limit of ${ip}: class ${classId(ip)}`;
      if (current === undefined) found.push(`${name} is missing on ${dev}`);
      else if (current.rate !== printed || current.ceil !== printed) {
        found.push(`${name} on ${dev} is ${current.rate}, not ${printed}`);
      } else if (!current.leaf) found.push(`${name} on ${dev} has lost its queue`);
    }
    for (const minor of device.classes.keys()) {
      if (!wantedMinors.has(minor)) found.push(`class 1:${minor.toString(16)} on ${dev} is of no limited peer`);
    }
  }
  for (const [address, id] of wanted.entries) {
    const tableOk = state.tables[familyOf(address)] === 'ok';
    if (tableOk && state.elements.get(address) !== id) found.push(`speed limit of ${address}: no map entry`);
  }
  for (const address of state.elements.keys()) {
    if (!wanted.entries.has(address)) found.push(`map entry ${address} is of no limited peer`);
  }
  return found;
}
