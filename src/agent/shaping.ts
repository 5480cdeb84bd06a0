/**
 * Per-peer speed limits inside a server's namespace (design C of docs/dataplane.md, "Measured facts" 3; the whole
 * layout is in docs/dataplane.md). A limited peer gets an HTB class on the WireGuard interface (its
 * download) and one on the server end of the uplink veth (its upload), each with a byte FIFO as its
 * queue. An nft map in the server namespace, address → class id, sets `meta priority` in the forward
 * and output hooks; HTB puts a packet whose priority names one of its classes straight into it. So
 * there are no tc filters and no IFB, and classifying costs one hash lookup however many peers are
 * limited. Traffic of an address without a map entry is not classified and passes unshaped.
 *
 * Class ids are `1:<the low 16 bits of the peer's address, in hex>`: unique within any subnet of /16
 * or smaller, and derived, so nothing has to be remembered to find a peer's class again.
 *
 * Changes are incremental: a class is added, changed or deleted only for a peer whose limit differs,
 * never by rebuilding the tree (HTB's install time grows with the number of classes).
 */
import { messageOf } from '../domain/errors.ts';
import { CommandError, type CommandRunner } from './commands.ts';
import type { PeerSpec } from './driver.ts';

/** nft table of the server namespace that holds the map and the two classifying chains. */
const SHAPING_TABLE = 'vpnpanel_shape';
const MAP = 'limited';
/** The largest Ethernet frame without VLAN tag: HTB's quantum, and the unit of the sizes below. */
const FRAME_BYTES = 1514;
/** A class may send 10 ms of its rate at once, at least two full frames (HTB's own default is one tick of the rate plus one frame). */
const BURST_SECONDS = 0.01;
const MIN_BURST_BYTES = 2 * FRAME_BYTES;
/**
 * A limited peer's queue holds 100 ms of its rate (at least four frames, at most 8 MiB): enough for TCP to
 * keep the rate busy, and short enough that a full queue does not add seconds of latency, which the
 * default leaf (a FIFO of txqueuelen packets: 1,000 on a veth, about 6 s at 2 Mbit/s) would.
 */
const QUEUE_SECONDS = 0.1;
const MIN_QUEUE_BYTES = 4 * FRAME_BYTES;
const MAX_QUEUE_BYTES = 8 * 1024 * 1024;
const LOWEST_TWO_OCTETS = 0x10000;

/** Where a server's shaping lives: its namespace, its WireGuard interface (download) and the server end of its uplink veth (upload). */
export interface ShapingPlace {
  netns: string;
  wg: string;
  uplink: string;
}

/** A peer's limit: its bare IPv4 address and kbit/s; `kbps` is NaN when not known exactly (a step failed, or it was read back from the host). */
interface Limit {
  ip: string;
  kbps: number;
}

interface ClassState {
  /** As tc prints them, e.g. `2Mbit`. */
  rate: string;
  ceil: string;
  /** A qdisc of ours is attached (the default leaf is not listed). */
  leaf: boolean;
}

interface DeviceState {
  htbRoot: boolean;
  classes: Map<number, ClassState>;
}

interface ShapingState {
  table: 'ok' | 'damaged' | 'missing';
  /** Map entries: address → class id as nft prints it (`1:a`). */
  elements: Map<string, string>;
  wg: DeviceState;
  uplink: DeviceState;
}

/** One line of a `tc -batch`: the peer address it is for (null for a device's root), and an error it may meet without failing. */
interface BatchLine {
  text: string;
  ip: string | null;
  tolerate?: RegExp;
}

const EXISTS = /File exists|Exclusivity flag on/;
/** `tc qdisc show dev D root` when the root is ours. */
const HTB_ROOT = /^qdisc htb 1: root/m;
const MISSING = /No such file or directory|Cannot find specified class|not found/i;

/** The class minor id of a peer address: its low 16 bits. */
export function classMinor(ip: string): number {
  const octets = ip.split('.').map(Number);
  return ((octets[2] ?? 0) * 256 + (octets[3] ?? 0)) % LOWEST_TWO_OCTETS;
}

function classId(ip: string): string {
  return `1:${classMinor(ip).toString(16)}`;
}

