import { randomUUID } from 'node:crypto';
import { type Driver, DriverError, type PeerSpec, type ServerState } from './driver.ts';
import type { AgentStatus, DesiredServer, NodeCounters, PeerChange, ResyncReport } from './protocol.ts';

/**
 * The node side: takes desired state from the panel and converges the host to it through the driver.
 * Changes to one server run one after another; different servers proceed independently.
 */
export class Agent {
  /** New at every start of the agent: a change tells the panel to resync the whole node. */
  readonly bootId = randomUUID();
  readonly #driver: Driver;
  readonly #version: string;
  readonly #queues = new Map<number, Promise<unknown>>();
  /** Each server's desired peers by public key, as last applied. */
  readonly #peers = new Map<number, Map<string, PeerSpec>>();

  constructor(driver: Driver, version: string) {
    this.#driver = driver;
    this.#version = version;
  }

  get driverKind(): Driver['kind'] {
    return this.#driver.kind;
  }

  async status(): Promise<AgentStatus> {
    return { bootId: this.bootId, version: this.#version, driver: this.#driver.kind, serverIds: await this.#driver.list() };
  }

  applyServer(desired: DesiredServer): Promise<ServerState> {
    return this.#serial(desired.server.serverId, async () => {
      const state = await this.#driver.up(desired.server);
      const peers = new Map(desired.peers.map((p) => [p.publicKey, p]));
      this.#peers.set(desired.server.serverId, peers);
      await this.#driver.setPeers(desired.server.serverId, [...peers.values()]);
      return { ...state, peerCount: peers.size };
    });
  }

  /**
   * Adds, changes and removes some peers of a server, one change after another per server, so
   * concurrent changes from the panel never overwrite each other. The server must have been
   * applied since this agent started (the panel resyncs a restarted agent first).
   */
  changePeers(serverId: number, change: PeerChange): Promise<void> {
    return this.#serial(serverId, async () => {
      const peers = this.#peers.get(serverId);
      if (!peers) throw new DriverError(`change peers of server ${serverId}`, ['the agent does not run this server yet; the panel resyncs it']);
      for (const key of change.remove) peers.delete(key);
      for (const peer of change.upsert) peers.set(peer.publicKey, peer);
      await this.#driver.changePeers(serverId, change.upsert, change.remove);
    });
  }

  /** The peer counters of every server this node runs; a server that cannot be read is left out. */
  async counters(): Promise<NodeCounters> {
    const servers: NodeCounters['servers'] = [];
    for (const serverId of await this.#driver.list()) {
      const peers = await this.#driver.readCounters(serverId).catch(() => undefined);
      if (peers) servers.push({ serverId, peers });
    }
    return { servers };
  }

  removeServer(serverId: number): Promise<void> {
    return this.#serial(serverId, async () => {
      await this.#driver.down(serverId);
      this.#peers.delete(serverId);
    });
  }

  /** Makes the node hold exactly `servers`: each is applied, any other server of this driver is removed. */
  async resync(servers: readonly DesiredServer[]): Promise<ResyncReport> {
    const report: ResyncReport = { applied: [], removed: [], failures: [] };
    const wanted = new Set(servers.map((s) => s.server.serverId));
    for (const id of await this.#driver.list()) {
      if (wanted.has(id)) continue;
      await this.removeServer(id).then(
        () => report.removed.push(id),
        (error: unknown) => report.failures.push(`remove server ${id}: ${describe(error)}`),
      );
    }
    for (const desired of servers) {
      await this.applyServer(desired).then(
        () => report.applied.push(desired.server.serverId),
        (error: unknown) => report.failures.push(`server ${desired.server.serverId}: ${describe(error)}`),
      );
    }
    return report;
  }

  #serial<T>(serverId: number, work: () => Promise<T>): Promise<T> {
    const previous = this.#queues.get(serverId) ?? Promise.resolve();
    const next = previous.then(work, work);
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    this.#queues.set(serverId, settled);
    void settled.then(() => {
      if (this.#queues.get(serverId) === settled) this.#queues.delete(serverId);
    });
    return next;
  }
}

export function describe(error: unknown): string {
  if (error instanceof DriverError) return error.failures.join('; ');
  return error instanceof Error ? error.message : String(error);
}
