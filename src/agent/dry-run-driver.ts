/**
 * The `dry-run` driver (docs/decisions.md "The dry-run driver"), for hosts that cannot run WireGuard
 * (NODE_DRIVER=auto without root): servers and peers live in memory, so the whole API works and configs are
 * issued, but no tunnel carries traffic and every counter stays 0.
 */
import { networkInterfaces } from 'node:os';
import { SERVER_PROTOCOLS } from '../domain/protocols.ts';
import { DriverError } from './driver.ts';
import type {
  CounterReading,
  Driver,
  Ipv6Mode,
  PeerAllowance,
  PeerCounters,
  PeerSpec,
  ServerSpec,
  ServerState,
} from './driver.ts';
import { isValidKey, publicKeyOf } from '../domain/wireguard-keys.ts';
import { allowedIpsOf } from './wireguard/peers.ts';

/** A peer as applied, and its counters, which stay 0: one object serves the server's peers and its reading. */
type MemoryPeer = PeerSpec & PeerCounters;

function memoryPeer(peer: PeerSpec): MemoryPeer {
  const { publicKey, allowedIp, allowedIp6, speedLimitKbps } = peer;
  return { publicKey, allowedIp, allowedIp6, speedLimitKbps, rxBytes: 0, txBytes: 0, lastHandshakeMs: 0 };
}

interface MemoryServer {
  spec: ServerSpec;
  /** Counts the servers made, so a server made anew reads as another instance. */
  instance: string;
  /** Peers by public key. */
  peers: Map<string, MemoryPeer>;
  /**
   * The counters as last read, until the peers change: the agent reads every server each second, and a reading
   * made anew each time was garbage that at 100,000 peers kept the collector busy.
   */
  reading: CounterReading | undefined;
  /** Kernel allowances as set, by public key: nothing passes, so none counts anything. */
  allowances: Map<string, PeerAllowance>;
}

export class DryRunDriver implements Driver {
  readonly kind = 'dry-run';
  readonly protocols = SERVER_PROTOCOLS;
  readonly #servers = new Map<number, MemoryServer>();
  #made = 0;

  up(spec: ServerSpec): Promise<ServerState> {
    if (!isValidKey(spec.privateKey))
      return Promise.reject(new DriverError(`up server ${spec.serverId}`, ['private key is not a WireGuard key']));
    const server = this.#servers.get(spec.serverId) ?? {
      spec,
      instance: String(++this.#made),
      peers: new Map<string, MemoryPeer>(),
      reading: undefined,
      allowances: new Map<string, PeerAllowance>(),
    };
    server.spec = { ...spec };
    this.#servers.set(spec.serverId, server);
    return Promise.resolve({
      serverId: spec.serverId,
      listenPort: spec.listenPort,
      address: spec.address,
      mtu: spec.mtu,
      publicKey: publicKeyOf(spec.privateKey),
      peerCount: server.peers.size,
      ipv6: dryRunIpv6(spec),
    });
  }

  setPeers(serverId: number, peers: readonly PeerSpec[]): Promise<void> {
    const server = this.#servers.get(serverId);
    if (server === undefined)
      return Promise.reject(new DriverError(`set peers of server ${serverId}`, [`server ${serverId} is not up`]));
    const invalid = peers
      .filter((p) => !isValidKey(p.publicKey))
      .map((p) => `peer ${JSON.stringify(p.publicKey)}: not a WireGuard public key`);
    server.peers = new Map(peers.filter((p) => isValidKey(p.publicKey)).map((p) => [p.publicKey, memoryPeer(p)]));
    server.reading = undefined;
    return invalid.length > 0
      ? Promise.reject(new DriverError(`set peers of server ${serverId}`, invalid))
      : Promise.resolve();
  }

