import { FailureListError } from '../domain/errors.ts';
import type { Obfuscation, ServerProtocol } from '../domain/protocols.ts';

/**
 * What a node driver does to a VPN host: bring a server up, set its peers, read their counters,
 * take it down. Every method is idempotent: it compares the desired state with what the host has
 * and changes only the difference, so calling it again with the same input changes nothing.
 * A method goes on past a failed step and throws one DriverError listing every step that failed.
 * Drivers know nothing of the database or HTTP.
 */
export interface ServerSpec {
  /** The panel's server id; names on the host derive from it. */
  serverId: number;
  /** base64 WireGuard private key of the server. */
  privateKey: string;
  listenPort: number;
  /** The server's own address with the subnet's prefix length, e.g. `10.128.0.1/24`. */
  address: string;
  mtu: number;
  /** Clients of this server may reach each other; absent: false (docs/dataplane.md, "Client isolation"). */
  clientToClient?: boolean;
  /** The server answers DNS on its tunnel address, so clients may reach port 53 there; absent: false. */
  dnsOnServer?: boolean;
  /**
   * The server's IPv6 address with its subnet6 prefix, e.g. `fd3a:1b2c:4d5e:1::1/64`. Absent: the server has no
   * IPv6 (older panels, or IPv6 off).
   */
  address6?: string;
  /**
   * subnet6 is a global prefix the operator routes to the node: routed without NAT. Absent/false: NAT66
   * (masquerade) to the node's uplink when it has global IPv6 (docs/dataplane.md, "IPv6").
   */
  routed6?: boolean;
  /** Absent: wireguard. An amneziawg server runs amneziawg-go with `obfuscation` (docs/dataplane.md, "AmneziaWG"). */
  protocol?: ServerProtocol;
  /** Present exactly when `protocol` is amneziawg. */
  obfuscation?: Obfuscation;
}

export interface PeerSpec {
  publicKey: string;
  /** The device's single address, e.g. `10.128.0.2/32`. */
  allowedIp: string;
  /** The device's IPv6 /128, e.g. `fd3a:1b2c:4d5e:1::2/128`. Absent: none. */
  allowedIp6?: string;
  /**
   * kbit/s (1000 bit/s) for download and upload each, both families together; 0 = unlimited. A limit needs an IPv4
   * /32 `allowedIp` (and an `allowedIp6`, when given, of a single address).
   */
  speedLimitKbps: number;
}

/** A limited peer's kernel allowance (docs/dataplane.md, "Where each byte is counted"). */
export interface PeerAllowance {
  publicKey: string;
  allowedIp: string;
  allowedIp6?: string;
  /** The count (bytes, as the peer's quota counts them) above which the peer's traffic is dropped. */
  limitBytes: number;
}

export interface PeerCounters {
  publicKey: string;
  /** Bytes the server received from the peer (the device's upload). */
  rxBytes: number;
  /** Bytes the server sent to the peer (the device's download). */
  txBytes: number;
  /** Milliseconds since the epoch of the latest handshake, 0 for never. */
  lastHandshakeMs: number;
}

/**
 * A server's peer counters. `instance` names the interface they were read from: when it changes,
 * the interface was made anew and every counter started again from 0.
 */
/** A driver may hand out the same reading again while nothing changed: readers do not change it. */
export interface CounterReading {
  readonly instance: string;
  readonly peers: readonly Readonly<PeerCounters>[];
}

/**
 * What the node did with a server's IPv6: off = no address6; nat66 = clients reach IPv6 beyond the node through
 * masquerade; routed = routed without NAT; tunnel_only = the node has no IPv6 uplink: only the server's IPv6
 * address answers inside the tunnel.
 */
export type Ipv6Mode = 'off' | 'nat66' | 'routed' | 'tunnel_only';

export interface ServerState {
  serverId: number;
  listenPort: number;
  address: string;
  mtu: number;
  publicKey: string;
  peerCount: number;
  ipv6: Ipv6Mode;
}

export interface Driver {
  readonly kind: 'wireguard' | 'dry-run';
  /** The protocols this driver can run servers of on this host. */
  readonly protocols: readonly ServerProtocol[];
  /** Creates the server, or changes the existing one to match `spec`; peers already set are kept. */
  up(spec: ServerSpec): Promise<ServerState>;
  /**
   * Makes the server's peers and their speed limits exactly `peers`: adds, changes and removes only the
   * difference, in bulk. It reads the host's peers and shaping, so what the host lost comes back.
   */
  setPeers(serverId: number, peers: readonly PeerSpec[]): Promise<void>;
  /**
   * Adds or changes `upsert` and removes the keys in `remove`, leaving every other peer unread and
   * untouched: for changes whose difference the caller knows, so their cost does not grow with the
   * server's peer count. Removing a missing peer or setting one as it is changes nothing. A removed
   * peer's speed limit goes with it; a limit is added, changed or removed only where it differs.
   */
  changePeers(serverId: number, upsert: readonly PeerSpec[], remove: readonly string[]): Promise<void>;
  /** Current counters of every peer of the server. */
  readCounters(serverId: number): Promise<CounterReading>;
  /** What each peer's kernel allowance has counted so far, by public key; a peer without one is absent. */
  readAllowances(serverId: number): Promise<ReadonlyMap<string, number>>;
  /** Makes the server's kernel allowances exactly `allowances`: a peer not among them has none. */
  setAllowances(serverId: number, allowances: readonly PeerAllowance[]): Promise<void>;
  /** Removes the server and everything it made on the host; a missing server is not an error. */
  down(serverId: number): Promise<void>;
  /**
   * What the host differs in from `spec` and `peers` (what was applied last: the peers that are on the
   * interface), read without changing anything: the drift check. Each difference is one readable line;
   * none when the host matches. up() and setPeers() with the same input repair every one of them, setAllowances()
   * those of the kernel allowances.
   */
  inspect(spec: ServerSpec, peers: readonly PeerSpec[]): Promise<string[]>;
  /** Ids of the servers this driver has on the host (to resync or clean up after a restart). */
  list(): Promise<number[]>;
  /** The host's own interface addresses as CIDRs (`192.0.2.2/24`, `fd00::2/64`); throws when it cannot read them. */
  hostNetworks(): Promise<string[]>;
}

export class DriverError extends FailureListError {
  constructor(action: string, failures: readonly string[]) {
    super(`${action}: ${failures.join('; ')}`, failures);
    this.name = 'DriverError';
  }
}
