import { SERVER_PROTOCOLS } from '../../src/domain/protocols.ts';
import type {
  CounterReading,
  Driver,
  PeerAllowance,
  PeerSpec,
  ServerSpec,
  ServerState,
} from '../../src/agent/driver.ts';

interface ScriptedPeer {
  rx: number;
  tx: number;
  /** The speed limit the peer runs at, as last applied. */
  speedLimitKbps: number;
}

/** A node's data plane whose counters the test drives; removing a peer loses its counters, like WireGuard. */
export class ScriptedDriver implements Driver {
  readonly kind = 'dry-run';
  readonly protocols = SERVER_PROTOCOLS;
  readonly servers = new Map<number, { instance: number; peers: Map<string, ScriptedPeer> }>();
  /** Called when a peer leaves an interface (benchmarks time cut-offs with it). */
  onRemove: ((serverId: number, publicKey: string) => void) | undefined;
  /** Each server's kernel allowances as last set, by public key. */
  readonly allowances = new Map<number, Map<string, PeerAllowance>>();
  /** What each peer's kernel allowance has counted, by public key, as the test drives it. */
  readonly counted = new Map<string, number>();
  #instances = 0;

  up(spec: ServerSpec): Promise<ServerState> {
    if (!this.servers.has(spec.serverId))
      this.servers.set(spec.serverId, { instance: ++this.#instances, peers: new Map() });
    return Promise.resolve({
      serverId: spec.serverId,
      listenPort: spec.listenPort,
      address: spec.address,
      mtu: spec.mtu,
      publicKey: '',
      peerCount: this.servers.get(spec.serverId)?.peers.size ?? 0,
      ipv6: spec.address6 === undefined ? 'off' : spec.routed6 === true ? 'routed' : 'nat66',
    });
  }
  setPeers(serverId: number, peers: readonly PeerSpec[]): Promise<void> {
    const server = this.#server(serverId);
    const wanted = new Set(peers.map((p) => p.publicKey));
    for (const key of server.peers.keys()) if (!wanted.has(key)) server.peers.delete(key);
    for (const peer of peers) this.#upsert(server.peers, peer);
    return Promise.resolve();
  }
  changePeers(serverId: number, upsert: readonly PeerSpec[], remove: readonly string[]): Promise<void> {
    const server = this.#server(serverId);
    for (const key of remove) if (server.peers.delete(key)) this.onRemove?.(serverId, key);
    for (const peer of upsert) this.#upsert(server.peers, peer);
    return Promise.resolve();
  }
  /** A peer added, or changed with its counters kept, as WireGuard keeps them. */
  #upsert(peers: Map<string, ScriptedPeer>, peer: PeerSpec): void {
    const held = peers.get(peer.publicKey);
    if (held === undefined) peers.set(peer.publicKey, { rx: 0, tx: 0, speedLimitKbps: peer.speedLimitKbps });
    else held.speedLimitKbps = peer.speedLimitKbps;
  }
  readCounters(serverId: number): Promise<CounterReading> {
    const server = this.#server(serverId);
    const peers = [...server.peers].map(([publicKey, c]) => ({
      publicKey,
      rxBytes: c.rx,
      txBytes: c.tx,
      lastHandshakeMs: 0,
    }));
    return Promise.resolve({ instance: String(server.instance), peers });
  }
  readAllowances(serverId: number): Promise<ReadonlyMap<string, number>> {
    const keys = [...(this.allowances.get(serverId)?.keys() ?? [])];
    return Promise.resolve(new Map(keys.map((key) => [key, this.counted.get(key) ?? 0])));
  }
  setAllowances(serverId: number, allowances: readonly PeerAllowance[]): Promise<void> {
    this.#server(serverId);
    const kept = new Map(allowances.map((a) => [a.publicKey, { ...a }]));
    // An allowance removed takes its count with it, as a quota deleted does.
    for (const key of this.allowances.get(serverId)?.keys() ?? []) if (!kept.has(key)) this.counted.delete(key);
    this.allowances.set(serverId, kept);
    return Promise.resolve();
  }
  /** The host never drifts here: tests of drift use the dry-run driver. */
  inspect(): Promise<string[]> {
    return Promise.resolve([]);
  }
  down(serverId: number): Promise<void> {
    this.servers.delete(serverId);
    this.allowances.delete(serverId);
    return Promise.resolve();
  }
  list(): Promise<number[]> {
    return Promise.resolve([...this.servers.keys()]);
  }
  /** The host's networks as a test sets them (documentation space by default: no server subnet overlaps it). */
  networks: string[] = ['192.0.2.10/24'];
  hostNetworks(): Promise<string[]> {
    return Promise.resolve([...this.networks]);
  }
  /** The interface made anew (wireguard-go restarted): every counter starts again at 0. */
  recreate(serverId: number): void {
    const server = this.#server(serverId);
    server.instance = ++this.#instances;
    for (const counters of server.peers.values()) {
      counters.rx = 0;
      counters.tx = 0;
    }
  }
  #server(serverId: number) {
    const server = this.servers.get(serverId);
    if (!server) throw new Error(`server ${serverId} is not up`);
    return server;
  }
}