  changePeers(serverId: number, upsert: readonly PeerSpec[], remove: readonly string[]): Promise<void> {
    const server = this.#servers.get(serverId);
    if (server === undefined)
      return Promise.reject(new DriverError(`change peers of server ${serverId}`, [`server ${serverId} is not up`]));
    const invalid = upsert
      .filter((p) => !isValidKey(p.publicKey))
      .map((p) => `peer ${JSON.stringify(p.publicKey)}: not a WireGuard public key`);
    for (const key of remove) server.peers.delete(key);
    for (const peer of upsert) if (isValidKey(peer.publicKey)) server.peers.set(peer.publicKey, memoryPeer(peer));
    server.reading = undefined;
    return invalid.length > 0
      ? Promise.reject(new DriverError(`change peers of server ${serverId}`, invalid))
      : Promise.resolve();
  }

  readCounters(serverId: number): Promise<CounterReading> {
    const server = this.#servers.get(serverId);
    if (server === undefined)
      return Promise.reject(new DriverError(`read counters of server ${serverId}`, [`server ${serverId} is not up`]));
    server.reading ??= { instance: server.instance, peers: [...server.peers.values()] };
    return Promise.resolve(server.reading);
  }

  readAllowances(serverId: number): Promise<ReadonlyMap<string, number>> {
    const server = this.#servers.get(serverId);
    return Promise.resolve(new Map([...(server?.allowances.keys() ?? [])].map((key) => [key, 0])));
  }

  setAllowances(serverId: number, allowances: readonly PeerAllowance[]): Promise<void> {
    const server = this.#servers.get(serverId);
    if (server === undefined)
      return Promise.reject(new DriverError(`set allowances of server ${serverId}`, [`server ${serverId} is not up`]));
    server.allowances = new Map(allowances.map((a) => [a.publicKey, { ...a }]));
    return Promise.resolve();
  }

  inspect(spec: ServerSpec, peers: readonly PeerSpec[]): Promise<string[]> {
    const server = this.#servers.get(spec.serverId);
    if (server === undefined) return Promise.resolve([`server ${spec.serverId} is not up`]);
    const found: string[] = [];
    const held = server.spec;
    for (const field of ['privateKey', 'listenPort', 'address', 'mtu', 'address6', 'routed6'] as const) {
      if (held[field] !== spec[field]) found.push(`server ${spec.serverId}: ${field} differs from what was applied`);
    }
    const wanted = new Map(peers.map((p) => [p.publicKey, p]));
    for (const [key, peer] of server.peers) {
      const want = wanted.get(key);
      if (want === undefined) found.push(`peer ${key} is on the server but was not applied`);
      else if (allowedIpsOf(want) !== allowedIpsOf(peer)) {
        found.push(`peer ${key} has allowed ip ${allowedIpsOf(peer)}, not ${allowedIpsOf(want)}`);
      } else if (want.speedLimitKbps !== peer.speedLimitKbps) {
        found.push(`peer ${key} has speed limit ${peer.speedLimitKbps} kbit/s, not ${want.speedLimitKbps}`);
      }
    }
    for (const key of wanted.keys()) if (!server.peers.has(key)) found.push(`peer ${key} is missing`);
    return Promise.resolve(found);
  }

  down(serverId: number): Promise<void> {
    this.#servers.delete(serverId);
    return Promise.resolve();
  }

  list(): Promise<number[]> {
    return Promise.resolve([...this.#servers.keys()].sort((a, b) => a - b));
  }

  /** The machine's own interfaces: a dry-run panel refuses the server subnets a real one would. */
  hostNetworks(): Promise<string[]> {
    const addresses = Object.values(networkInterfaces()).flatMap((list) => list ?? []);
    return Promise.resolve(addresses.flatMap((a) => (a.cidr === null ? [] : [a.cidr])));
  }
}

/** What a dry-run server reports of its IPv6: what a node with an IPv6 uplink would do, so configs are issued alike. */
function dryRunIpv6(spec: ServerSpec): Ipv6Mode {
  if (spec.address6 === undefined) return 'off';
  return spec.routed6 === true ? 'routed' : 'nat66';
}
