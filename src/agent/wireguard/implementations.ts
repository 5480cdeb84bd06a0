/**
 * Which implementation runs each server, and how the driver reaches it: a WireGuard server runs on the kernel
 * module when the node has it (reached through `wg` in its namespace), else on wireguard-go (its global UAPI socket,
 * or `wg`); an AmneziaWG server always runs on amneziawg-go, reached over its own UAPI socket (no `awg` tool needed).
 */
import type { ServerProtocol } from '../../domain/protocols.ts';
import type { CommandRunner } from '../commands.ts';
import { AMNEZIAWG_SOCKET_DIR } from './amneziawg.ts';
import { detectImplementation, type WireGuardImplementation } from './capabilities.ts';
import { type InterfaceConfig, UapiConfig, type WgTarget, WgTool } from './interface-config.ts';
import type { Names } from './names.ts';
import { socketIdentity, UAPI_SOCKET_DIR } from './uapi.ts';
import { UserspaceProcesses } from './userspace.ts';

/** How to reach one server's interface. */
export interface Implementation {
  config: InterfaceConfig;
  at: WgTarget;
  /** The daemon that runs it; null for the kernel module. */
  daemon: UserspaceProcesses | null;
  /** Where its UAPI socket is; null for the kernel module, which has none. */
  socketDir: string | null;
}

export interface ImplementationOptions {
  /** WireGuard servers' implementation; undefined: detected on first use. */
  implementation: WireGuardImplementation | undefined;
  wireguardGoConfig: 'uapi' | 'wg';
  hostNetns: string | undefined;
  readyTimeoutMs: number;
}

export class Implementations {
  /** amneziawg-go's interfaces, for the obfuscation keys only it has. */
  readonly amneziawg = new UapiConfig({ socketDir: AMNEZIAWG_SOCKET_DIR, daemon: 'amneziawg-go' });
  readonly #runner: CommandRunner;
  #implementation: WireGuardImplementation | undefined;
  readonly #wgTool: WgTool;
  readonly #wireguardGoConfig: InterfaceConfig;
  readonly #wireguardGo: UserspaceProcesses;
  readonly #amneziawgGo: UserspaceProcesses;
  /** Each server's protocol as up() or inspect() last had it. */
  readonly #protocols = new Map<number, ServerProtocol>();

  constructor(runner: CommandRunner, options: ImplementationOptions) {
    const { hostNetns, readyTimeoutMs } = options;
    this.#runner = runner;
    this.#implementation = options.implementation;
    this.#wgTool = new WgTool(runner);
    this.#wireguardGoConfig = options.wireguardGoConfig === 'wg' ? this.#wgTool : new UapiConfig();
    this.#wireguardGo = new UserspaceProcesses(
      runner,
      'wireguard-go',
      this.#wireguardGoConfig,
      hostNetns,
      readyTimeoutMs,
    );
    this.#amneziawgGo = new UserspaceProcesses(runner, 'amneziawg-go', this.amneziawg, hostNetns, readyTimeoutMs);
  }

  remember(serverId: number, protocol: ServerProtocol): void {
    this.#protocols.set(serverId, protocol);
  }

  forget(serverId: number): void {
    this.#protocols.delete(serverId);
  }

  /** Server `serverId`'s implementation; one not up since the start is told by whether amneziawg-go serves it. */
  async of(serverId: number, n: Names): Promise<Implementation> {
    const protocol =
      this.#protocols.get(serverId) ??
      ((await socketIdentity(n.iface, AMNEZIAWG_SOCKET_DIR)) === null ? 'wireguard' : 'amneziawg');
    const global = { iface: n.iface, netns: undefined };
    if (protocol === 'amneziawg') {
      return { config: this.amneziawg, at: global, daemon: this.#amneziawgGo, socketDir: AMNEZIAWG_SOCKET_DIR };
    }
    this.#implementation ??= (await detectImplementation(this.#runner)) ?? 'wireguard-go';
    if (this.#implementation === 'kernel') {
      return { config: this.#wgTool, at: { iface: n.iface, netns: n.netns }, daemon: null, socketDir: null };
    }
    return { config: this.#wireguardGoConfig, at: global, daemon: this.#wireguardGo, socketDir: UAPI_SOCKET_DIR };
  }

  /** Either daemon of the server: its protocol cannot change, but a host can hold a leftover of the other kind. */
  async stop(serverId: number): Promise<void> {
    await Promise.all([this.#wireguardGo.stop(serverId), this.#amneziawgGo.stop(serverId)]);
  }

  async stopAll(): Promise<void> {
    await Promise.all([this.#wireguardGo.stopAll(), this.#amneziawgGo.stopAll()]);
  }
}
