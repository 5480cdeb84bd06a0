/**
 * The `wireguard` driver: each server is a network namespace (its "container") holding the WireGuard
 * interface, linked to the host (uplink) namespace by a veth pair, with NAT on both sides.
 *
 * The interface is created in the host namespace and then moved into the server's namespace, so its
 * UDP socket stays in the host namespace and clients reach it on the host's address with no DNAT
 * (docs/dataplane.md, "Measured facts" 4; the kernel module does the same with the namespace it was created in).
 * With wireguard-go the UAPI socket `/var/run/wireguard/IF.sock` is global, so every name this driver
 * makes on the host carries `namePrefix` and is unique per node.
 *
 * Every method reads the host's state first and changes only the difference, goes on past a failed
 * step and throws one DriverError listing every failure (docs/dataplane.md). Speed limits are HTB
 * classes and an nft map inside the server's namespace (shaping.ts); what clients may reach is nft
 * tables in the server's and the host namespace (isolation.ts).
 */
import { messageOf } from '../domain/errors.ts';
import { DriverError } from './driver.ts';
import type { CounterReading, Driver, PeerSpec, ServerSpec, ServerState } from './driver.ts';
import type { ChildHandle, CommandRunner, RunOptions } from './commands.ts';
import { KeyedQueue } from './keyed-queue.ts';
import { isValidKey, publicKeyOf } from '../domain/wireguard-keys.ts';
import { SPEED_LIMIT_MAX_KBPS } from '../domain/devices.ts';
import { Shaper, type ShapingPlace } from './shaping.ts';
import { type Cidr, ensureIsolation, isolationProblems } from './isolation.ts';
import type { IsolationPlace, IsolationPolicy } from './isolation.ts';

export type WireGuardImplementation = 'kernel' | 'wireguard-go';

export interface WireGuardDriverOptions {
  runner: CommandRunner;
  /** 1–4 characters, a letter first and last (so `prefix + serverId` never reads as another prefix's name). Default `vp`. */
  namePrefix?: string;
  /** The namespace the node treats as its host/uplink one; undefined = the process's own (root) namespace. */
  hostNetns?: string;
  /** Default: the kernel module when present, else wireguard-go (see detectImplementation). */
  implementation?: WireGuardImplementation;
  /** How long a fresh wireguard-go may take to answer on its UAPI socket. Default 3000. */
  readyTimeoutMs?: number;
  /** Destinations opened to clients although blocked by default (`NODE_ALLOW_CIDRS`; isolation.ts). */
  allowCidrs?: readonly Cidr[];
}

/** Peers per `wg set` argv: one call instead of one per peer (about 1 ms each), argv stays well under ARG_MAX. */
const PEERS_PER_WG_SET = 1000;
/** A DriverError lists at most this many failures; the rest are counted. */
const MAX_REPORTED_FAILURES = 20;
const READY_POLL_MS = 20;
/** nft table of a server's own namespace (one per namespace, so a fixed name). */
const SERVER_NFT_TABLE = 'vpnpanel';
const PREFIX_PATTERN = /^[a-z](?:[a-z0-9]{0,2}[a-z])?$/;
const MAX_NAME_CHARS = 15;
/** Third octets for the veth /30s in 169.254.0.0/16; 0 and 255 are reserved (RFC 3927), 169 and 170 hold cloud metadata services. */
const VETH_THIRD_OCTETS = Array.from({ length: 254 }, (_, i) => i + 1).filter((o) => o !== 169 && o !== 170);
const VETH_BLOCKS = VETH_THIRD_OCTETS.length * 64;
/** Keeps wireguard-go quiet except for errors, and stops it printing its "use the kernel module" banner. */
const WIREGUARD_GO_ENV = { LOG_LEVEL: 'error', WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD: '1' };

/** A server's names on the host: veth ends in the host and server namespaces, the host's nft table, the veth /30's two addresses. */
export interface Names {
  iface: string;
  netns: string;
  vethHost: string;
  vethServer: string;
  hostTable: string;
  /** The host's nft table of client isolation. */
  isolationTable: string;
  hostIp: string;
  serverIp: string;
}

/** `addrs`: IPv4 addresses as `a.b.c.d/len`. */
type Link = { up: boolean; mtu: number; addrs: string[] };
/** `allowedIps`: comma-separated, '' for none. */
type DumpPeer = { publicKey: string; allowedIps: string; lastHandshakeS: number; rxBytes: number; txBytes: number };
type Dump = { privateKey: string; listenPort: number; peers: DumpPeer[] };

/** What up() and down() read before changing anything. */
interface Snapshot {
  netnsExists: boolean;
  serverLinks: Map<string, Link>;
  hostLinks: Map<string, Link>;
  /** `GATEWAY DEV` of the server namespace's default route, '' when none. */
  defaultRoute: string;
  dump: Dump | null;
  serverTables: Set<string>;
  hostTables: Set<string>;
  serverForwarding: boolean;
  hostForwarding: boolean;
}

type Step = (cmd: string, args: readonly string[], opts?: RunOptions) => Promise<boolean>;

export class WireGuardDriver implements Driver {
  readonly kind = 'wireguard';
  readonly #runner: CommandRunner;
  readonly #prefix: string;
  readonly #hostNetns: string | undefined;
  readonly #readyTimeoutMs: number;
  #implementation: WireGuardImplementation | undefined;
  /** wireguard-go children this driver started, by server id. */
  readonly #children = new Map<number, ChildHandle>();
  /** One operation per server at a time. */
  readonly #serial = new KeyedQueue<number>();
  readonly #shaper: Shaper;
  readonly #allowCidrs: readonly Cidr[];