/** A rate as tc prints it (iproute2's print_rate: 1000-based units, exact below 1 Gbit/s, whole Mbit/s above it when not round). */
export function printedRate(kbps: number): string {
  const units = ['', 'K', 'M', 'G', 'T'];
  let rate = kbps * 1000;
  let unit = 0;
  while (unit < units.length - 1 && rate >= 1000 && (rate % 1000 === 0 || rate >= 1_000_000)) {
    rate = Math.floor(rate / 1000);
    unit++;
  }
  return `${rate}${units[unit] ?? ''}bit`;
}

/** kbit/s of a rate tc printed, or NaN. */
export function parsePrintedRate(text: string): number {
  const match = /^(\d+(?:\.\d+)?)([KMGT]?)bit$/.exec(text);
  if (match === null) return Number.NaN;
  const power = ['', 'K', 'M', 'G', 'T'].indexOf(match[2] ?? '');
  return Math.round(Number(match[1]) * 1000 ** power) / 1000;
}

export function burstBytes(kbps: number): number {
  return Math.max(MIN_BURST_BYTES, Math.ceil((kbps * 1000 * BURST_SECONDS) / 8));
}

export function queueBytes(kbps: number): number {
  return Math.min(MAX_QUEUE_BYTES, Math.max(MIN_QUEUE_BYTES, Math.ceil((kbps * 1000 * QUEUE_SECONDS) / 8)));
}

/**
 * The limit to apply for a peer (its allowed ip as `wg` prints it, its limit checked by the driver):
 * null when it has none (0), else the limit or what is wrong with it. A limit needs a single IPv4
 * address whose class id is not the qdisc's own (minor 0).
 */
function limitOf(peer: PeerSpec): Limit | null | string {
  const kbps = peer.speedLimitKbps;
  if (kbps === 0) return null;
  const ip = /^(\d{1,3}(?:\.\d{1,3}){3})\/32$/.exec(peer.allowedIp)?.[1];
  if (ip === undefined) return `a speed limit needs a single IPv4 address, not ${peer.allowedIp}`;
  if (classMinor(ip) === 0) return `${ip} ends in .0.0, which has no class id of its own`;
  return { ip, kbps };
}

/** `tc class show dev D`: our classes (major 1) by minor. */
function parseClasses(stdout: string): Map<number, ClassState> {
  const classes = new Map<number, ClassState>();
  for (const line of stdout.split('\n')) {
    const match = /^class htb 1:([0-9a-f]+) (.*)$/.exec(line.trim());
    if (match === null) continue;
    const rest = match[2] ?? '';
    classes.set(parseInt(match[1] ?? '0', 16), {
      rate: /\brate (\S+)/.exec(rest)?.[1] ?? '',
      ceil: /\bceil (\S+)/.exec(rest)?.[1] ?? '',
      leaf: /\bleaf [0-9a-f]+:/.test(rest),
    });
  }
  return classes;
}

/** The two classifying chains: download by destination on the WireGuard interface, upload by source toward the uplink. */
function chainRules(place: ShapingPlace): Record<'forward' | 'output', string[]> {
  return {
    forward: [
      `oifname "${place.wg}" meta priority set ip daddr map @${MAP}`,
      `oifname "${place.uplink}" meta priority set ip saddr map @${MAP}`,
    ],
    // Packets the server namespace sends itself (e.g. replies to pings of its address).
    output: [`oifname "${place.wg}" meta priority set ip daddr map @${MAP}`],
  };
}

const CHAIN_HOOKS = {
  forward: 'type filter hook forward priority 0; policy accept;',
  output: 'type filter hook output priority 0; policy accept;',
} as const;

