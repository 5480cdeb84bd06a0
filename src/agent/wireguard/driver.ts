/**
 * The `wireguard` driver: each server is a network namespace (its "container") holding the WireGuard
 * interface, linked to the host (uplink) namespace by a veth pair, with NAT on both sides.
 *
 * The interface is created in the host namespace and then moved into the server's namespace, so its
 * UDP socket stays in the host namespace and clients reach it on the host's address with no DNAT
 * (docs/dataplane.md, "Measured facts" 4; the kernel module does the same with the namespace it was created in).
 * With wireguard-go the UAPI socket `/var/run/wireguard/IF.sock` is global, so every name this driver
 * makes on the host carries `namePrefix` and is unique per node (names.ts).
 *
 * The implementation is per server: a WireGuard server runs on the kernel module when the node has it, else on
 * wireguard-go; an AmneziaWG server always runs on amneziawg-go (socket `/var/run/amneziawg/IF.sock`) with its
 * obfuscation set over UAPI (amneziawg.ts). Everything else is the same for both.
 *
 * Every method reads the host's state first (host-readers.ts) and changes only the difference, goes on
 * past a failed step and throws one DriverError listing every failure (failures.ts, docs/dataplane.md).
 * This file composes the parts: peers (peers.ts), the veth and NAT (uplink.ts), wireguard-go processes
 * (userspace.ts). Speed limits are HTB classes and an nft map inside the server's namespace
 * (../shaping/); what clients may reach is nft tables in the server's and the host namespace (isolation.ts).
 */
import { messageOf } from '../../domain/errors.ts';
import type { ServerProtocol } from '../../domain/protocols.ts';
import { publicKeyOf } from '../../domain/wireguard-keys.ts';
import type { CommandRunner } from '../commands.ts';
import { DriverError } from '../driver.ts';
import type { CounterReading, Driver, Ipv6Mode, PeerAllowance, PeerSpec, ServerSpec, ServerState } from '../driver.ts';
import { type Cidr, ensureIsolation, isolationProblems } from '../isolation.ts';
import type { IsolationPlace, IsolationPolicy } from '../isolation.ts';
import { KeyedQueue } from '../keyed-queue.ts';
import { Quotas } from '../quota/quotas.ts';
import { Shaper } from '../shaping/shaper.ts';
import type { ShapingPlace } from '../shaping/tc-nft.ts';
import { obfuscationChange, obfuscationKeys, obfuscationProblems } from './amneziawg.ts';
import type { WireGuardImplementation } from './capabilities.ts';
import { attempt, collapse, type Step, stepper } from './failures.ts';
import {
  ipIn,
  readIpv6Snapshot,
  readLinkIndex,
  readLinks,
  readNetnsNames,
  readNetworks,
  readNftTables,
  readSnapshot,
} from './host-readers.ts';
import type { Dump, DumpPeer, Link, Snapshot } from './host-readers.ts';
import { Implementations } from './implementations.ts';
import { socketIdentity } from './uapi.ts';
import { checkNamePrefix, type Names, serverIdsIn, serverNames } from './names.ts';
import { allowedIpsOf, applyPeers, peerChanges, peerProblems, singleIps, validPeers } from './peers.ts';
import { address6Of, protocolOf, serverSpecProblems } from './server-spec.ts';
import { ensureUplink, removeUplink, uplinkProblems } from './uplink.ts';
import { ensureUplink6, hasIpv6Uplink, type Uplink6State, uplink6Problems } from './uplink6.ts';

/** A link as just made: down, no addresses. */
const NEW_LINK: Link = { up: false, mtu: 0, addrs: [], addrs6: [] };

export interface WireGuardDriverOptions {
  runner: CommandRunner;
  /**
   * 1–4 characters, a letter first and last (so `prefix + serverId` never reads as another prefix's name).
   * Default `vp`.
   */
  namePrefix?: string;
  /** The namespace the node treats as its host/uplink one; undefined = the process's own (root) namespace. */
  hostNetns?: string;
  /** Default: the kernel module when present, else wireguard-go (see detectImplementation). */
  implementation?: WireGuardImplementation;
  /** amneziawg-go runs here (canRunWireGuard): the driver runs AmneziaWG servers too. Default false. */
  amneziawg?: boolean;
  /** How long a fresh wireguard-go may take to answer on its UAPI socket. Default 3000. */
  readyTimeoutMs?: number;
  /**
   * How wireguard-go interfaces are read and configured: `uapi` (default) talks to its socket directly,
   * `wg` runs the `wg` tool as for the kernel module (interface-config.ts). The kernel module always uses `wg`.
   */
  wireguardGoConfig?: 'uapi' | 'wg';
  /** Destinations opened to clients although blocked by default (`NODE_ALLOW_CIDRS`; isolation.ts). */
  allowCidrs?: readonly Cidr[];
}

