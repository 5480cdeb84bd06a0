/**
 * How the driver reads and configures a WireGuard interface: `WgTool` runs `wg` (the kernel module is only
 * reachable through netlink, which `wg` speaks, in the interface's namespace); `UapiConfig` talks to
 * wireguard-go's UAPI socket itself (uapi.ts), which spares a process per change and per counter read
 * (docs/dataplane.md, "Talking to WireGuard"). Both take and give the same values, so the driver and the peer
 * batching (peers.ts) do not know which one runs.
 */
import type { CommandRunner } from '../commands.ts';
import { type Dump, parseDump } from './host-readers.ts';
import { UapiClient, type UapiOptions, type UapiPeer } from './uapi.ts';

/** An interface and where `wg` must run to reach it (undefined: the agent's own namespace). */
export type WgTarget = { iface: string; netns: string | undefined };

/** A peer change: removed, or its allowed ips replaced (comma-separated as `wg` prints them, '' for none). */
export type PeerChange = UapiPeer;

export interface InterfaceConfig {
  /** 'wg' or 'uapi', for logs and benchmarks. */
  readonly kind: 'wg' | 'uapi';
  /** Key, port and every peer with its allowed ips and counters (`wg show IF dump`). */
  read(at: WgTarget): Promise<Dump>;
  /** The same, where the peers' allowed ips may be left '' (counter reads). */
  readCounters(at: WgTarget): Promise<Dump>;
  /** Sets the private key and, when given, the listen port. */
  setDevice(at: WgTarget, privateKey: string, listenPort?: number): Promise<void>;
  /** Applies the changes in order in one call; throws when any is refused. */
  changePeers(at: WgTarget, changes: readonly PeerChange[]): Promise<void>;
  /** Whether a (wireguard-go) interface of this name answers. */
  answers(iface: string): Promise<boolean>;
}

export class WgTool implements InterfaceConfig {
  readonly kind = 'wg';
  readonly #runner: CommandRunner;

  constructor(runner: CommandRunner) {
    this.#runner = runner;
  }

  async read(at: WgTarget): Promise<Dump> {
    const { stdout } = await this.#runner.run('wg', ['show', at.iface, 'dump'], { netns: at.netns });
    return parseDump(stdout);
  }

  readCounters(at: WgTarget): Promise<Dump> {
    return this.read(at);
  }

  async setDevice(at: WgTarget, privateKey: string, listenPort?: number): Promise<void> {
    const port = listenPort === undefined ? [] : ['listen-port', String(listenPort)];
    // The key through stdin, never argv (which any user can read in /proc).
    await this.#runner.run('wg', ['set', at.iface, 'private-key', '/dev/stdin', ...port], {
      input: `${privateKey}\n`,
      netns: at.netns,
    });
  }

  async changePeers(at: WgTarget, changes: readonly PeerChange[]): Promise<void> {
    const args = changes.flatMap((c) =>
      'remove' in c ? ['peer', c.publicKey, 'remove'] : ['peer', c.publicKey, 'allowed-ips', c.allowedIps],
    );
    await this.#runner.run('wg', ['set', at.iface, ...args], { netns: at.netns });
  }

  answers(iface: string): Promise<boolean> {
    return this.#runner.run('wg', ['show', iface, 'listen-port']).then(
      () => true,
      () => false,
    );
  }
}

/** wireguard-go and amneziawg-go: their sockets are global, so `at.netns` does not matter. */
export class UapiConfig implements InterfaceConfig {
  readonly kind = 'uapi';
  readonly #client: UapiClient;

  constructor(options: UapiOptions = {}) {
    this.#client = new UapiClient(options);
  }

  read(at: WgTarget): Promise<Dump> {
    return this.#client.get(at.iface);
  }

  readCounters(at: WgTarget): Promise<Dump> {
    return this.#client.getCounters(at.iface);
  }

  setDevice(at: WgTarget, privateKey: string, listenPort?: number): Promise<void> {
    return this.#client.setDevice(at.iface, privateKey, listenPort);
  }

  changePeers(at: WgTarget, changes: readonly PeerChange[]): Promise<void> {
    return this.#client.setPeers(at.iface, changes);
  }

  /** Device keys beside the private key and port: amneziawg-go's obfuscation (amneziawg.ts). */
  setDeviceKeys(at: WgTarget, keys: ReadonlyMap<string, string>): Promise<void> {
    return this.#client.setDeviceKeys(at.iface, keys);
  }

  answers(iface: string): Promise<boolean> {
    return this.#client.answers(iface);
  }
}