/** `nft list table ip vpnpanel_shape`: its map entries, and whether its chains hold exactly our rules. */
function parseTable(stdout: string, place: ShapingPlace): Pick<ShapingState, 'table' | 'elements'> {
  const elements = new Map<string, string>();
  if (!stdout.includes(`table ip ${SHAPING_TABLE} {`)) return { table: 'missing', elements };
  const mapBlock = new RegExp(`map ${MAP} \\{([\\s\\S]*?)\\n\\t\\}`).exec(stdout)?.[1];
  for (const match of (mapBlock ?? '').matchAll(/(\d+\.\d+\.\d+\.\d+) : ([0-9a-f]+:[0-9a-f]+)/g))
    elements.set(match[1] ?? '', match[2] ?? '');
  const expected = chainRules(place);
  const intact =
    mapBlock !== undefined &&
    (['forward', 'output'] as const).every((chain) => {
      const body = new RegExp(`chain ${chain} \\{([\\s\\S]*?)\\n\\t\\}`).exec(stdout)?.[1];
      const rules = (body ?? '')
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l !== '' && !l.startsWith('type '));
      return body !== undefined && JSON.stringify(rules) === JSON.stringify(expected[chain]);
    });
  return { table: intact ? 'ok' : 'damaged', elements };
}

function elementList(entries: Iterable<[string, string]>): string {
  return [...entries].map(([ip, id]) => `${ip} : ${id}`).join(', ');
}

/** An nft script that makes the table afresh (atomically replacing a damaged one) holding `elements`. */
function tableScript(place: ShapingPlace, elements: ReadonlyMap<string, string>): string {
  const rules = chainRules(place);
  const chain = (name: 'forward' | 'output') =>
    `  chain ${name} {\n    ${CHAIN_HOOKS[name]}\n${rules[name].map((r) => `    ${r}\n`).join('')}  }\n`;
  const entries = elements.size === 0 ? '' : `    elements = { ${elementList(elements)} }\n`;
  return (
    `table ip ${SHAPING_TABLE} {}\ndelete table ip ${SHAPING_TABLE}\n` +
    `table ip ${SHAPING_TABLE} {\n  map ${MAP} {\n    type ipv4_addr : classid\n${entries}  }\n${chain('forward')}${chain('output')}}\n`
  );
}

/** Creates the table, map and chains where missing and rewrites the chains' rules, keeping the map's entries. */
function ensureTableScript(place: ShapingPlace): string {
  const rules = chainRules(place);
  const lines = [`add table ip ${SHAPING_TABLE}`, `add map ip ${SHAPING_TABLE} ${MAP} { type ipv4_addr : classid; }`];
  for (const name of ['forward', 'output'] as const) {
    lines.push(
      `add chain ip ${SHAPING_TABLE} ${name} { ${CHAIN_HOOKS[name]} }`,
      `flush chain ip ${SHAPING_TABLE} ${name}`,
    );
    for (const rule of rules[name]) lines.push(`add rule ip ${SHAPING_TABLE} ${name} ${rule}`);
  }
  return `${lines.join('\n')}\n`;
}

function rootLine(dev: string, replace: boolean): BatchLine {
  // `add` leaves an existing root (and its classes) alone; `replace` swaps a root that is not ours.
  return replace
    ? { text: `qdisc replace dev ${dev} root handle 1: htb`, ip: null }
    : { text: `qdisc add dev ${dev} root handle 1: htb`, ip: null, tolerate: EXISTS };
}

function shapeLines(dev: string, limit: Limit): BatchLine[] {
  const id = classId(limit.ip);
  const rate = `${limit.kbps}kbit`;
  const burst = burstBytes(limit.kbps);
  // The queue's handle is the class minor (`1:2c` → `2c:`), as the kernel would run out of handles of
  // its own choosing (0x8000-0xffff) past 32,767 queues; minor 1 would be the root's, so it takes one.
  const minor = classMinor(limit.ip);
  const handle = minor === 1 ? '' : `handle ${minor.toString(16)}: `;
  return [
    {
      text: `class replace dev ${dev} parent 1: classid ${id} htb rate ${rate} ceil ${rate} burst ${burst} cburst ${burst} quantum ${FRAME_BYTES}`,
      ip: limit.ip,
    },
    { text: `qdisc replace dev ${dev} parent ${id} ${handle}bfifo limit ${queueBytes(limit.kbps)}`, ip: limit.ip },
  ];
}

function unshapeLine(dev: string, ip: string, tolerateMissing: boolean): BatchLine {
  return { text: `class del dev ${dev} classid ${classId(ip)}`, ip, tolerate: tolerateMissing ? MISSING : undefined };
}

