/**
 * The text of speed limits (docs/dataplane.md, "Speed limits"): the tc batch lines and nft scripts that make and
 * change the shaping state, and the reading of what `tc` and `nft` print back. Pure functions: what runs them is
 * shaper.ts, what to change is plan.ts.
 *
 * Class ids are `1:<the low 16 bits of the peer's IPv4 address, in hex>`: unique within any subnet of /16
 * or smaller, and derived, so nothing has to be remembered to find a peer's class again.
 */

/** nft tables (`ip` and `ip6`) of the server namespace that hold the maps and the classifying chains. */
export const SHAPING_TABLE = 'vpnpanel_shape';
const MAP = 'limited';
/** The nft families of the two tables; each is also the keyword of its address match (`ip daddr`, `ip6 daddr`). */
export type Family = 'ip' | 'ip6';
export const FAMILIES: readonly Family[] = ['ip', 'ip6'];
const ADDRESS_TYPE: Record<Family, string> = { ip: 'ipv4_addr', ip6: 'ipv6_addr' };
/** The largest Ethernet frame without VLAN tag: HTB's quantum, and the unit of the sizes below. */
const FRAME_BYTES = 1514;
/**
 * A class may send 10 ms of its rate at once, at least two full frames (HTB's own default is one
 * tick of the rate plus one frame).
 */
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

/**
 * Where a server's shaping lives: its namespace, its WireGuard interface (download) and the server
 * end of its uplink veth (upload).
 */
export interface ShapingPlace {
  netns: string;
  wg: string;
  uplink: string;
}

export type TableState = 'ok' | 'damaged' | 'missing';

export interface ClassState {
  /** As tc prints them, e.g. `2Mbit`. */
  rate: string;
  ceil: string;
  /** A qdisc of ours is attached (the default leaf is not listed). */
  leaf: boolean;
}

export interface DeviceState {
  htbRoot: boolean;
  classes: Map<number, ClassState>;
}

export interface ShapingState {
  tables: Record<Family, TableState>;
  /** Entries of both maps: address → class id as nft prints it (`1:a`). */
  elements: Map<string, string>;
  wg: DeviceState;
  uplink: DeviceState;
}

/** What `nft list table` and `tc` printed for a server ('' where the command failed). */
export interface PrintedState {
  table4: string;
  table6: string;
  wgRoot: string;
  wgClasses: string;
  uplinkRoot: string;
  uplinkClasses: string;
}

/**
 * One line of a `tc -batch`: the peer address it is for (null for a device's root), and an error it
 * may meet without failing.
 */
export interface BatchLine {
  text: string;
  ip: string | null;
  tolerate?: RegExp;
}

const EXISTS = /File exists|Exclusivity flag on/;
/** `tc qdisc show dev D root` when the root is ours. */
export const HTB_ROOT = /^qdisc htb 1: root/m;
const MISSING = /No such file or directory|Cannot find specified class|not found/i;

/** The class minor id of a peer address: its low 16 bits. */
export function classMinor(ip: string): number {
  const octets = ip.split('.').map(Number);
  return ((octets[2] ?? 0) * 256 + (octets[3] ?? 0)) % LOWEST_TWO_OCTETS;
}

export function classId(ip: string): string {
  return `1:${classMinor(ip).toString(16)}`;
}

export function familyOf(address: string): Family {
  return address.includes(':') ? 'ip6' : 'ip';
}

/**
 * A rate as tc prints it (iproute2's print_rate: 1000-based units, exact below 1 Gbit/s, whole
 * Mbit/s above it when not round).
 */
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

/**
 * The two classifying chains of a family's table: download by destination on the WireGuard interface, upload by
 * source toward the uplink.
 */
function chainRules(place: ShapingPlace, family: Family): Record<'forward' | 'output', string[]> {
  return {
    forward: [
      `oifname "${place.wg}" meta priority set ${family} daddr map @${MAP}`,
      `oifname "${place.uplink}" meta priority set ${family} saddr map @${MAP}`,
    ],
    // Packets the server namespace sends itself (e.g. replies to pings of its address).
    output: [`oifname "${place.wg}" meta priority set ${family} daddr map @${MAP}`],
  };
}

const CHAIN_HOOKS = {
  forward: 'type filter hook forward priority 0; policy accept;',
  output: 'type filter hook output priority 0; policy accept;',
} as const;

