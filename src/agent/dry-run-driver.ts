/**
 * The `dry-run` driver, for hosts that cannot run WireGuard (DESIGN §4, NODE_DRIVER=auto without
 * root): servers and peers live in memory, so the whole API works and configs are issued, but no
 * tunnel carries traffic and every counter stays 0.
 */
import { networkInterfaces } from 'node:os';
import { DriverError } from './driver.ts';
import type { CounterReading, Driver, PeerSpec, ServerSpec, ServerState } from './driver.ts';
import { isValidKey, publicKeyOf } from '../domain/wireguard-keys.ts';

interface MemoryServer {
  spec: ServerSpec;
  /** Counts the servers made, so a server made anew reads as another instance. */
  instance: string;
  /** Peers by public key. */
  peers: Map<string, PeerSpec>;
}

export class DryRunDriver implements Driver {
  readonly kind = 'dry-run';
  readonly #servers = new Map<number, MemoryServer>();
  #made = 0;

  up(spec: ServerSpec): Promise<ServerState> {
    if (!isValidKey(spec.privateKey))
      return Promise.reject(new DriverError(`up server ${spec.serverId}`, ['private key is not a WireGuard key']));
    const server = this.#servers.get(spec.serverId) ?? {
      spec,
      instance: String(++this.#made),
      peers: new Map<string, PeerSpec>(),
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
    });
  }

  setPeers(serverId: number, peers: readonly PeerSpec[]): Promise<void> {
    const server = this.#servers.get(serverId);
    if (server === undefined)
      return Promise.reject(new DriverError(`set peers of server ${serverId}`, [`server ${serverId} is not up`]));
    const invalid = peers
      .filter((p) => !isValidKey(p.publicKey))
      .map((p) => `peer ${JSON.stringify(p.publicKey)}: not a WireGuard public key`);
    server.peers = new Map(peers.filter((p) => isValidKey(p.publicKey)).map((p) => [p.publicKey, { ...p }]));
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
    for (const peer of upsert) if (isValidKey(peer.publicKey)) server.peers.set(peer.publicKey, { ...peer });
    return invalid.length > 0
      ? Promise.reject(new DriverError(`change peers of server ${serverId}`, invalid))
      : Promise.resolve();
  }

  readCounters(serverId: number): Promise<CounterReading> {
    const server = this.#servers.get(serverId);
    if (server === undefined)
      return Promise.reject(new DriverError(`read counters of server ${serverId}`, [`server ${serverId} is not up`]));
    const peers = [...server.peers.keys()].map((publicKey) => ({
      publicKey,
      rxBytes: 0,
      txBytes: 0,
      lastHandshakeMs: 0,
    }));
    return Promise.resolve({ instance: server.instance, peers });
  }

  inspect(spec: ServerSpec, peers: readonly PeerSpec[]): Promise<string[]> {
    const server = this.#servers.get(spec.serverId);
    if (server === undefined) return Promise.resolve([`server ${spec.serverId} is not up`]);
    const found: string[] = [];
    const held = server.spec;
    for (const field of ['privateKey', 'listenPort', 'address', 'mtu'] as const) {
      if (held[field] !== spec[field]) found.push(`server ${spec.serverId}: ${field} differs from what was applied`);
    }
    const wanted = new Map(peers.map((p) => [p.publicKey, p]));
    for (const [key, peer] of server.peers) {
      const want = wanted.get(key);
      if (want === undefined) found.push(`peer ${key} is on the server but was not applied`);
      else if (want.allowedIp !== peer.allowedIp) {
        found.push(`peer ${key} has allowed ip ${peer.allowedIp}, not ${want.allowedIp}`);
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