/**
 * `tc -force -batch` goes on past a failed line and reports each as its message followed by
 * `Command failed -:N`: the messages by line number (1-based).
 */
function batchFailures(stderr: string): Map<number, string> {
  const failures = new Map<number, string>();
  let message: string[] = [];
  for (const line of stderr.split('\n')) {
    const failed = /^Command failed -:(\d+)$/.exec(line.trim());
    if (failed === null) {
      if (line.trim() !== '') message.push(line.trim());
      continue;
    }
    failures.set(Number(failed[1]), message.join(' | ') || 'failed');
    message = [];
  }
  return failures;
}

/**
 * Applies and reads speed limits through a CommandRunner. It remembers, per server, the limits it
 * applied by public key: changePeers names removed peers by key only, and the map is keyed by address.
 * setPeers re-reads the host and rebuilds this memory, so a lost or changed host state is repaired there.
 */
export class Shaper {
  readonly #runner: CommandRunner;
  readonly #known = new Map<number, Map<string, Limit>>();

  constructor(runner: CommandRunner) {
    this.#runner = runner;
  }

  /** Drops what is remembered of a server (it was taken down). */
  forget(serverId: number): void {
    this.#known.delete(serverId);
  }

  async #read(place: ShapingPlace): Promise<ShapingState> {
    const tc = (args: string[]): Promise<string> =>
      this.#runner.run('tc', ['-n', place.netns, ...args]).then(
        (r) => r.stdout,
        () => '',
      );
    const [table, wgRoot, wgClasses, uplinkRoot, uplinkClasses] = await Promise.all([
      this.#runner.run('nft', ['list', 'table', 'ip', SHAPING_TABLE], { netns: place.netns }).then(
        (r) => r.stdout,
        () => '',
      ),
      tc(['qdisc', 'show', 'dev', place.wg, 'root']),
      tc(['class', 'show', 'dev', place.wg]),
      tc(['qdisc', 'show', 'dev', place.uplink, 'root']),
      tc(['class', 'show', 'dev', place.uplink]),
    ]);
    const device = (root: string, classes: string): DeviceState => {
      const htbRoot = HTB_ROOT.test(root);
      return { htbRoot, classes: htbRoot ? parseClasses(classes) : new Map() };
    };
    return { ...parseTable(table, place), wg: device(wgRoot, wgClasses), uplink: device(uplinkRoot, uplinkClasses) };
  }

  /**
   * setPeers: makes the host's limits exactly those of `peers` (allowed ips as `wg` prints them), reading
   * what the host has and changing only the difference; the shaping of `keepIps` (peers left as they
   * are) is not touched.
   */
  async sync(
    serverId: number,
    place: ShapingPlace,
    peers: readonly PeerSpec[],
    keepIps: ReadonlySet<string>,
    failures: string[],
  ): Promise<void> {
    const want = new Map<string, Limit>();
    const byMinor = new Map<number, string>();
    for (const peer of [...peers].sort((a, b) => (a.publicKey < b.publicKey ? -1 : 1))) {
      const limit = limitOf(peer);
      if (typeof limit === 'string') failures.push(`peer ${peer.publicKey}: ${limit}`);
      if (limit === null || typeof limit === 'string') continue;
      const taken = byMinor.get(classMinor(limit.ip));
      if (taken !== undefined && taken !== limit.ip) {
        failures.push(`peer ${peer.publicKey}: ${limit.ip} has the class id of ${taken} (a subnet larger than /16)`);
        continue;
      }
      byMinor.set(classMinor(limit.ip), limit.ip);
      want.set(peer.publicKey, limit);
    }
    await this.#converge(serverId, place, await this.#read(place), want, keepIps, failures);
  }

  /**
   * up() after the interface or the veth was made again (their classes went with them): puts back
   * the limits of `peers` (public key → bare address) as remembered, or as the surviving half of the
   * host's state says.
   */
  async restore(
    serverId: number,
    place: ShapingPlace,
    peers: ReadonlyMap<string, string>,
    failures: string[],
  ): Promise<void> {
    const state = await this.#read(place);
    const known = this.#known.get(serverId);
    if (known === undefined && state.elements.size === 0) return;
    const want = new Map<string, Limit>();
    for (const [publicKey, ip] of peers) {
      const remembered = known?.get(publicKey);
      const kbps = remembered?.ip === ip && Number.isFinite(remembered.kbps) ? remembered.kbps : hostLimit(state, ip);
      if (kbps > 0) want.set(publicKey, { ip, kbps });
    }
    await this.#converge(serverId, place, state, want, new Set(), failures);
  }

  /**
   * The drift check: how the host's shaping differs from the limits of `peers` (allowed ips as `wg`
   * prints them), read without changing anything. A server with no limited peer, to which this process
   * applied none, is not read (its shaping costs nothing, its check neither).
   */
  async inspect(serverId: number, place: ShapingPlace, peers: readonly PeerSpec[]): Promise<string[]> {
    const want = new Map<string, number>();
    for (const peer of peers) {
      const limit = limitOf(peer);
      if (limit !== null && typeof limit !== 'string') want.set(limit.ip, limit.kbps);
    }
    if (want.size === 0 && (this.#known.get(serverId)?.size ?? 0) === 0) return [];
    const state = await this.#read(place);
    const found: string[] = [];
    if (state.table !== 'ok') found.push(`nft table ${SHAPING_TABLE} is ${state.table}`);
    const wantedMinors = new Set([...want.keys()].map(classMinor));
    for (const [dev, device] of [
      [place.wg, state.wg],
      [place.uplink, state.uplink],
    ] as const) {
      for (const [ip, kbps] of want) {
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
    for (const ip of want.keys()) {
      const entry = state.elements.get(ip);
      if (state.table === 'ok' && entry !== classId(ip)) found.push(`speed limit of ${ip}: no map entry`);
    }
    for (const ip of state.elements.keys()) if (!want.has(ip)) found.push(`map entry ${ip} is of no limited peer`);
    return found;
  }

  /**
   * changePeers: applies the limits of `upsert` and removes those of the keys in `remove`, touching
   * only peers whose limit differs from what was applied; reads nothing from the host unless this
   * process has not seen the server yet (`peersOnHost` then gives public key → allowed ip).
   */
  async change(
    serverId: number,
    place: ShapingPlace,
    upsert: readonly PeerSpec[],
    remove: readonly string[],
    peersOnHost: () => Promise<Map<string, string>>,
    failures: string[],
  ): Promise<void> {
    const known = this.#known.get(serverId) ?? (await this.#load(place, peersOnHost));
    this.#known.set(serverId, known);
    const unshape = new Set<string>();
    const shape = new Map<string, { limit: Limit; publicKey: string; hadElement: boolean }>();
    for (const key of remove) {
      const old = known.get(key);
      if (old !== undefined) unshape.add(old.ip);
      known.delete(key);
    }
    for (const peer of upsert) {
      const limit = limitOf(peer);
      if (typeof limit === 'string') {
        failures.push(`peer ${peer.publicKey}: ${limit}`);
        continue;
      }
      const old = known.get(peer.publicKey);
      if (old !== undefined && old.ip !== limit?.ip) unshape.add(old.ip);
      known.delete(peer.publicKey);
      if (limit === null) continue;
      const clash = [...known.values()].find(
        (other) => other.ip !== limit.ip && classMinor(other.ip) === classMinor(limit.ip),
      );
      if (clash !== undefined) {
        failures.push(`peer ${peer.publicKey}: ${limit.ip} has the class id of ${clash.ip} (a subnet larger than /16)`);
        continue;
      }
      known.set(peer.publicKey, limit);
      if (old?.ip === limit.ip && old.kbps === limit.kbps) continue;
      // A rate change of a peer whose map entry is in place needs tc alone.
      shape.set(limit.ip, {
        limit,
        publicKey: peer.publicKey,
        hadElement: old?.ip === limit.ip && Number.isFinite(old.kbps),
      });
    }
    for (const ip of shape.keys()) unshape.delete(ip);
    if (shape.size === 0 && unshape.size === 0) return;

    const lines: BatchLine[] = [];
    for (const dev of [place.wg, place.uplink]) {
      if (shape.size > 0) lines.push(rootLine(dev, false));
      for (const ip of unshape) lines.push(unshapeLine(dev, ip, true));
      for (const { limit } of shape.values()) lines.push(...shapeLines(dev, limit));
    }
    const failed = await this.#batch(place, lines, failures);
    const statements: string[] = [];
    // Adding first makes deleting an entry that is already gone succeed (nft 1.0.6 has no `destroy`).
    if (unshape.size > 0) {
      const entries = elementList([...unshape].map((ip): [string, string] => [ip, classId(ip)]));
      statements.push(
        `add element ip ${SHAPING_TABLE} ${MAP} { ${entries} }`,
        `delete element ip ${SHAPING_TABLE} ${MAP} { ${[...unshape].join(', ')} }`,
      );
    }
    const newEntries = [...shape.values()]
      .filter((s) => !s.hadElement)
      .map((s): [string, string] => [s.limit.ip, classId(s.limit.ip)]);
    if (newEntries.length > 0) statements.push(`add element ip ${SHAPING_TABLE} ${MAP} { ${elementList(newEntries)} }`);
    if (statements.length > 0) {
      const script = `${statements.join('\n')}\n`;
      // The table is made with the first limit; when it is missing or damaged, make it and try once more.
      const applied =
        (await this.#nft(place, script, null)) || (await this.#nft(place, ensureTableScript(place) + script, failures));
      if (!applied) for (const s of shape.values()) failed.add(s.limit.ip);
    }
    for (const { limit, publicKey } of shape.values())
      if (failed.has(limit.ip)) known.set(publicKey, { ip: limit.ip, kbps: Number.NaN });
  }

  /**
   * What the host says about the server's limited peers, when this process has not applied any yet
   * (the agent always runs setPeers first). Without an HTB root nothing is limited, and the peers need
   * not be read.
   */
  async #load(place: ShapingPlace, peersOnHost: () => Promise<Map<string, string>>): Promise<Map<string, Limit>> {
    const roots = await Promise.all(
      [place.wg, place.uplink].map((dev) =>
        this.#runner.run('tc', ['-n', place.netns, 'qdisc', 'show', 'dev', dev, 'root']).then(
          (r) => HTB_ROOT.test(r.stdout),
          () => false,
        ),
      ),
    );
    if (!roots.includes(true)) return new Map();
    const [state, peers] = await Promise.all([this.#read(place), peersOnHost().catch(() => new Map<string, string>())]);
    const known = new Map<string, Limit>();
    for (const [publicKey, allowedIp] of peers) {
      const ip = /^(\d+\.\d+\.\d+\.\d+)\/32$/.exec(allowedIp)?.[1];
      // Printed rates are rounded above 1 Gbit/s: NaN makes the next upsert apply its limit whatever it is.
      if (ip !== undefined && state.elements.has(ip)) known.set(publicKey, { ip, kbps: Number.NaN });
    }
    return known;
  }

  /** Makes the host hold exactly `want` (by public key), leaving `keepIps` alone, and remembers what it applied. */
  async #converge(
    serverId: number,
    place: ShapingPlace,
    state: ShapingState,
    want: ReadonlyMap<string, Limit>,
    keepIps: ReadonlySet<string>,
    failures: string[],
  ): Promise<void> {
    const previous = this.#known.get(serverId);
    const exact = new Map([...(previous?.values() ?? [])].map((l) => [l.ip, l.kbps]));
    const wanted = new Map([...want.values()].map((l) => [l.ip, l]));
    const wantedMinors = new Set([...wanted.keys()].map(classMinor));
    const keptMinors = new Set([...keepIps].map(classMinor));
    const devices = [
      [place.wg, state.wg],
      [place.uplink, state.uplink],
    ] as const;
    const failed = new Set<string>();

    if (wanted.size === 0 && !devices.some(([, d]) => [...keptMinors].some((m) => d.classes.has(m)))) {
      // Nothing limited: no shaping state at all, so unlimited servers pay nothing for it.
      const lines = devices
        .filter(([, d]) => d.htbRoot)
        .map(([dev]): BatchLine => ({ text: `qdisc del dev ${dev} root`, ip: null, tolerate: MISSING }));
      if (lines.length > 0) await this.#batch(place, lines, failures);
      if (state.table !== 'missing') await this.#nft(place, `delete table ip ${SHAPING_TABLE}\n`, failures);
      this.#known.set(serverId, new Map());
      return;
    }

    const lines: BatchLine[] = [];
    for (const [dev, device] of devices) {
      if (!device.htbRoot) lines.push(rootLine(dev, true));
      for (const minor of device.classes.keys()) {
        if (!wantedMinors.has(minor) && !keptMinors.has(minor))
          lines.push({ text: `class del dev ${dev} classid 1:${minor.toString(16)}`, ip: null, tolerate: MISSING });
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
        if (!same) lines.push(...shapeLines(dev, limit));
      }
    }
    if (lines.length > 0) for (const ip of await this.#batch(place, lines, failures)) failed.add(ip);

    if (state.table === 'ok') {
      const stale = [...state.elements]
        .filter(([ip, id]) => !keepIps.has(ip) && (!wanted.has(ip) || id !== classId(ip)))
        .map(([ip]) => ip);
      const missing = [...wanted.keys()].filter((ip) => state.elements.get(ip) !== classId(ip));
      const statements = [
        ...(stale.length > 0 ? [`delete element ip ${SHAPING_TABLE} ${MAP} { ${stale.join(', ')} }`] : []),
        ...(missing.length > 0
          ? [
              `add element ip ${SHAPING_TABLE} ${MAP} { ${elementList(missing.map((ip): [string, string] => [ip, classId(ip)]))} }`,
            ]
          : []),
      ];
      if (statements.length > 0 && !(await this.#nft(place, `${statements.join('\n')}\n`, failures)))
        for (const ip of missing) failed.add(ip);
    } else {
      const kept = [...state.elements].filter(([ip]) => keepIps.has(ip));
      const elements = new Map([...kept, ...[...wanted.keys()].map((ip): [string, string] => [ip, classId(ip)])]);
      if (!(await this.#nft(place, tableScript(place, elements), failures)))
        for (const ip of wanted.keys()) failed.add(ip);
    }
    this.#known.set(
      serverId,
      new Map([...want].map(([key, l]) => [key, failed.has(l.ip) ? { ip: l.ip, kbps: Number.NaN } : l])),
    );
  }

  /** Runs `lines` in one `tc -force -batch`; records every failure not tolerated; returns the addresses whose lines failed. */
  async #batch(place: ShapingPlace, lines: readonly BatchLine[], failures: string[]): Promise<Set<string>> {
    const failed = new Set<string>();
    try {
      await this.#runner.run('tc', ['-n', place.netns, '-force', '-batch', '-'], {
        input: `${lines.map((l) => l.text).join('\n')}\n`,
      });
      return failed;
    } catch (error) {
      const byLine = error instanceof CommandError ? batchFailures(error.stderr) : new Map<number, string>();
      if (byLine.size === 0) {
        failures.push(messageOf(error));
        for (const line of lines) if (line.ip !== null) failed.add(line.ip);
        return failed;
      }
      for (const [number, message] of byLine) {
        const line = lines[number - 1];
        if (line === undefined || line.tolerate?.test(message) === true) continue;
        failures.push(`${line.ip === null ? '' : `speed limit of ${line.ip}: `}\`tc ${line.text}\` failed: ${message}`);
        if (line.ip !== null) failed.add(line.ip);
      }
      return failed;
    }
  }

  /** Runs an nft script in the server's namespace (one transaction); false when it failed (recorded unless `failures` is null). */
  async #nft(place: ShapingPlace, script: string, failures: string[] | null): Promise<boolean> {
    try {
      await this.#runner.run('nft', ['-f', '-'], { netns: place.netns, input: script });
      return true;
    } catch (error) {
      failures?.push(messageOf(error));
      return false;
    }
  }
}

/** A peer's limit as the host holds it (class of its map entry on either device), 0 when none. */
function hostLimit(state: ShapingState, ip: string): number {
  if (state.elements.get(ip) !== classId(ip)) return 0;
  const minor = classMinor(ip);
  const rate = state.wg.classes.get(minor)?.rate ?? state.uplink.classes.get(minor)?.rate;
  const kbps = rate === undefined ? Number.NaN : parsePrintedRate(rate);
  return Number.isFinite(kbps) ? kbps : 0;
}
