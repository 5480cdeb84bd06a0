/**
 * The userspace daemons the driver starts, one per server: wireguard-go for WireGuard servers (when the kernel
 * module is absent) and amneziawg-go for AmneziaWG servers (always). Both are the same program to the driver:
 * started as `BINARY -f IFACE` in the host namespace (so the interface's UDP socket stays there), waited for until
 * they answer on their UAPI socket, stopped.
 */
import type { ChildHandle, CommandRunner } from '../commands.ts';
import type { InterfaceConfig } from './interface-config.ts';

const READY_POLL_MS = 20;
/** Keeps the daemons quiet except for errors, and stops their "use the kernel module" banner. */
const USERSPACE_ENV = { LOG_LEVEL: 'error', WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD: '1' };

export type UserspaceBinary = 'wireguard-go' | 'amneziawg-go';

export class UserspaceProcesses {
  readonly #runner: CommandRunner;
  readonly #binary: UserspaceBinary;
  readonly #config: InterfaceConfig;
  readonly #hostNetns: string | undefined;
  readonly #readyTimeoutMs: number;
  /** Children started here, by server id. */
  readonly #children = new Map<number, ChildHandle>();

  /** `config`: how the driver reaches the daemon's interfaces, used to see whether one answers. */
  constructor(
    runner: CommandRunner,
    binary: UserspaceBinary,
    config: InterfaceConfig,
    hostNetns: string | undefined,
    readyTimeoutMs: number,
  ) {
    this.#runner = runner;
    this.#binary = binary;
    this.#config = config;
    this.#hostNetns = hostNetns;
    this.#readyTimeoutMs = readyTimeoutMs;
  }

  /** Whether the server's daemon was started here and has not exited. */
  has(serverId: number): boolean {
    return this.#children.has(serverId);
  }

  /**
   * Starts the daemon for interface `iface` and waits until it answers; false (with the reason in `failures`) when
   * it exits or stays silent. `earlierAnswered`: an earlier agent's process had the interface.
   */
  async start(serverId: number, iface: string, earlierAnswered: boolean, failures: string[]): Promise<boolean> {
    const binary = this.#binary;
    const answers = (): Promise<boolean> => this.#config.answers(iface);
    // An earlier agent's daemon exits when its interface is deleted and then unlinks its socket path, which
    // would take a new one's socket with it: wait until it is gone.
    if (earlierAnswered && !(await this.#poll(async () => !(await answers())))) {
      failures.push(`an earlier ${binary} of ${iface} still answers after ${this.#readyTimeoutMs} ms`);
      return false;
    }
    const child = this.#runner.start(binary, ['-f', iface], { netns: this.#hostNetns, env: USERSPACE_ENV });
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
    if (exited) failures.push(`${binary} ${iface} exited at start (${how}): ${child.stderrTail() || 'no message'}`);
    else {
      failures.push(`${binary} ${iface} did not answer within ${this.#readyTimeoutMs} ms`);
      await child.stop();
    }
    return false;
  }

  /** Stops the server's daemon if it was started here. */
  async stop(serverId: number): Promise<void> {
    await this.#children.get(serverId)?.stop();
    this.#children.delete(serverId);
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.#children.values()].map((c) => c.stop()));
    this.#children.clear();
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
}