  constructor(options: WireGuardDriverOptions) {
    const prefix = options.namePrefix ?? 'vp';
    if (!PREFIX_PATTERN.test(prefix)) throw new Error(`namePrefix ${JSON.stringify(prefix)}: 1-4 of [a-z0-9], a letter first and last`);
    this.#runner = options.runner;
    this.#prefix = prefix;
    this.#hostNetns = options.hostNetns;
    this.#implementation = options.implementation;
    this.#readyTimeoutMs = options.readyTimeoutMs ?? 3000;
    this.#shaper = new Shaper(options.runner);
    this.#allowCidrs = options.allowCidrs ?? [];
  }

  /** Every host name of a server; throws when the id does not fit the 15-character limit. */
  names(serverId: number): Names {
    const maxDigits = MAX_NAME_CHARS - this.#prefix.length - 1;
    if (!Number.isSafeInteger(serverId) || serverId < 0 || String(serverId).length > maxDigits) {
      throw new DriverError(`server ${serverId}`, [`server id must be an integer of at most ${maxDigits} digits`]);
    }
    const iface = `${this.#prefix}${serverId}`;
    // A /30 per server so return traffic in the host namespace has one route per server.
    const block = serverId % VETH_BLOCKS;
    const base = `169.254.${VETH_THIRD_OCTETS[Math.floor(block / 64)] ?? 1}`;
    const lastOctet = (block % 64) * 4;
    return {
      iface,
      netns: `${this.#prefix}-s${serverId}`,
      vethHost: `${iface}h`,
      vethServer: `${iface}s`,
      hostTable: `vpnpanel_${iface}`,
      isolationTable: `vpnpanel_iso_${iface}`,
      hostIp: `${base}.${lastOctet + 1}`,
      serverIp: `${base}.${lastOctet + 2}`,
    };
  }

  up(spec: ServerSpec): Promise<ServerState> {
    return this.#serial.run(spec.serverId, () => this.#up(spec));
  }

  setPeers(serverId: number, peers: readonly PeerSpec[]): Promise<void> {
    return this.#serial.run(serverId, () => this.#setPeers(serverId, peers));
  }

