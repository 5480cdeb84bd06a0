import { messageOf } from '../domain/errors.ts';
import type { FastifyBaseLogger } from 'fastify';
import { type DesiredServer, desiredDigest, digestWithoutIpv6, type NodeDigest } from '../agent/protocol.ts';
import { driftRepaired } from '../services/change-kinds.ts';
import type { ChangePublisher } from '../services/changes.ts';
import { desiredStateOfServer } from '../services/desired-state.ts';
import type { NodeConnections } from '../services/nodes.ts';
import { ipv6Of } from '../services/servers.ts';
import type { UsageService } from '../services/usage.ts';
import type { Db } from '../store/db.ts';
import { listNodes, type NodeRow } from '../store/nodes.ts';
import { listServersOfNode, setServerIpv6 } from '../store/servers.ts';
import { type Lease, WorkerLoop } from './loop.ts';
import { NODE_WORK_SLOTS, Slots } from './slots.ts';

export interface DriftRepairOptions {
  intervalMs: number;
  /** Several panels on one database: the rounds run on the panel that holds this. */
  lease?: Lease;
  /** Shared with the node monitor's resyncs (see Slots). */
  slots?: Slots;
}

/** One server as the node reports it, absent when the node does not run it. */
type Reported = NodeDigest['servers'][number] | undefined;

export interface Comparison {
  /** What differs, readable; empty when the node matches the database. */
  differences: string[];
  /**
   * True when the agent holds exactly the database's desired state and only its host differs: no
   * change of the panel can be under way, so the server is repaired at once. Otherwise the difference
   * may be a change the API is applying right now (a device is created on the node before its row
   * commits, updated on the node after), so it is repaired only when a second round sees it unchanged.
   */
  hostOnly: boolean;
  /** Both sides' digests: a second round that sees the same is not looking at a change in flight. */
  observation: string;
}

/**
 * The digest the agent should report for `desired`. An agent that names no IPv6 mode beside its digest may predate
 * IPv6 and hash none of its fields: compared with the full digest alone it would differ every round, and every
 * repair would leave it differing, so its digest also matches the one it can compute (`digestWithoutIpv6`).
 */
function expectedDigest(reported: Reported, desired: DesiredServer): string {
  const full = desiredDigest(desired);
  if (reported === undefined || reported.digest === null || reported.ipv6 !== undefined) return full;
  const withoutIpv6 = digestWithoutIpv6(desired);
  return reported.digest === withoutIpv6 ? withoutIpv6 : full;
}

/** Compares one server of a node with the database (`desired` undefined: the panel does not want it there). */
export function compareServer(serverId: number, reported: Reported, desired: DesiredServer | undefined): Comparison {
  const wanted = desired === undefined ? null : expectedDigest(reported, desired);
  const differences: string[] = [];
  if (desired === undefined) {
    differences.push(`the node runs server ${serverId}, which the database does not place on it`);
  } else if (reported === undefined) differences.push(`the node does not run server ${serverId}`);
  else if (reported.digest !== null && reported.digest !== wanted) {
    differences.push('the desired state the agent holds differs from the database');
  }
  differences.push(...(reported?.discrepancies ?? []));
  return {
    differences,
    hostOnly: reported !== undefined && reported.digest !== null && reported.digest === wanted,
    observation: JSON.stringify([reported?.digest ?? 'absent', wanted ?? 'absent']),
  };
}

/**
 * The drift repair loop: asks every online node for each server's digest and host check (GET
 * /v1/digest) and compares them with the database; a server that differs gets its whole desired
 * state again (applyServer), one the panel does not place on the node is removed. Matching servers
 * cost a digest on each side and nothing is sent. Each repair is a warn line and an activity entry
 * by `system`. Servers still deploying are left to their deploy.
 */
export class DriftRepair {
  readonly #db: Db;
  readonly #connections: NodeConnections;
  readonly #changes: ChangePublisher;
  readonly #usage: UsageService;
  readonly #log: FastifyBaseLogger;
  /** Per node, the observation of each server that differed last round and was not repaired. */
  #pending = new Map<number, Map<number, string>>();
  readonly #loop: WorkerLoop<void>;
  readonly #slots: Slots;