/** `nft list table FAMILY vpnpanel_shape`: its map entries, and whether its chains hold exactly our rules. */
function parseTable(
  stdout: string,
  place: ShapingPlace,
  family: Family,
): { table: TableState; elements: Map<string, string> } {
  const elements = new Map<string, string>();
  if (!stdout.includes(`table ${family} ${SHAPING_TABLE} {`)) return { table: 'missing', elements };
  const mapBlock = new RegExp(`map ${MAP} \\{([\\s\\S]*?)\\n\\t\\}`).exec(stdout)?.[1];
  for (const match of (mapBlock ?? '').matchAll(/([0-9a-f:.]+) : ([0-9a-f]+:[0-9a-f]+)/g))
    elements.set(match[1] ?? '', match[2] ?? '');
  const expected = chainRules(place, family);
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

/** The shaping state of a server from what its reads printed; a device without our root has no classes of ours. */
export function parseState(place: ShapingPlace, printed: PrintedState): ShapingState {
  const device = (root: string, classes: string): DeviceState => {
    const htbRoot = HTB_ROOT.test(root);
    return { htbRoot, classes: htbRoot ? parseClasses(classes) : new Map() };
  };
  const [v4, v6] = [parseTable(printed.table4, place, 'ip'), parseTable(printed.table6, place, 'ip6')];
  return {
    tables: { ip: v4.table, ip6: v6.table },
    elements: new Map([...v4.elements, ...v6.elements]),
    wg: device(printed.wgRoot, printed.wgClasses),
    uplink: device(printed.uplinkRoot, printed.uplinkClasses),
  };
}

function elementList(entries: Iterable<[string, string]>): string {
  return [...entries].map(([ip, id]) => `${ip} : ${id}`).join(', ');
}

/**
 * An nft script that makes a family's table afresh (atomically replacing a damaged one) holding `elements`.
 */
export function tableScript(place: ShapingPlace, family: Family, elements: ReadonlyMap<string, string>): string {
  const rules = chainRules(place, family);
  const table = `${family} ${SHAPING_TABLE}`;
  const chain = (name: 'forward' | 'output') =>
    `  chain ${name} {\n    ${CHAIN_HOOKS[name]}\n${rules[name].map((r) => `    ${r}\n`).join('')}  }\n`;
  const entries = elements.size === 0 ? '' : `    elements = { ${elementList(elements)} }\n`;
  return (
    `table ${table} {}\ndelete table ${table}\n` +
    `table ${table} {\n  map ${MAP} {\n    type ${ADDRESS_TYPE[family]} : classid\n${entries}  }\n` +
    `${chain('forward')}${chain('output')}}\n`
  );
}

/**
 * Creates a family's table, map and chains where missing and rewrites the chains' rules, keeping the map's
 * entries.
 */
export function ensureTableScript(place: ShapingPlace, family: Family): string {
  const rules = chainRules(place, family);
  const table = `${family} ${SHAPING_TABLE}`;
  const lines = [`add table ${table}`, `add map ${table} ${MAP} { type ${ADDRESS_TYPE[family]} : classid; }`];
  for (const name of ['forward', 'output'] as const) {
    lines.push(`add chain ${table} ${name} { ${CHAIN_HOOKS[name]} }`, `flush chain ${table} ${name}`);
    for (const rule of rules[name]) lines.push(`add rule ${table} ${name} ${rule}`);
  }
  return `${lines.join('\n')}\n`;
}

export function deleteTableScript(family: Family): string {
  return `delete table ${family} ${SHAPING_TABLE}\n`;
}

/**
 * `add element` (or `delete element`, which takes addresses alone) statements for `entries`, one per family
 * that has some: IPv4 first.
 */
export function elementStatements(verb: 'add' | 'delete', entries: readonly [string, string][]): string[] {
  return FAMILIES.flatMap((family) => {
    const own = entries.filter(([address]) => familyOf(address) === family);
    if (own.length === 0) return [];
    const list = verb === 'add' ? elementList(own) : own.map(([address]) => address).join(', ');
    return [`${verb} element ${family} ${SHAPING_TABLE} ${MAP} { ${list} }`];
  });
}

export function rootLine(dev: string, replace: boolean): BatchLine {
  // `add` leaves an existing root (and its classes) alone; `replace` swaps a root that is not ours.
  return replace
    ? { text: `qdisc replace dev ${dev} root handle 1: htb`, ip: null }
    : { text: `qdisc add dev ${dev} root handle 1: htb`, ip: null, tolerate: EXISTS };
}

/** Deletes a device's root, and every class with it. */
export function rootDeleteLine(dev: string): BatchLine {
  return { text: `qdisc del dev ${dev} root`, ip: null, tolerate: MISSING };
}

/** The class of `ip` on `dev` at `kbps`, with its queue. */
export function shapeLines(dev: string, ip: string, kbps: number): BatchLine[] {
  const id = classId(ip);
  const rate = `${kbps}kbit`;
  const burst = burstBytes(kbps);
  // The queue's handle is the class minor (`1:2c` → `2c:`), as the kernel would run out of handles of
  // its own choosing (0x8000-0xffff) past 32,767 queues; minor 1 would be the root's, so it takes one.
  const minor = classMinor(ip);
  const handle = minor === 1 ? '' : `handle ${minor.toString(16)}: `;
  return [
    {
      text:
        `class replace dev ${dev} parent 1: classid ${id} htb rate ${rate} ceil ${rate} ` +
        `burst ${burst} cburst ${burst} quantum ${FRAME_BYTES}`,
      ip,
    },
    { text: `qdisc replace dev ${dev} parent ${id} ${handle}bfifo limit ${queueBytes(kbps)}`, ip },
  ];
}

export function unshapeLine(dev: string, ip: string, tolerateMissing: boolean): BatchLine {
  return { text: `class del dev ${dev} classid ${classId(ip)}`, ip, tolerate: tolerateMissing ? MISSING : undefined };
}

/** Deletes a class found on the host by its minor, of no peer this process knows. */
export function classDeleteLine(dev: string, minor: number): BatchLine {
  return { text: `class del dev ${dev} classid 1:${minor.toString(16)}`, ip: null, tolerate: MISSING };
}

/**
 * `tc -force -batch` goes on past a failed line and reports each as its message followed by
 * `Command failed -:N`: the messages by line number (1-based).
 */
export function batchFailures(stderr: string): Map<number, string> {
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