  /** The interface's index is its instance: an interface made anew gets another one. */
  readCounters(serverId: number): Promise<CounterReading> {
    return this.#serial.run(serverId, async () => {
      const n = this.names(serverId);
      const [dump, link] = await Promise.all([this.#readDump(n), this.#runner.run('ip', ['-n', n.netns, '-o', 'link', 'show', 'dev', n.iface])]).catch(
        (error: unknown) => {
          throw new DriverError(`read counters of server ${serverId}`, [messageOf(error)]);
        },
      );
      const instance = /^(\d+):/.exec(link.stdout)?.[1] ?? '';
      return {
        instance,
        peers: dump.peers.map((p) => ({ publicKey: p.publicKey, rxBytes: p.rxBytes, txBytes: p.txBytes, lastHandshakeMs: p.lastHandshakeS * 1000 })),
      };
    });
  }

  down(serverId: number): Promise<void> {
    return this.#serial.run(serverId, () => this.#down(serverId));
  }

  /**
   * What differs between the server's client-isolation rules on the host and those `spec` asks for
   * (docs/dataplane.md, "Client isolation"); empty when they are as expected. Reads only: the next
   * up() puts them right.
   */
  async isolationProblems(spec: ServerSpec): Promise<string[]> {
    const [place, policy] = [this.#isolationPlace(spec), this.#isolationPolicy(spec)];
    return this.#serial.run(spec.serverId, () => isolationProblems(this.#runner, place, policy));
  }

  /**
   * The drift check: reads the interface, its peers, links, NAT tables and speed limits and lists what
   * differs from `spec` and `peers`; changes nothing. Costs a `wg show dump` (which metering reads every
   * second anyway), two `ip` and two `nft list tables`, and the shaper's reads only where a peer is limited.
   */
  inspect(spec: ServerSpec, peers: readonly PeerSpec[]): Promise<string[]> {
    return this.#serial.run(spec.serverId, async () => {
      const n = this.names(spec.serverId);
      const { desired, untouchable } = validPeers(peers);
      const [dump, links, serverTables, hostTables] = await Promise.all([
        this.#readDump(n).catch(() => null),
        this.#links(n.netns),
        this.#nftTables(n.netns),
        this.#nftTables(this.#hostNetns),
      ]);
      const found: string[] = [];
      if (dump === null) found.push(`interface ${n.iface} does not answer`);
      else {
        if (dump.listenPort !== spec.listenPort) {
          found.push(`interface ${n.iface} listens on ${dump.listenPort}, not ${spec.listenPort}`);
        }
        if (dump.privateKey !== spec.privateKey) found.push(`interface ${n.iface} has another private key`);
        const onHost = new Map(dump.peers.map((p) => [p.publicKey, p.allowedIps]));
        for (const [key, allowedIps] of onHost) {
          const want = desired.get(key);
          const shown = allowedIps || '(none)';
          if (want === undefined && !untouchable.has(key)) {
            found.push(`peer ${key} (${shown}) is on ${n.iface} but was not applied`);
          } else if (want !== undefined && want.allowedIp !== allowedIps) {
            found.push(`peer ${key} has allowed ips ${shown}, not ${want.allowedIp}`);
          }
        }
        for (const key of desired.keys()) if (!onHost.has(key)) found.push(`peer ${key} is missing from ${n.iface}`);
      }
      const iface = links.get(n.iface);
      if (iface === undefined) found.push(`link ${n.iface} is missing from namespace ${n.netns}`);
      else {
        const addresses = iface.addrs.join(',');
        if (!iface.up) found.push(`link ${n.iface} is down`);
        if (iface.mtu !== spec.mtu) found.push(`link ${n.iface} has MTU ${iface.mtu}, not ${spec.mtu}`);
        if (addresses !== spec.address) {
          found.push(`link ${n.iface} has addresses ${addresses || '(none)'}, not ${spec.address}`);
        }
      }
      const veth = links.get(n.vethServer);
      if (veth === undefined || !veth.up || !veth.addrs.includes(`${n.serverIp}/30`)) {
        found.push(`uplink ${n.vethServer} is missing, down or without its address`);
      }
      if (!serverTables.has(`ip ${SERVER_NFT_TABLE}`)) {
        found.push(`nft table ${SERVER_NFT_TABLE} is missing from namespace ${n.netns}`);
      }
      if (!hostTables.has(`ip ${n.hostTable}`)) {
        found.push(`nft table ${n.hostTable} is missing from the host namespace`);
      }
      found.push(...(await this.#shaper.inspect(spec.serverId, this.#place(n), [...desired.values()])));
      found.push(...(await isolationProblems(this.#runner, this.#isolationPlace(spec), this.#isolationPolicy(spec))));
      return collapse(found);
    });
  }

  async list(): Promise<number[]> {
    const [namespaces, hostLinks] = await Promise.all([this.#netnsNames(), this.#links(this.#hostNetns)]);
    const ids = new Set<number>();
    const pattern = new RegExp(`^${this.#prefix}(?:-s)?(\\d+)[hs]?$`);
    for (const name of [...namespaces, ...hostLinks.keys()]) {
      const digits = pattern.exec(name)?.[1];
      if (digits !== undefined) ids.add(Number(digits));
    }
    return [...ids].sort((a, b) => a - b);
  }

  /** Read from the host namespace itself (not #links, which takes a failed read for no links). */
  async hostNetworks(): Promise<string[]> {
    const { stdout } = await this.#runner.run('ip', [...this.#hostIp(), '-j', 'addr', 'show']);
    return parseInterfaceNetworks(stdout);
  }

  /** Stops every wireguard-go child this driver started, leaving the servers' namespaces for down(). */
  async close(): Promise<void> {
    await Promise.all([...this.#children.values()].map((c) => c.stop()));
    this.#children.clear();
  }

  async #up(spec: ServerSpec): Promise<ServerState> {
    const action = `up server ${spec.serverId}`;
    const invalid = specProblems(spec);
    if (invalid.length > 0) throw new DriverError(action, invalid);
    const n = this.names(spec.serverId);
    const failures: string[] = [];
    const run = this.#stepper(failures);
    const snap = await this.#snapshot(n);
    if (!snap.netnsExists && !(await run('ip', ['netns', 'add', n.netns]))) throw new DriverError(action, failures);
    // Before the interface, so no client of a new interface ever passes unfiltered.
    await ensureIsolation(this.#runner, this.#isolationPlace(spec), this.#isolationPolicy(spec), failures);

    const iface = snap.serverLinks.get(n.iface);
    const dump = snap.dump;
    let peerCount = dump?.peers.length ?? 0;
    // wireguard-go learns the MTU only in the namespace it runs in, and the port belongs to the
    // host namespace's socket: a change to either means a new interface (peers are put back).
    const recreate = iface === undefined || dump === null || dump.listenPort !== spec.listenPort || iface.mtu !== spec.mtu;
    if (recreate) {
      peerCount = await this.#createInterface(spec, n, snap, dump?.peers ?? [], failures);
    } else {
      const wgNetns = await this.#wgNetns(n);
      if (dump.privateKey !== spec.privateKey) {
        await run('wg', ['set', n.iface, 'private-key', '/dev/stdin'], { input: `${spec.privateKey}\n`, netns: wgNetns });
      }
      for (const extra of iface.addrs.filter((a) => a !== spec.address)) await run('ip', ['-n', n.netns, 'addr', 'del', extra, 'dev', n.iface]);
      if (!iface.addrs.includes(spec.address)) await run('ip', ['-n', n.netns, 'addr', 'add', spec.address, 'dev', n.iface]);
      if (!iface.up) await run('ip', ['-n', n.netns, 'link', 'set', n.iface, 'up']);
    }
    const vethMade = await this.#ensureUplink(n, snap, run);
    // A new interface or veth has none of the classes its peers' speed limits had.
    if ((recreate || vethMade) && (dump?.peers.length ?? 0) > 0) {
      const peers = new Map((dump?.peers ?? []).flatMap((p) => singleIps(p.allowedIps).map((ip): [string, string] => [p.publicKey, ip])));
      await this.#shaper.restore(spec.serverId, this.#place(n), peers, failures);
    }
    if (failures.length > 0) throw new DriverError(action, collapse(failures));
    const { serverId, listenPort, address, mtu } = spec;
    return { serverId, listenPort, address, mtu, publicKey: publicKeyOf(spec.privateKey), peerCount };
  }

  /** Makes the interface from scratch (removing a stale one); returns how many peers it has. */
  async #createInterface(spec: ServerSpec, n: Names, snap: Snapshot, restore: readonly DumpPeer[], failures: string[]): Promise<number> {
    const run = this.#stepper(failures);
    const earlierAnswered = snap.dump !== null && !this.#children.has(spec.serverId);
    if (snap.serverLinks.has(n.iface)) await run('ip', ['-n', n.netns, 'link', 'del', n.iface]);
    if (snap.hostLinks.has(n.iface)) await run('ip', [...this.#hostIp(), 'link', 'del', n.iface]);
    await this.#children.get(spec.serverId)?.stop();
    const implementation = await this.#resolveImplementation();
    const created =
      implementation === 'kernel'
        ? await run('ip', [...this.#hostIp(), 'link', 'add', n.iface, 'type', 'wireguard'])
        : await this.#startWireGuardGo(spec.serverId, n, earlierAnswered, failures);
    // Each of these needs the one before; past a failure the rest would only fail too.
    if (!created) return 0;
    if (!(await run('ip', [...this.#hostIp(), 'link', 'set', n.iface, 'mtu', String(spec.mtu)]))) return 0;
    if (!(await run('ip', [...this.#hostIp(), 'link', 'set', n.iface, 'netns', n.netns]))) return 0;
    const keyInput = { input: `${spec.privateKey}\n`, netns: await this.#wgNetns(n) };
    await run('wg', ['set', n.iface, 'private-key', '/dev/stdin', 'listen-port', String(spec.listenPort)], keyInput);
    await run('ip', ['-n', n.netns, 'addr', 'add', spec.address, 'dev', n.iface]);
    await run('ip', ['-n', n.netns, 'link', 'set', n.iface, 'up']);
    const before = failures.length;
    await this.#applyPeers(n, [], restore, failures);
    return failures.length === before ? restore.length : 0;
  }

  async #startWireGuardGo(serverId: number, n: Names, earlierAnswered: boolean, failures: string[]): Promise<boolean> {
    const answers = (): Promise<boolean> => this.#runner.run('wg', ['show', n.iface, 'listen-port']).then(() => true, () => false);
    // An earlier agent's wireguard-go exits when its interface is deleted and then unlinks its socket
    // path, which would take a new one's socket with it: wait until it is gone.
    if (earlierAnswered && !(await this.#poll(async () => !(await answers())))) {
      failures.push(`an earlier wireguard-go of ${n.iface} still answers after ${this.#readyTimeoutMs} ms`);
      return false;
    }
    const child = this.#runner.start('wireguard-go', ['-f', n.iface], { netns: this.#hostNetns, env: WIREGUARD_GO_ENV });
    this.#children.set(serverId, child);
    let exited = false;
    let how = '';
    void child.exited.then((result) => {
      exited = true;
      how = result.signal === null ? `code ${result.code ?? 'none'}` : `signal ${result.signal}`;
      // If it dies the interface goes with it; the next up() (the agent's reconcile) makes both again.
      if (this.#children.get(serverId) === child) this.#children.delete(serverId);
    });
    if ((await this.#poll(async () => exited || (await answers()))) && !exited) return true;
    if (exited) failures.push(`wireguard-go ${n.iface} exited at start (${how}): ${child.stderrTail() || 'no message'}`);
    else {
      failures.push(`wireguard-go ${n.iface} did not answer within ${this.#readyTimeoutMs} ms`);
      await child.stop();
    }
    return false;
  }

  /** Calls `check` every READY_POLL_MS until it is true (→ true) or readyTimeoutMs passed (→ false). */
  async #poll(check: () => Promise<boolean>): Promise<boolean> {
    const deadlineMs = Date.now() + this.#readyTimeoutMs;
    for (;;) {
      if (await check()) return true;
      if (Date.now() > deadlineMs) return false;
      await new Promise((resolve) => setTimeout(resolve, READY_POLL_MS));
    }
  }

  /** veth to the host, default route, forwarding and NAT: add what is missing. True when it made the veth. */
  async #ensureUplink(n: Names, snap: Snapshot, run: Step): Promise<boolean> {
    const absent: Link = { up: false, mtu: 0, addrs: [] };
    if (!(snap.serverLinks.get('lo')?.up ?? false)) await run('ip', ['-n', n.netns, 'link', 'set', 'lo', 'up']);
    let vethServer = snap.serverLinks.get(n.vethServer);
    let vethHost = snap.hostLinks.get(n.vethHost);
    const vethMissing = vethServer === undefined || vethHost === undefined;
    if (vethMissing) {
      // Deleting either end of a veth deletes both: only a half-moved pair leaves one behind.
      if (vethServer !== undefined) await run('ip', ['-n', n.netns, 'link', 'del', n.vethServer]);
      if (vethHost !== undefined) await run('ip', [...this.#hostIp(), 'link', 'del', n.vethHost]);
      const made = await run('ip', [...this.#hostIp(), 'link', 'add', n.vethHost, 'type', 'veth', 'peer', 'name', n.vethServer, 'netns', n.netns]);
      vethServer = made ? absent : undefined;
      vethHost = made ? absent : undefined;
    }
    if (vethHost !== undefined) {
      if (!vethHost.addrs.includes(`${n.hostIp}/30`)) await run('ip', [...this.#hostIp(), 'addr', 'add', `${n.hostIp}/30`, 'dev', n.vethHost]);
      if (!vethHost.up) await run('ip', [...this.#hostIp(), 'link', 'set', n.vethHost, 'up']);
    }
    if (vethServer !== undefined) {
      if (!vethServer.addrs.includes(`${n.serverIp}/30`)) await run('ip', ['-n', n.netns, 'addr', 'add', `${n.serverIp}/30`, 'dev', n.vethServer]);
      if (!vethServer.up) await run('ip', ['-n', n.netns, 'link', 'set', n.vethServer, 'up']);
      if (snap.defaultRoute !== `${n.hostIp} ${n.vethServer}`) {
        await run('ip', ['-n', n.netns, 'route', 'replace', 'default', 'via', n.hostIp, 'dev', n.vethServer]);
      }
    }
    if (!snap.serverForwarding) await run('sysctl', ['-w', 'net.ipv4.ip_forward=1'], { netns: n.netns });
    if (!snap.hostForwarding) await run('sysctl', ['-w', 'net.ipv4.ip_forward=1'], { netns: this.#hostNetns });
    // Clients leave their namespace as the veth's address, and the host as its uplink's address.
    if (!snap.serverTables.has(`ip ${SERVER_NFT_TABLE}`)) {
      await run('nft', ['-f', '-'], { netns: n.netns, input: nftTable(SERVER_NFT_TABLE, `oifname "${n.vethServer}" masquerade`) });
    }
    if (!snap.hostTables.has(`ip ${n.hostTable}`)) {
      await run('nft', ['-f', '-'], { netns: this.#hostNetns, input: nftTable(n.hostTable, `ip saddr ${n.serverIp} oifname != "${n.vethHost}" masquerade`) });
    }
    return vethMissing;
  }

  changePeers(serverId: number, upsert: readonly PeerSpec[], remove: readonly string[]): Promise<void> {
    return this.#serial.run(serverId, async () => {
      const n = this.names(serverId);
      const { desired, untouchable, failures } = validPeers(upsert);
      const removes = remove.filter((k) => !desired.has(k) && !untouchable.has(k));
      const adds = [...desired.values()].map((p) => ({ publicKey: p.publicKey, allowedIps: p.allowedIp }));
      await this.#applyPeers(n, removes, adds, failures);
      const peersOnHost = async () => new Map((await this.#readDump(n)).peers.map((p): [string, string] => [p.publicKey, p.allowedIps]));
      await this.#shaper.change(serverId, this.#place(n), [...desired.values()], removes, peersOnHost, failures);
      if (failures.length > 0) throw new DriverError(`change peers of server ${serverId}`, collapse(failures));
    });
  }

  async #setPeers(serverId: number, peers: readonly PeerSpec[]): Promise<void> {
    const action = `set peers of server ${serverId}`;
    const n = this.names(serverId);
    const { desired, untouchable, failures } = validPeers(peers);
    let dump: Dump;
    try {
      dump = await this.#readDump(n);
    } catch (error) {
      throw new DriverError(action, [messageOf(error), ...failures]);
    }
    const current = new Map(dump.peers.map((p) => [p.publicKey, p.allowedIps]));
    const removes = [...current.keys()].filter((k) => !desired.has(k) && !untouchable.has(k)).sort();
    const adds = [...desired.values()]
      .filter((p) => current.get(p.publicKey) !== p.allowedIp)
      .sort((a, b) => (a.publicKey < b.publicKey ? -1 : a.publicKey > b.publicKey ? 1 : 0))
      .map((p) => ({ publicKey: p.publicKey, allowedIps: p.allowedIp }));
    await this.#applyPeers(n, removes, adds, failures);
    // Peers left as they are keep their limits too.
    const keepIps = new Set(dump.peers.filter((p) => untouchable.has(p.publicKey)).flatMap((p) => singleIps(p.allowedIps)));
    await this.#shaper.sync(serverId, this.#place(n), [...desired.values()], keepIps, failures);
    if (failures.length > 0) throw new DriverError(action, collapse(failures));
  }

  /**
   * Removes, then adds or changes, in multi-peer `wg set` calls (removals first, so an address freed
   * by one peer is not taken back from the peer it moved to). A failed call is retried peer by peer,
   * so one bad peer does not block the others, and each failing peer is reported.
   */
  async #applyPeers(n: Names, removes: readonly string[], adds: readonly { publicKey: string; allowedIps: string }[], failures: string[]): Promise<void> {
    const wgNetns = await this.#wgNetns(n);
    const batches: string[][][] = [
      chunk(removes, PEERS_PER_WG_SET).map((keys) => keys.map((k) => ['peer', k, 'remove'])),
      chunk(adds, PEERS_PER_WG_SET).map((list) => list.map((p) => ['peer', p.publicKey, 'allowed-ips', p.allowedIps])),
    ].flat();
    for (const batch of batches) {
      try {
        await this.#runner.run('wg', ['set', n.iface, ...batch.flat()], { netns: wgNetns });
      } catch (error) {
        if (batch.length === 1) {
          failures.push(`peer ${batch[0]?.[1] ?? '?'}: ${messageOf(error)}`);
          continue;
        }
        for (const peerArgs of batch) {
          try {
            await this.#runner.run('wg', ['set', n.iface, ...peerArgs], { netns: wgNetns });
          } catch (single) {
            failures.push(`peer ${peerArgs[1] ?? '?'}: ${messageOf(single)}`);
          }
        }
      }
    }
  }

  async #down(serverId: number): Promise<void> {
    const n = this.names(serverId);
    const failures: string[] = [];
    const run = this.#stepper(failures);
    // Stopping wireguard-go first lets it close its interface and remove its UAPI socket itself.
    await this.#children.get(serverId)?.stop();
    this.#children.delete(serverId);
    this.#shaper.forget(serverId);
    const namespaces = await this.#netnsNames();
    const netnsExists = namespaces.includes(n.netns);
    const [serverLinks, hostLinks, hostTables] = await Promise.all([
      netnsExists ? this.#links(n.netns) : new Map<string, Link>(),
      this.#links(this.#hostNetns),
      this.#nftTables(this.#hostNetns),
    ]);
    // Deleting the interface makes a wireguard-go this driver did not start (an earlier agent's) exit.
    if (serverLinks.has(n.iface)) await run('ip', ['-n', n.netns, 'link', 'del', n.iface]);
    if (hostLinks.has(n.iface)) await run('ip', [...this.#hostIp(), 'link', 'del', n.iface]);
    if (hostLinks.has(n.vethHost)) await run('ip', [...this.#hostIp(), 'link', 'del', n.vethHost]);
    if (hostTables.has(`ip ${n.hostTable}`)) await run('nft', ['delete', 'table', 'ip', n.hostTable], { netns: this.#hostNetns });
    if (hostTables.has(`inet ${n.isolationTable}`)) {
      await run('nft', ['delete', 'table', 'inet', n.isolationTable], { netns: this.#hostNetns });
    }
    if (netnsExists) await run('ip', ['netns', 'del', n.netns]);
    if (failures.length > 0) throw new DriverError(`down server ${serverId}`, collapse(failures));
  }

  async #snapshot(n: Names): Promise<Snapshot> {
    const netnsExists = (await this.#netnsNames()).includes(n.netns);
    const none = <T>(value: T): Promise<T> => Promise.resolve(value);
    const [serverLinks, hostLinks, defaultRoute, dump, serverTables, hostTables, serverForwarding, hostForwarding] = await Promise.all([
      netnsExists ? this.#links(n.netns) : none(new Map<string, Link>()),
      this.#links(this.#hostNetns),
      netnsExists ? this.#defaultRoute(n.netns) : none(''),
      netnsExists ? this.#readDump(n).catch(() => null) : none(null),
      netnsExists ? this.#nftTables(n.netns) : none(new Set<string>()),
      this.#nftTables(this.#hostNetns),
      netnsExists ? this.#forwarding(n.netns) : none(false),
      this.#forwarding(this.#hostNetns),
    ]);
    return { netnsExists, serverLinks, hostLinks, defaultRoute, dump, serverTables, hostTables, serverForwarding, hostForwarding };
  }

  async #readDump(n: Names): Promise<Dump> {
    const { stdout } = await this.#runner.run('wg', ['show', n.iface, 'dump'], { netns: await this.#wgNetns(n) });
    return parseDump(stdout);
  }

  async #netnsNames(): Promise<string[]> {
    const { stdout } = await this.#runner.run('ip', ['netns', 'list']);
    return parseNetnsList(stdout);
  }

  /** Links of a namespace by name; empty when it cannot be read (a missing namespace). */
  async #links(netns: string | undefined): Promise<Map<string, Link>> {
    const args = netns === undefined ? ['-j', 'addr', 'show'] : ['-n', netns, '-j', 'addr', 'show'];
    return this.#runner.run('ip', args).then((r) => parseIpAddrJson(r.stdout), () => new Map<string, Link>());
  }

  async #defaultRoute(netns: string): Promise<string> {
    return this.#runner.run('ip', ['-n', netns, '-j', 'route', 'show', 'default']).then((r) => parseDefaultRoute(r.stdout), () => '');
  }

  async #nftTables(netns: string | undefined): Promise<Set<string>> {
    return this.#runner.run('nft', ['list', 'tables'], { netns }).then(
      (r) => new Set(r.stdout.split('\n').map((l) => l.trim().replace(/^table /, '')).filter((l) => l !== '')),
      () => new Set<string>(),
    );
  }

  async #forwarding(netns: string | undefined): Promise<boolean> {
    return this.#runner.run('sysctl', ['-n', 'net.ipv4.ip_forward'], { netns }).then((r) => r.stdout.trim() === '1', () => false);
  }

  /** Where the server's speed limits live: WireGuard interface (download) and uplink veth (upload), in its namespace. */
  #place(n: Names): ShapingPlace {
    return { netns: n.netns, wg: n.iface, uplink: n.vethServer };
  }

  #isolationPlace(spec: ServerSpec): IsolationPlace {
    const n = this.names(spec.serverId);
    const serverIp = spec.address.split('/')[0] ?? '';
    const hostTable = n.isolationTable;
    return { serverNetns: n.netns, wg: n.iface, serverIp, hostNetns: this.#hostNetns, vethHost: n.vethHost, hostTable };
  }

  #isolationPolicy(spec: ServerSpec): IsolationPolicy {
    const { clientToClient = false, dnsOnServer = false } = spec;
    return { clientToClient, dnsOnServer, allow: this.#allowCidrs };
  }

  /** `ip` arguments that address the host namespace. */
  #hostIp(): string[] {
    return this.#hostNetns === undefined ? [] : ['-n', this.#hostNetns];
  }

  /** Where `wg` must run: kernel WireGuard is per namespace (netlink); wireguard-go's UAPI socket is global, and plain `wg` is faster. */
  async #wgNetns(n: Names): Promise<string | undefined> {
    return (await this.#resolveImplementation()) === 'kernel' ? n.netns : undefined;
  }

  async #resolveImplementation(): Promise<WireGuardImplementation> {
    this.#implementation ??= (await detectImplementation(this.#runner)) ?? 'wireguard-go';
    return this.#implementation;
  }

  /** A step runner that records a failure and returns false instead of throwing. */
  #stepper(failures: string[]): Step {
    return async (cmd, args, opts) => {
      try {
        await this.#runner.run(cmd, args, opts);
        return true;
      } catch (error) {
        failures.push(messageOf(error));
        return false;
      }
    };
  }
}

/**
 * Peers that can be applied, by key, with their allowed ip as `wg` prints it; the keys of invalid or
 * contradictory entries, which are left as they are on the host (limits included) rather than
 * removed; and what was wrong with each.
 */
function validPeers(peers: readonly PeerSpec[]): { desired: Map<string, PeerSpec>; untouchable: Set<string>; failures: string[] } {
  const failures: string[] = [];
  const desired = new Map<string, PeerSpec>();
  const untouchable = new Set<string>();
  for (const peer of peers) {
    const allowedIp = canonicalCidr(peer.allowedIp);
    const kbps = peer.speedLimitKbps;
    const earlier = desired.get(peer.publicKey);
    if (!isValidKey(peer.publicKey)) failures.push(`peer ${JSON.stringify(peer.publicKey)}: not a WireGuard public key`);
    else if (allowedIp === null) {
      failures.push(`peer ${peer.publicKey}: allowed ip ${JSON.stringify(peer.allowedIp)} is not an address/prefix`);
      untouchable.add(peer.publicKey);
    } else if (!Number.isInteger(kbps) || kbps < 0 || kbps > SPEED_LIMIT_MAX_KBPS) {
      failures.push(`peer ${peer.publicKey}: speed limit ${kbps} is not 0-${SPEED_LIMIT_MAX_KBPS} kbit/s`);
      untouchable.add(peer.publicKey);
    } else if (earlier !== undefined && (earlier.allowedIp !== allowedIp || earlier.speedLimitKbps !== kbps)) {
      failures.push(`peer ${peer.publicKey}: listed twice with different addresses or speed limits`);
      untouchable.add(peer.publicKey);
    } else desired.set(peer.publicKey, { publicKey: peer.publicKey, allowedIp, speedLimitKbps: kbps });
  }
  for (const key of untouchable) desired.delete(key);
  return { desired, untouchable, failures };
}

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
  const missing = (['CAP_NET_ADMIN', 'CAP_SYS_ADMIN'] as const).filter((name) => ((caps >> CAPABILITY_BITS[name]) & 1n) === 0n);
  if (missing.length > 0) return { ok: false, reason: `needs root or ${missing.join(' and ')} (commands the agent runs lack them)` };
  for (const [tool, flag, pkg] of [['ip', '-V', 'iproute2'], ['wg', '--version', 'wireguard-tools'], ['nft', '--version', 'nftables']] as const) {
    if (!(await runner.run(tool, [flag]).then(() => true, () => false))) return { ok: false, reason: `\`${tool}\` not found (install ${pkg})` };
  }
  const implementation = await detectImplementation(runner);
  if (implementation === null) return { ok: false, reason: 'no kernel WireGuard module and no `wireguard-go` (install wireguard-go)' };
  return { ok: true, implementation };
}

/** The kernel module when it is loaded or loads, else wireguard-go when installed, else null. */
export async function detectImplementation(runner: CommandRunner): Promise<WireGuardImplementation | null> {
  const ok = (cmd: string, args: readonly string[]): Promise<boolean> => runner.run(cmd, args).then(() => true, () => false);
  if ((await ok('test', ['-d', '/sys/module/wireguard'])) || (await ok('modprobe', ['-q', 'wireguard']))) return 'kernel';
  return (await ok('wireguard-go', ['--version'])) ? 'wireguard-go' : null;
}

/** `wg show IF dump`: the interface line, then one line per peer, tab-separated. */
export function parseDump(stdout: string): Dump {
  const lines = stdout.split('\n').filter((l) => l !== '');
  const head = lines[0]?.split('\t') ?? [];
  if (head.length < 4) throw new Error(`unexpected \`wg show dump\` output: ${JSON.stringify(stdout.slice(0, 200))}`);
  const peers = lines.slice(1).map((line) => {
    const f = line.split('\t');
    const allowed = f[3] ?? '';
    return {
      publicKey: f[0] ?? '',
      allowedIps: allowed === '(none)' ? '' : allowed,
      lastHandshakeS: Number(f[4] ?? 0) || 0,
      rxBytes: Number(f[5] ?? 0) || 0,
      txBytes: Number(f[6] ?? 0) || 0,
    };
  });
  return { privateKey: head[0] ?? '', listenPort: Number(head[2]), peers };
}

/** `ip netns list` prints `name` or `name (id: N)` per line. */
export function parseNetnsList(stdout: string): string[] {
  return stdout
    .split('\n')
    .map((l) => l.trim().split(/\s+/)[0] ?? '')
    .filter((l) => l !== '');
}

/** `ip -j addr show` → links by name with their IPv4 addresses. */
export function parseIpAddrJson(stdout: string): Map<string, Link> {
  const links = new Map<string, Link>();
  const parsed: unknown = stdout.trim() === '' ? [] : JSON.parse(stdout);
  for (const item of Array.isArray(parsed) ? parsed : []) {
    if (!isRecord(item) || typeof item.ifname !== 'string') continue;
    const flags = Array.isArray(item.flags) ? item.flags : [];
    const addrs = (Array.isArray(item.addr_info) ? item.addr_info : []).flatMap((a: unknown) =>
      isRecord(a) && a.family === 'inet' && typeof a.local === 'string' ? [`${a.local}/${String(a.prefixlen)}`] : [],
    );
    links.set(item.ifname, { up: flags.includes('UP'), mtu: typeof item.mtu === 'number' ? item.mtu : 0, addrs });
  }
  return links;
}

/** `ip -j addr show` → every IPv4 and IPv6 address with its prefix, e.g. `192.0.2.2/24`, `fd00::2/64`. */
export function parseInterfaceNetworks(stdout: string): string[] {
  const parsed: unknown = stdout.trim() === '' ? [] : JSON.parse(stdout);
  const addresses = (Array.isArray(parsed) ? parsed : []).flatMap((item: unknown) =>
    isRecord(item) && Array.isArray(item.addr_info) ? item.addr_info : [],
  );
  return addresses.flatMap((a: unknown) => {
    if (!isRecord(a) || (a.family !== 'inet' && a.family !== 'inet6')) return [];
    return typeof a.local === 'string' && typeof a.prefixlen === 'number' ? [`${a.local}/${a.prefixlen}`] : [];
  });
}

function parseDefaultRoute(stdout: string): string {
  const parsed: unknown = stdout.trim() === '' ? [] : JSON.parse(stdout);
  const route = (Array.isArray(parsed) ? parsed : []).find((r: unknown) => isRecord(r) && r.dst === 'default');
  return isRecord(route) && typeof route.gateway === 'string' && typeof route.dev === 'string' ? `${route.gateway} ${route.dev}` : '';
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

/** An nft script that replaces table `name` atomically: a postrouting NAT chain with one rule. */
function nftTable(name: string, rule: string): string {
  return `table ip ${name} {}\ndelete table ip ${name}\ntable ip ${name} {\n  chain postrouting {\n    type nat hook postrouting priority srcnat; policy accept;\n    ${rule}\n  }\n}\n`;
}

function specProblems(spec: ServerSpec): string[] {
  const problems: string[] = [];
  if (!isValidKey(spec.privateKey)) problems.push('private key is not a WireGuard key');
  if (!Number.isInteger(spec.listenPort) || spec.listenPort < 1 || spec.listenPort > 65535) problems.push(`listen port ${spec.listenPort} is not 1-65535`);
  if (!Number.isInteger(spec.mtu) || spec.mtu < 576 || spec.mtu > 9000) problems.push(`mtu ${spec.mtu} is not 576-9000`);
  if (!/^\d{1,3}(?:\.\d{1,3}){3}\/\d{1,2}$/.test(spec.address) || canonicalCidr(spec.address) === null) {
    problems.push(`address ${JSON.stringify(spec.address)} is not an IPv4 address/prefix`);
  }
  return problems;
}

/** An allowed-ips entry as `wg show` prints it (host bits cleared), or null when malformed. */
export function canonicalCidr(cidr: string): string | null {
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(cidr);
  if (v4 !== null) {
    const octets = v4.slice(1, 5).map(Number);
    const prefixBits = Number(v4[5]);
    if (octets.some((o) => o > 255) || prefixBits > 32) return null;
    const value = octets.reduce((acc, o) => acc * 256 + o, 0);
    const size = 2 ** (32 - prefixBits);
    const network = value - (value % size);
    return `${[24, 16, 8, 0].map((shift) => Math.floor(network / 2 ** shift) % 256).join('.')}/${prefixBits}`;
  }
  // IPv6 is passed through as written (lower case); give it in the compressed form `wg` prints.
  return /^[0-9a-f:]+\/\d{1,3}$/i.test(cidr) && cidr.includes(':') ? cidr.toLowerCase() : null;
}

/** The bare IPv4 addresses of the /32 entries of a comma-separated allowed-ips list. */
function singleIps(allowedIps: string): string[] {
  return allowedIps.split(',').flatMap((entry) => /^(\d+\.\d+\.\d+\.\d+)\/32$/.exec(entry.trim())?.[1] ?? []);
}

function chunk<T>(items: readonly T[], size: number): T[][] {
  const chunks: T[][] = [];
  for (let i = 0; i < items.length; i += size) chunks.push(items.slice(i, i + size));
  return chunks;
}

function collapse(failures: readonly string[]): string[] {
  if (failures.length <= MAX_REPORTED_FAILURES) return [...failures];
  return [...failures.slice(0, MAX_REPORTED_FAILURES), `… and ${failures.length - MAX_REPORTED_FAILURES} more`];
}