  constructor(
    db: Db,
    connections: NodeConnections,
    changes: ChangePublisher,
    usage: UsageService,
    log: FastifyBaseLogger,
    options: DriftRepairOptions,
  ) {
    this.#db = db;
    this.#connections = connections;
    this.#changes = changes;
    this.#usage = usage;
    this.#log = log;
    this.#slots = options.slots ?? new Slots(NODE_WORK_SLOTS);
    this.#loop = new WorkerLoop(() => this.#checkAll(), {
      intervalMs: options.intervalMs,
      onError: (err) => this.#log.error({ err }, 'drift check round failed'),
      lease: options.lease,
    });
  }

  /** One round over every online node; concurrent calls share the round in progress. */
  checkAll(): Promise<void> {
    return this.#loop.runOnce();
  }

  async #checkAll(): Promise<void> {
    const nodes = await listNodes(this.#db);
    const online = nodes.filter((node) => node.status === 'online');
    this.#pending = new Map([...this.#pending].filter(([id]) => online.some((n) => n.id === id)));
    const failed = (node: NodeRow) => (error: unknown) => {
      this.#log.warn({ node: node.name, err: messageOf(error) }, 'drift check failed');
    };
    await Promise.all(online.map((node) => this.#slots.run(() => this.#check(node)).catch(failed(node))));
  }

  async #check(node: NodeRow): Promise<void> {
    const connection = this.#connections.for(node);
    // The node first, the database second: a change committed in between reads as a difference
    // and waits for the next round instead of being undone.
    const reported = new Map((await connection.digest()).servers.map((s) => [s.serverId, s]));
    const rows = await listServersOfNode(this.#db, node.id);
    const deploying = new Set(rows.filter((r) => r.status === 'deploying').map((r) => r.id));
    const running = rows.filter((r) => r.status !== 'deploying');
    const runningById = new Map(running.map((r) => [r.id, r]));
    const before = this.#pending.get(node.id);
    const pending = new Map<number, string>();
    for (const serverId of new Set([...reported.keys(), ...runningById.keys()])) {
      if (deploying.has(serverId)) continue;
      const row = runningById.get(serverId);
      // One server's desired state at a time, dropped before the next is read: never every device of the node.
      const want = row && (await desiredStateOfServer(this.#db, row, this.#usage));
      const comparison = compareServer(serverId, reported.get(serverId), want);
      const mode = reported.get(serverId)?.ipv6;
      if (comparison.differences.length === 0) {
        // The agent holds the database's state: the mode it reports is that state's (a row made before the node
        // applied it says off).
        if (mode !== undefined && mode !== row?.ipv6) await setServerIpv6(this.#db, serverId, mode);
        continue;
      }
      if (!comparison.hostOnly && before?.get(serverId) !== comparison.observation) {
        pending.set(serverId, comparison.observation);
        continue;
      }
      await this.#repair(node, serverId, row?.name, want, comparison.differences);
    }
    this.#pending.set(node.id, pending);
  }

  async #repair(
    node: NodeRow,
    serverId: number,
    name: string | undefined,
    want: DesiredServer | undefined,
    differences: string[],
  ): Promise<void> {
    const connection = this.#connections.for(node);
    const server = name === undefined ? `server ${serverId}` : `server ${name} (${serverId})`;
    try {
      if (want === undefined) await connection.removeServer(serverId);
      else await setServerIpv6(this.#db, serverId, ipv6Of(await connection.applyServer(want)));
    } catch (error) {
      const fields = { node: node.name, server: serverId, differences, err: messageOf(error) };
      this.#log.warn(fields, 'drift repair failed; tried again next round');
      return;
    }
    const done = want === undefined ? 'removed from the node' : 'applied again';
    this.#log.warn({ node: node.name, server: serverId, differences }, `drift repaired: ${server} ${done}`);
    const repaired = driftRepaired({ node, serverId, server, done, differences });
    await this.#changes.commit(async () => ({ result: undefined, change: repaired }));
  }

  start(): void {
    this.#loop.start();
  }

  stop(): Promise<void> {
    return this.#loop.stop();
  }
}
