import type { NodeConnection } from '../agent/connection.ts';
import type { PeerChange } from '../agent/protocol.ts';
import type { Clock } from '../domain/clock.ts';
import { AppError, messageOf } from '../domain/errors.ts';
import type { ChangeNotice } from '../domain/notifications.ts';
import type { EventDraft, PanelEvent } from '../domain/events.ts';
import { type Db, type Tx, write } from '../store/db.ts';
import type { NodeRow } from '../store/nodes.ts';
import { type ActivityDraft, recordActivities } from './activity.ts';
import { recordEvents } from './events.ts';
import { notifyChange } from './notifications.ts';

/** Runs inside the transaction that commits a change, with its result (e.g. to store an idempotent reply). */
export type CommitHook<T> = (tx: Tx, result: T) => Promise<void>;

/** A CommitHook that is also given the events the change recorded, in order (to queue a ping's one delivery). */
export type RecordedHook<T> = (tx: Tx, result: T, events: readonly PanelEvent[]) => Promise<void>;

/** One server's peers to change on its node. */
export interface PeerPush {
  node: NodeRow;
  serverId: number;
  change: PeerChange;
}

/**
 * What a mutation changed, in the order it happened: the events (each with its webhook outbox rows
 * and mail), the activity rows and change mails to record in its transaction, and the peers its
 * nodes must get.
 */
export interface Change {
  events: EventDraft[];
  activity: ActivityDraft[];
  mail: Pick<ChangeNotice, 'headline' | 'details' | 'actor'>[];
  /** On the node before the transaction commits, or nothing is saved (deploy_failed): a peer that must exist. */
  deploy: PeerPush[];
  /** After commit; a node that cannot is apply_failed (the change is saved, its next resync converges it). */
  apply: PeerPush[];
  /** After commit, best effort: a node that misses these drops the peers at its next resync. */
  remove: PeerPush[];
}

/** A change with the given parts, the others empty. */
export function change(parts: Partial<Change>): Change {
  return { events: [], activity: [], mail: [], deploy: [], apply: [], remove: [], ...parts };
}

/** Several changes as one, in order. */
export function mergeChanges(changes: readonly Change[]): Change {
  return {
    events: changes.flatMap((c) => c.events),
    activity: changes.flatMap((c) => c.activity),
    mail: changes.flatMap((c) => c.mail),
    deploy: changes.flatMap((c) => c.deploy),
    apply: changes.flatMap((c) => c.apply),
    remove: changes.flatMap((c) => c.remove),
  };
}

/** Adds `more` to the end of `target` in place: what mergeChanges does, without copying a long change each time. */
export function appendChange(target: Change, more: Change): void {
  target.events.push(...more.events);
  target.activity.push(...more.activity);
  target.mail.push(...more.mail);
  target.deploy.push(...more.deploy);
  target.apply.push(...more.apply);
  target.remove.push(...more.remove);
}

/**
 * Records a change inside its transaction: each event with its webhook outbox rows and mail, then
 * each activity row, then the change mails. The change and its records all land, or none do.
 * Returns the events as recorded, in order.
 */
async function recordChange(tx: Tx, clock: Clock, change: Change): Promise<PanelEvent[]> {
  const events = await recordEvents(tx, clock, change.events);
  await recordActivities(tx, clock, change.activity);
  for (const mail of change.mail) await notifyChange(tx, clock, mail);
  return events;
}

/** Merges per-device pushes into one per server, in the order servers first appear. */
function perServer(pushes: readonly PeerPush[]): PeerPush[] {
  const byServer = new Map<number, PeerPush>();
  for (const push of pushes) {
    const merged = byServer.get(push.serverId);
    if (merged === undefined) {
      const own = { ...push.change, upsert: [...push.change.upsert], remove: [...push.change.remove] };
      byServer.set(push.serverId, { ...push, change: own });
    } else {
      merged.change.upsert.push(...push.change.upsert);
      merged.change.remove.push(...push.change.remove);
    }
  }
  return [...byServer.values()];
}

/**
 * Records the events, activity rows and mails of part of a change at once, inside the transaction of `record`
 * (a group's chunk, so a group's records are never all held); returns the part's peers, still to publish.
 */
export type RecordPart = (part: Change) => Promise<Change>;

/** Whom to tell that new outbox rows are committed, so they go out at once rather than at the next poll. */
export interface Senders {
  nudgeWebhooks(): void;
}

/** The connection to each node (NodeConnections, src/services/nodes.ts): all the publisher needs of it. */
export interface Connections {
  for(node: NodeRow): NodeConnection;
}