export class WireGuardDriver implements Driver {
  readonly kind = 'wireguard';
  readonly protocols: readonly ServerProtocol[];
  readonly #runner: CommandRunner;
  readonly #prefix: string;
  readonly #hostNetns: string | undefined;
  readonly #impl: Implementations;
  /** Per server, the interface index last read and the identity of the wireguard-go socket it was read with. */
  readonly #instances = new Map<number, { socket: string; index: string }>();
  /** One operation per server at a time. */
  readonly #serial = new KeyedQueue<number>();
  readonly #shaper: Shaper;
  readonly #quotas: Quotas;
  readonly #allowCidrs: readonly Cidr[];
  /** Whether the kernel has IPv6 at all (`ipv6.disable=1` leaves it out); read once, when a server first has some. */
  #kernelIpv6: Promise<boolean> | undefined;

  constructor(options: WireGuardDriverOptions) {
    const prefix = options.namePrefix ?? 'vp';
    checkNamePrefix(prefix);
    this.#runner = options.runner;
    this.#prefix = prefix;
    this.#hostNetns = options.hostNetns;
    this.protocols = options.amneziawg === true ? ['wireguard', 'amneziawg'] : ['wireguard'];
    this.#impl = new Implementations(options.runner, {
      implementation: options.implementation,
      wireguardGoConfig: options.wireguardGoConfig ?? 'uapi',
      hostNetns: options.hostNetns,
      readyTimeoutMs: options.readyTimeoutMs ?? 3000,
    });
    this.#shaper = new Shaper(options.runner);
    this.#quotas = new Quotas(options.runner);
    this.#allowCidrs = options.allowCidrs ?? [];
  }

  /** Every host name of a server; throws when the id does not fit the 15-character limit. */
  names(serverId: number): Names {
    return serverNames(this.#prefix, serverId);
  }

  up(spec: ServerSpec): Promise<ServerState> {
    return this.#serial.run(spec.serverId, async () => this.#up(await this.#forKernel(spec)));
  }

  setPeers(serverId: number, peers: readonly PeerSpec[]): Promise<void> {
    return this.#serial.run(serverId, () => this.#setPeers(serverId, peers));
  }

  changePeers(serverId: number, upsert: readonly PeerSpec[], remove: readonly string[]): Promise<void> {
    return this.#serial.run(serverId, async () => {
      const n = this.names(serverId);
      const { desired, untouchable, failures } = validPeers(upsert);
      const removes = remove.filter((k) => !desired.has(k) && !untouchable.has(k));
      const adds = [...desired.values()].map((p) => ({ publicKey: p.publicKey, allowedIps: allowedIpsOf(p) }));
      const { config, at } = await this.#impl.of(serverId, n);
      await applyPeers(config, at, { removes, adds }, failures);
      const peersOnHost = async () =>
        new Map(
          (await this.#readDump(serverId, n)).peers.map((p): [string, string[]] => [
            p.publicKey,
            singleIps(p.allowedIps),
          ]),
        );
      await this.#shaper.change(serverId, this.#place(n), [...desired.values()], removes, peersOnHost, failures);
      if (failures.length > 0) throw new DriverError(`change peers of server ${serverId}`, collapse(failures));
    });
  }

  /** The interface's index is its instance: an interface made anew gets another one. */
  readCounters(serverId: number): Promise<CounterReading> {
    return this.#serial.run(serverId, async () => {
      const n = this.names(serverId);
      const { config, at } = await this.#impl.of(serverId, n);
      const [dump, instance] = await Promise.all([config.readCounters(at), this.#instance(serverId, n)]).catch(
        (error: unknown) => {
          throw new DriverError(`read counters of server ${serverId}`, [messageOf(error)]);
        },
      );
      const peers = dump.peers.map((p) => ({
        publicKey: p.publicKey,
        rxBytes: p.rxBytes,
        txBytes: p.txBytes,
        lastHandshakeMs: p.lastHandshakeS * 1000,
      }));
      return { instance, peers };
    });
  }

  readAllowances(serverId: number): Promise<ReadonlyMap<string, number>> {
    return this.#serial.run(serverId, () => this.#quotas.read(serverId, this.#place(this.names(serverId))));
  }

  setAllowances(serverId: number, allowances: readonly PeerAllowance[]): Promise<void> {
    return this.#serial.run(serverId, async () => {
      const failures: string[] = [];
      await this.#quotas.set(serverId, this.#place(this.names(serverId)), allowances, failures);
      if (failures.length > 0) throw new DriverError(`set allowances of server ${serverId}`, failures);
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
  async isolationProblems(asked: ServerSpec): Promise<string[]> {
    const spec = await this.#forKernel(asked);
    const [place, policy] = [this.#isolationPlace(spec), this.#isolationPolicy(spec)];
    return this.#serial.run(spec.serverId, () => isolationProblems(this.#runner, place, policy));
  }

  /**
   * The drift check: reads the interface, its peers, links, NAT tables and speed limits and lists what
   * differs from `spec` and `peers`; changes nothing. Costs a `wg show dump` (which metering reads every
   * second anyway), two `ip` and two `nft list tables`, and the shaper's reads only where a peer is limited.
   */
  inspect(asked: ServerSpec, peers: readonly PeerSpec[]): Promise<string[]> {
    return this.#serial.run(asked.serverId, async () => {
      const spec = await this.#forKernel(asked);
      const n = this.names(spec.serverId);
      this.#impl.remember(spec.serverId, protocolOf(spec));
      const valid = validPeers(peers);
      const [dump, links, serverTables, hostTables] = await Promise.all([
        this.#readDump(spec.serverId, n).catch(() => null),
        readLinks(this.#runner, n.netns),
        readNftTables(this.#runner, n.netns),
        readNftTables(this.#runner, this.#hostNetns),
      ]);
      const found: string[] = [];
      if (dump === null) found.push(`interface ${n.iface} does not answer`);
      else {
        if (dump.listenPort !== spec.listenPort) {
          found.push(`interface ${n.iface} listens on ${dump.listenPort}, not ${spec.listenPort}`);
        }
        if (dump.privateKey !== spec.privateKey) found.push(`interface ${n.iface} has another private key`);
        found.push(...peerProblems(n.iface, dump.peers, valid));
        if (spec.obfuscation !== undefined)
          found.push(...obfuscationProblems(n.iface, dump.deviceKeys, spec.obfuscation));
      }
      const iface = links.get(n.iface);
      if (iface === undefined) found.push(`link ${n.iface} is missing from namespace ${n.netns}`);
      else {
        const addresses = iface.addrs.join(',');
        const addresses6 = iface.addrs6.join(',');
        const address6 = address6Of(spec) ?? '';
        if (!iface.up) found.push(`link ${n.iface} is down`);
        if (iface.mtu !== spec.mtu) found.push(`link ${n.iface} has MTU ${iface.mtu}, not ${spec.mtu}`);
        if (addresses !== spec.address) {
          found.push(`link ${n.iface} has addresses ${addresses || '(none)'}, not ${spec.address}`);
        }
        if (addresses6 !== address6) {
          found.push(`link ${n.iface} has IPv6 addresses ${addresses6 || '(none)'}, not ${address6 || '(none)'}`);
        }
      }
      found.push(...uplinkProblems(n, links, serverTables, hostTables));
      const serverVeth = links.get(n.vethServer);
      if (spec.address6 !== undefined || hasIpv6Uplink(n, serverVeth, undefined, serverTables, hostTables)) {
        const [hostLinks, routes] = await Promise.all([
          readLinks(this.#runner, this.#hostNetns),
          readIpv6Snapshot(this.#runner, n, this.#hostNetns),
        ]);
        const hostVeth = hostLinks.get(n.vethHost);
        found.push(...uplink6Problems(spec, n, { serverVeth, hostVeth, serverTables, hostTables, routes }));
      }
      found.push(...(await this.#shaper.inspect(spec.serverId, this.#place(n), [...valid.desired.values()])));
      found.push(...(await this.#quotas.inspect(spec.serverId, this.#place(n))));
      found.push(...(await isolationProblems(this.#runner, this.#isolationPlace(spec), this.#isolationPolicy(spec))));
      return collapse(found);
    });
  }

  async list(): Promise<number[]> {
    const [namespaces, hostLinks] = await Promise.all([
      readNetnsNames(this.#runner),
      readLinks(this.#runner, this.#hostNetns),
    ]);
    return serverIdsIn(this.#prefix, [...namespaces, ...hostLinks.keys()]);
  }

  /** Read from the host namespace itself (not readLinks, which takes a failed read for no links). */
  async hostNetworks(): Promise<string[]> {
    return readNetworks(this.#runner, this.#hostNetns);
  }

  /** Stops every wireguard-go and amneziawg-go child this driver started, leaving the namespaces for down(). */
  async close(): Promise<void> {
    await this.#impl.stopAll();
  }

  async #up(spec: ServerSpec): Promise<ServerState> {
    const action = `up server ${spec.serverId}`;
    const invalid = serverSpecProblems(spec);
    if (invalid.length > 0) throw new DriverError(action, invalid);
    const protocol = protocolOf(spec);
    if (!this.protocols.includes(protocol)) {
      throw new DriverError(action, [`this node cannot run ${protocol} servers: amneziawg-go was not found at start`]);
    }
    const n = this.names(spec.serverId);
    this.#impl.remember(spec.serverId, protocol);
    const failures: string[] = [];
    const run = stepper(this.#runner, failures);
    const readDump = () => this.#readDump(spec.serverId, n);
    const snap = await readSnapshot(this.#runner, n, this.#hostNetns, readDump).catch((error) => {
      throw new DriverError(action, [`cannot read the host: ${messageOf(error)}`]);
    });
    if (!snap.netnsExists && !(await run('ip', ['netns', 'add', n.netns]))) throw new DriverError(action, failures);
    // Before the interface, so no client of a new interface ever passes unfiltered.
    await ensureIsolation(this.#runner, this.#isolationPlace(spec), this.#isolationPolicy(spec), failures);

    const iface = snap.serverLinks.get(n.iface);
    const dump = snap.dump;
    let peerCount = dump?.peers.length ?? 0;
    const obfuscation = spec.obfuscation === undefined ? null : obfuscationChange(dump?.deviceKeys, spec.obfuscation);
    // wireguard-go learns the MTU only in the namespace it runs in, and the port belongs to the
    // host namespace's socket: a change to either means a new interface (peers are put back); so does an
    // obfuscation change amneziawg-go takes only at start.
    const recreate =
      iface === undefined ||
      dump === null ||
      dump.listenPort !== spec.listenPort ||
      iface.mtu !== spec.mtu ||
      obfuscation?.recreate === true;
    if (recreate) {
      peerCount = await this.#createInterface(spec, n, snap, dump?.peers ?? [], failures);
    } else {
      const { config, at } = await this.#impl.of(spec.serverId, n);
      if (dump.privateKey !== spec.privateKey) await attempt(failures, () => config.setDevice(at, spec.privateKey));
      const changed = obfuscation?.set ?? new Map<string, string>();
      if (changed.size > 0) await attempt(failures, () => this.#impl.amneziawg.setDeviceKeys(at, changed));
      const address6 = address6Of(spec);
      const wantAddresses = [spec.address, ...(address6 === undefined ? [] : [address6])];
      for (const extra of [...iface.addrs, ...iface.addrs6].filter((a) => !wantAddresses.includes(a))) {
        await run('ip', ['-n', n.netns, 'addr', 'del', extra, 'dev', n.iface]);
      }
      for (const missing of wantAddresses.filter((a) => !iface.addrs.includes(a) && !iface.addrs6.includes(a))) {
        await run('ip', ['-n', n.netns, 'addr', 'add', missing, 'dev', n.iface]);
      }
      if (!iface.up) await run('ip', ['-n', n.netns, 'link', 'set', n.iface, 'up']);
    }
    const vethMade = await ensureUplink(n, snap, this.#hostNetns, run);
    const ipv6 = await this.#ensureUplink6(spec, n, snap, vethMade, run);
    // A new interface or veth has none of the classes its peers' speed limits had.
    if ((recreate || vethMade) && (dump?.peers.length ?? 0) > 0) {
      const peers = new Map((dump?.peers ?? []).map((p): [string, string[]] => [p.publicKey, singleIps(p.allowedIps)]));
      await this.#shaper.restore(spec.serverId, this.#place(n), peers, failures);
    }
    if (failures.length > 0) throw new DriverError(action, collapse(failures));
    const { serverId, listenPort, address, mtu } = spec;
    return { serverId, listenPort, address, mtu, publicKey: publicKeyOf(spec.privateKey), peerCount, ipv6 };
  }

  /**
   * The IPv6 part of the uplink (uplink6.ts), after ensureUplink; its routes are read only for a server that has
   * IPv6 or has some left on the host, so a server without costs nothing more.
   */
  async #ensureUplink6(spec: ServerSpec, n: Names, snap: Snapshot, vethMade: boolean, run: Step): Promise<Ipv6Mode> {
    // A veth made just now has no address yet (what the snapshot read was of the one it replaced).
    const [serverVeth, hostVeth] = [snap.serverLinks.get(n.vethServer), snap.hostLinks.get(n.vethHost)].map(
      (link): Link | undefined => (vethMade ? NEW_LINK : link),
    );
    const { serverTables, hostTables } = snap;
    if (spec.address6 === undefined && !hasIpv6Uplink(n, serverVeth, hostVeth, serverTables, hostTables)) return 'off';
    const routes = await readIpv6Snapshot(this.#runner, n, this.#hostNetns);
    const state: Uplink6State = { serverVeth, hostVeth, serverTables, hostTables, routes };
    return ensureUplink6(spec, n, state, this.#hostNetns, run);
  }

  /** Makes the interface from scratch (removing a stale one); returns how many peers it has. */
  async #createInterface(
    spec: ServerSpec,
    n: Names,
    snap: Snapshot,
    restore: readonly DumpPeer[],
    failures: string[],
  ): Promise<number> {
    const run = stepper(this.#runner, failures);
    const hostIp = ipIn(this.#hostNetns);
    const { daemon } = await this.#impl.of(spec.serverId, n);
    const earlierAnswered = snap.dump !== null && daemon !== null && !daemon.has(spec.serverId);
    if (snap.serverLinks.has(n.iface)) await run('ip', ['-n', n.netns, 'link', 'del', n.iface]);
    if (snap.hostLinks.has(n.iface)) await run('ip', [...hostIp, 'link', 'del', n.iface]);
    await this.#impl.stop(spec.serverId);
    this.#instances.delete(spec.serverId);
    const created =
      daemon === null
        ? await run('ip', [...hostIp, 'link', 'add', n.iface, 'type', 'wireguard'])
        : await daemon.start(spec.serverId, n.iface, earlierAnswered, failures);
    // Each of these needs the one before; past a failure the rest would only fail too.
    if (!created) return 0;
    if (!(await run('ip', [...hostIp, 'link', 'set', n.iface, 'mtu', String(spec.mtu)]))) return 0;
    if (!(await run('ip', [...hostIp, 'link', 'set', n.iface, 'netns', n.netns]))) return 0;
    const { config, at } = await this.#impl.of(spec.serverId, n);
    await attempt(failures, () => config.setDevice(at, spec.privateKey, spec.listenPort));
    // Before the link is up, so no handshake ever goes out with WireGuard's own wire image.
    if (spec.obfuscation !== undefined) {
      const keys = obfuscationKeys(spec.obfuscation);
      await attempt(failures, () => this.#impl.amneziawg.setDeviceKeys(at, keys));
    }
    await run('ip', ['-n', n.netns, 'addr', 'add', spec.address, 'dev', n.iface]);
    const address6 = address6Of(spec);
    if (address6 !== undefined) await run('ip', ['-n', n.netns, 'addr', 'add', address6, 'dev', n.iface]);
    await run('ip', ['-n', n.netns, 'link', 'set', n.iface, 'up']);
    const before = failures.length;
    await applyPeers(config, at, { removes: [], adds: restore }, failures);
    return failures.length === before ? restore.length : 0;
  }

  async #setPeers(serverId: number, peers: readonly PeerSpec[]): Promise<void> {
    const action = `set peers of server ${serverId}`;
    const n = this.names(serverId);
    const valid = validPeers(peers);
    const { desired, untouchable, failures } = valid;
    let dump: Dump;
    try {
      dump = await this.#readDump(serverId, n);
    } catch (error) {
      throw new DriverError(action, [messageOf(error), ...failures]);
    }
    const { config, at } = await this.#impl.of(serverId, n);
    await applyPeers(config, at, peerChanges(dump.peers, valid), failures);
    // Peers left as they are keep their limits too.
    const kept = dump.peers.filter((p) => untouchable.has(p.publicKey));
    const keepIps = new Set(kept.flatMap((p) => singleIps(p.allowedIps)));
    await this.#shaper.sync(serverId, this.#place(n), [...desired.values()], keepIps, failures);
    if (failures.length > 0) throw new DriverError(action, collapse(failures));
  }

  async #down(serverId: number): Promise<void> {
    const n = this.names(serverId);
    const failures: string[] = [];
    const run = stepper(this.#runner, failures);
    // Stopping the daemon first lets it close its interface and remove its UAPI socket itself.
    await this.#impl.stop(serverId);
    this.#shaper.forget(serverId);
    this.#quotas.forget(serverId);
    this.#instances.delete(serverId);
    this.#impl.forget(serverId);
    const netnsExists = (await readNetnsNames(this.#runner)).includes(n.netns);
    const [serverLinks, hostLinks, hostTables] = await Promise.all([
      netnsExists ? readLinks(this.#runner, n.netns) : new Map<string, Link>(),
      readLinks(this.#runner, this.#hostNetns),
      readNftTables(this.#runner, this.#hostNetns),
    ]);
    // Deleting the interface makes a wireguard-go this driver did not start (an earlier agent's) exit.
    if (serverLinks.has(n.iface)) await run('ip', ['-n', n.netns, 'link', 'del', n.iface]);
    if (hostLinks.has(n.iface)) await run('ip', [...ipIn(this.#hostNetns), 'link', 'del', n.iface]);
    await removeUplink(n, hostLinks, hostTables, this.#hostNetns, run);
    if (hostTables.has(`inet ${n.isolationTable}`)) {
      await run('nft', ['delete', 'table', 'inet', n.isolationTable], { netns: this.#hostNetns });
    }
    if (netnsExists) await run('ip', ['netns', 'del', n.netns]);
    if (failures.length > 0) throw new DriverError(`down server ${serverId}`, collapse(failures));
  }

  async #readDump(serverId: number, n: Names): Promise<Dump> {
    const { config, at } = await this.#impl.of(serverId, n);
    return config.read(at);
  }

  /**
   * The interface's index (`ip link show`). With wireguard-go it is read again only when the socket serving
   * the interface is another one (a new process, so maybe a new interface): a counter read then runs no process.
   */
  async #instance(serverId: number, n: Names): Promise<string> {
    const { socketDir } = await this.#impl.of(serverId, n);
    const socket = socketDir === null ? null : await socketIdentity(n.iface, socketDir);
    const known = this.#instances.get(serverId);
    if (socket !== null && known?.socket === socket) return known.index;
    const index = await readLinkIndex(this.#runner, n.netns, n.iface);
    if (socket === null) this.#instances.delete(serverId);
    else this.#instances.set(serverId, { socket, index });
    return index;
  }

  /**
   * Where the server's speed limits live: WireGuard interface (download) and uplink veth (upload), in its
   * namespace.
   */
  #place(n: Names): ShapingPlace {
    return { netns: n.netns, wg: n.iface, uplink: n.vethServer };
  }

  #isolationPlace(spec: ServerSpec): IsolationPlace {
    const n = this.names(spec.serverId);
    const serverIp6 = address6Of(spec)?.split('/')[0];
    const place = {
      serverNetns: n.netns,
      wg: n.iface,
      serverIp: spec.address.split('/')[0] ?? '',
      hostNetns: this.#hostNetns,
      vethHost: n.vethHost,
      hostTable: n.isolationTable,
    };
    return serverIp6 === undefined ? place : { ...place, serverIp6 };
  }

  #isolationPolicy(spec: ServerSpec): IsolationPolicy {
    const { clientToClient = false, dnsOnServer = false } = spec;
    return { clientToClient, dnsOnServer, allow: this.#allowCidrs };
  }

  /** `spec` as this kernel can run it: a kernel without IPv6 runs a server's IPv4 alone (its `ipv6` is then off). */
  async #forKernel(spec: ServerSpec): Promise<ServerSpec> {
    if (spec.address6 === undefined) return spec;
    this.#kernelIpv6 ??= this.#runner.run('test', ['-d', '/proc/sys/net/ipv6']).then(
      () => true,
      () => false,
    );
    if (await this.#kernelIpv6) return spec;
    const { address6: _address6, routed6: _routed6, ...ipv4 } = spec;
    return ipv4;
  }
}