/**
 * Applies a peer change on a node. `apply_failed`: the change is saved and converges at the next
 * resync; `deploy_failed`: the caller rolls back, nothing is saved.
 */
async function applyOrFail(
  connections: Connections,
  node: NodeRow,
  serverId: number,
  change: PeerChange,
  code: 'apply_failed' | 'deploy_failed',
): Promise<void> {
  try {
    await connections.for(node).changePeers(serverId, change);
  } catch (error) {
    const what = code === 'apply_failed' ? 'the change was saved, but' : 'nothing was saved:';
    const message = `${what} node '${node.name}' could not apply it: ${messageOf(error)}`;
    throw new AppError(code, message, {}, undefined, error);
  }
}

/**
 * The one path by which a change of state lands, whoever makes it (API, CLI, console, workers): recorded
 * in its transaction, the peers it needs before commit applied there, then published after commit (the
 * senders nudged, peers pushed per server). What a change records is built by the intent-named
 * constructors of src/services/change-kinds.ts (and the device paths' builders).
 */
export class ChangePublisher {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #connections: Connections;
  readonly #senders: Senders;

  constructor(db: Db, clock: Clock, connections: Connections, senders: Senders) {
    this.#db = db;
    this.#clock = clock;
    this.#connections = connections;
    this.#senders = senders;
  }

  /**
   * Runs `work` in a transaction and commits what it changed: records it, applies its `deploy`
   * peers before commit, runs `onCommit` in the same transaction, nudges the senders after commit
   * when it recorded events, and publishes its peers.
   */
  async commit<T>(work: (tx: Tx) => Promise<{ result: T; change: Change }>, onCommit?: RecordedHook<T>): Promise<T> {
    const { result, change } = await this.record(work, onCommit);
    await this.publish(change);
    return result;
  }

  /**
   * `commit` without publishing the peers: the caller publishes them after commit, maybe merged with those
   * of further transactions (a group changed in several, whose nodes get one peer change per server). `work`
   * may record parts of its change as it goes (`recordPart`); the senders are nudged after commit when any
   * events were recorded.
   */
  async record<T>(
    work: (tx: Tx, recordPart: RecordPart) => Promise<{ result: T; change: Change }>,
    onCommit?: RecordedHook<T>,
  ): Promise<{ result: T; change: Change }> {
    let recordedEvents = false;
    const done = await write(this.#db, async (tx) => {
      const recordPart: RecordPart = async (part) => {
        const events = await recordChange(tx, this.#clock, part);
        if (events.length > 0) recordedEvents = true;
        return change({ deploy: part.deploy, apply: part.apply, remove: part.remove });
      };
      const made = await work(tx, recordPart);
      const events = await recordChange(tx, this.#clock, made.change);
      if (events.length > 0) recordedEvents = true;
      await this.applyBeforeCommit(made.change);
      await onCommit?.(tx, made.result, events);
      return made;
    });
    if (recordedEvents) this.#senders.nudgeWebhooks();
    return done;
  }

  /**
   * The peers a change needs on their nodes before its transaction commits (a new or moved
   * device): a node that cannot take them is deploy_failed, and the caller's transaction rolls back.
   */
  async applyBeforeCommit(change: Change): Promise<void> {
    for (const push of perServer(change.deploy)) {
      await applyOrFail(this.#connections, push.node, push.serverId, push.change, 'deploy_failed');
    }
  }

  /**
   * After commit (and its nudge, in `record`): each server's node gets one peer change; the first that cannot
   * apply is apply_failed (saved), removals are best effort.
   */
  async publish(change: Change): Promise<void> {
    for (const push of perServer(change.remove)) {
      await this.#connections
        .for(push.node)
        .changePeers(push.serverId, push.change)
        .catch(() => undefined);
    }
    for (const push of perServer(change.apply)) {
      await applyOrFail(this.#connections, push.node, push.serverId, push.change, 'apply_failed');
    }
  }
}

/** A process that reaches no node: its changes push no peers (the CLI's: keys, users, nodes). */
const NO_NODES: Connections = {
  for(node) {
    throw new Error(`this process reaches no node (node ${node.name})`);
  },
};

/**
 * The publisher of a process that runs no sender and reaches no node (the CLI): what it records is sent
 * by the panels, at their next poll.
 */
export function quietPublisher(db: Db, clock: Clock): ChangePublisher {
  return new ChangePublisher(db, clock, NO_NODES, { nudgeWebhooks: () => undefined });
}
