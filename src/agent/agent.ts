import { messageOf } from '../domain/errors.ts';
import { randomUUID } from 'node:crypto';
import { type Clock, systemClock } from '../domain/clock.ts';
import {
  type Driver,
  DriverError,
  type Ipv6Mode,
  type PeerAllowance,
  type PeerSpec,
  type ServerSpec,
  type ServerState,
} from './driver.ts';
import {
  type AgentPeer,
  type AgentStatus,
  type DesiredServer,
  desiredDigest,
  type NodeDigest,
  type NodePeers,
  type PeerChange,
  type ResyncReport,
  type UsageAck,
  type UsageReport,
} from './protocol.ts';
import { MemoryJournal, UsageLedger } from './usage-ledger.ts';
import { KeyedQueue } from './keyed-queue.ts';
import { quotaAllowance } from './quota/allowance.ts';
import { METER_INTERVAL_MS, MeteringTicks } from './metering-ticks.ts';
import { type NodeObserver, UNOBSERVED_NODE } from './metrics.ts';
import { isOn, type Standing, specOf, unthrottle } from './standing.ts';

/** A desired peer and where its allowance started on this node's meter. */
interface PeerState {
  peer: AgentPeer;
  /** The device's meter when `peer.limits.remainingBytes` was what it had left. */
  grantMeter: number;
  /** The meter when the period of the allowance ended (a monthly count restarted), once it has. */
  rolloverMeter: number | undefined;
}

export interface AgentOptions {
  ledger?: UsageLedger;
  clock?: Clock;
  /** How often counters are read, deltas booked and limits enforced. */
  meterIntervalMs?: number;
  /** Told what the agent does, for its metrics. */
  observer?: NodeObserver;
}

/** Servers inspected at once by the drift check: each inspection runs a few commands. */
const INSPECT_CONCURRENCY = 8;

/** What the quotas counted, read before the counters; null where no kernel allowance is kept or wanted. */
type QuotaCounts = ReadonlyMap<string, number> | null;

/** The error a step ended with, if any: the steps after it still run, and it is thrown at the end. */
function settled(step: Promise<void>): Promise<unknown> {
  return step.then(
    () => undefined,
    (error: unknown) => error ?? new Error('failed'),
  );
}

/**
 * The node side: takes desired state from the panel and converges the host to it through the driver.
 * It also meters every peer (see UsageLedger) and enforces each device's allowance and expiry on its
 * own: a device that used its allowance or expired leaves its server's interface, and comes back when
 * a new allowance (a reset, a higher limit, a new month) or expiry allows it again. A device whose limits say
 * `throttle` stays past its allowance at its throttle speed, and has its own speed back as soon as one allows it.
 * Changes to one server run one after another; different servers proceed independently.
 */
export class Agent {
  /** New at every start of the agent: a change tells the panel to resync the whole node. */
  readonly bootId = randomUUID();
  readonly #driver: Driver;
  readonly #version: string;
  readonly #ledger: UsageLedger;
  readonly #clock: Clock;
  readonly #observer: NodeObserver;
  /** One operation per server at a time. */
  readonly #serial = new KeyedQueue<number>();
  /** Each server's spec, as last applied. */
  readonly #specs = new Map<number, ServerSpec>();
  /** Each server's IPv6 as its last apply left it, for the resync report and the digest. */
  readonly #ipv6 = new Map<number, Ipv6Mode>();
  /** Each server's desired peers by public key, as last applied. */
  readonly #peers = new Map<number, Map<string, PeerState>>();
  /** The public keys each server's interface holds: the desired peers that are not cut off. */
  readonly #admitted = new Map<number, Set<string>>();
  /**
   * Of those, the ones the interface holds at their throttle speed. A peer joins it only once its throttle is
   * applied, so its kernel allowance (which drops all past the limit) stays until then: it never runs unlimited.
   */
  readonly #throttled = new Map<number, Set<string>>();
  /** Servers whose kernel holds allowances this agent set (docs/dataplane.md, "Where each byte is counted"). */
  readonly #allowanced = new Set<number>();
  /** What each server's quotas had counted at the last tick. */
  readonly #lastCounted = new Map<number, ReadonlyMap<string, number>>();
  /**
   * Each server's digest of its desired state, until an apply, change or removal: the drift check asks for it every
   * 15 s, and made anew it was a string a peer each time.
   */
  readonly #digests = new Map<number, string>();
  readonly #ticks: MeteringTicks;

  constructor(driver: Driver, version: string, options: AgentOptions = {}) {
    this.#driver = driver;
    this.#version = version;
    this.#ledger = options.ledger ?? new UsageLedger(new MemoryJournal());
    this.#clock = options.clock ?? systemClock;
    this.#observer = options.observer ?? UNOBSERVED_NODE;
    this.#observer.unacknowledgedBatches(this.#ledger.unacknowledgedBatches);
    const metered = {
      ids: () => this.#peers.keys(),
      meter: (serverId: number) => this.#enforce(serverId),
      flush: () => this.#ledger.flush(),
    };
    this.#ticks = new MeteringTicks(this.#serial, metered, options.meterIntervalMs ?? METER_INTERVAL_MS);
  }

  get driverKind(): Driver['kind'] {
    return this.#driver.kind;
  }

  async status(): Promise<AgentStatus> {
    // A host whose links cannot be read still answers its heartbeat; the panel then adds no server here.
    const [serverIds, networks] = await Promise.all([
      this.#driver.list(),
      this.#driver.hostNetworks().catch(() => undefined),
    ]);
    const status: AgentStatus = {
      bootId: this.bootId,
      version: this.#version,
      driver: this.#driver.kind,
      serverIds,
      protocols: [...this.#driver.protocols],
    };
    return networks === undefined ? status : { ...status, networks };
  }

  applyServer(desired: DesiredServer): Promise<ServerState> {
    const serverId = desired.server.serverId;
    return this.#serial.run(serverId, async () => {
      const startedMs = performance.now();
      // What the interface counted so far is booked before up() may make it anew; the quotas are read before it.
      const running = (await this.#driver.list()).includes(serverId);
      const counted = running ? await this.#driver.readAllowances(serverId).catch(() => null) : null;
      if (running) await this.#meter(serverId).catch(() => undefined);
      const state = await this.#driver.up(desired.server);
      this.#specs.set(serverId, desired.server);
      this.#digests.delete(serverId);
      this.#ipv6.set(serverId, state.ipv6);
      const before = this.#peers.get(serverId);
      const wasAdmitted = this.#admitted.get(serverId) ?? new Set<string>();
      const wasThrottled = this.#throttled.get(serverId) ?? new Set<string>();
      const peers = new Map(desired.peers.map((p) => [p.publicKey, this.#stateOf(p, before?.get(p.publicKey))]));
      this.#peers.set(serverId, peers);
      const nowMs = this.#clock.nowMs();
      const admitted: PeerSpec[] = [];
      const throttled: string[] = [];
      for (const [key, peerState] of peers) {
        const standing = this.#standing(peerState, nowMs);
        if (isOn(standing)) admitted.push(specOf(peerState.peer, standing));
        if (standing === 'throttled') throttled.push(key);
        this.#observeMove(standing, wasAdmitted.has(key), wasThrottled.has(key));
      }
      const admittedKeys = new Set(admitted.map((p) => p.publicKey));
      this.#admitted.set(serverId, admittedKeys);
      this.#throttled.set(serverId, new Set(throttled.filter((key) => wasThrottled.has(key))));
      this.#observer.serverPeers(serverId, admittedKeys.size);
      // Every apply sets the allowances, so an agent started anew clears those of peers no longer limited.
      const allowed = await settled(this.#setAllowances(serverId, counted ?? new Map(), nowMs));
      await this.#driver.setPeers(serverId, admitted);
      this.#throttled.set(serverId, new Set(throttled));
      this.#ledger.forgetPeers(serverId, { keep: admittedKeys });
      this.#ledger.flush();
      if (allowed !== undefined) throw allowed;
      this.#observer.applied('server', (performance.now() - startedMs) / 1000);
      return { ...state, peerCount: admitted.length };
    });
  }

  /**
   * Adds, changes and removes some peers of a server, one change after another per server, so
   * concurrent changes from the panel never overwrite each other. The server must have been
   * applied since this agent started (the panel resyncs a restarted agent first).
   */
  changePeers(serverId: number, change: PeerChange): Promise<void> {
    return this.#serial.run(serverId, async () => {
      const peers = this.#peers.get(serverId);
      const admitted = this.#admitted.get(serverId);
      const throttled = this.#throttled.get(serverId);
      if (!peers || !admitted || !throttled)
        throw new DriverError(`change peers of server ${serverId}`, [
          'the agent does not run this server yet; the panel resyncs it',
        ]);
      const startedMs = performance.now();
      this.#observer.peersChanged(change.upsert.length + change.remove.length);
      const nowMs = this.#clock.nowMs();
      const deleted = change.deleted === true;
      const remove = [...change.remove];
      const upsert: PeerSpec[] = [];
      const standings: [string, Standing][] = [];
      this.#digests.delete(serverId);
      for (const key of change.remove) peers.delete(key);
      for (const peer of change.upsert) {
        const state = this.#stateOf(peer, peers.get(peer.publicKey));
        peers.set(peer.publicKey, state);
        const standing = this.#standing(state, nowMs);
        if (isOn(standing)) upsert.push(specOf(peer, standing));
        else remove.push(peer.publicKey);
        standings.push([peer.publicKey, standing]);
      }
      // A removed peer's counters vanish with it: what they hold is booked first. A new allowance is set from a
      // reading taken now, the quotas' before the counters'.
      const counted = await this.#readAllowances(serverId);
      if (counted !== null || (!deleted && remove.some((key) => admitted.has(key)))) await this.#meter(serverId);
      for (const [key, standing] of standings) this.#observeMove(standing, admitted.has(key), throttled.has(key));
      for (const key of remove) admitted.delete(key);
      for (const peer of upsert) admitted.add(peer.publicKey);
      for (const key of change.remove) throttled.delete(key);
      const nowThrottled = unthrottle(throttled, standings);
      this.#observer.serverPeers(serverId, admitted.size);
      const allowed = await settled(this.#setAllowances(serverId, counted, nowMs));
      await this.#driver.changePeers(serverId, upsert, remove);
      for (const key of nowThrottled) throttled.add(key);
      this.#ledger.forgetPeers(serverId, { remove });
      this.#ledger.flush();
      if (allowed !== undefined) throw allowed;
      this.#observer.applied('peers', (performance.now() - startedMs) / 1000);
    });
  }

  removeServer(serverId: number): Promise<void> {
    return this.#serial.run(serverId, async () => {
      await this.#meter(serverId).catch(() => undefined);
      await this.#driver.down(serverId);
      this.#specs.delete(serverId);
      this.#digests.delete(serverId);
      this.#ipv6.delete(serverId);
      this.#peers.delete(serverId);
      this.#admitted.delete(serverId);
      this.#throttled.delete(serverId);
      this.#allowanced.delete(serverId);
      this.#lastCounted.delete(serverId);
      this.#observer.serverPeers(serverId, undefined);
      this.#ledger.forgetServer(serverId);
      this.#ledger.flush();
    });
  }

  /**
   * Makes the node hold exactly `servers`: each is applied, any other server of this driver is removed. The report
   * names each applied server's IPv6 as applied, so the panel shows the mode the node really runs.
   */
  async resync(servers: readonly DesiredServer[]): Promise<ResyncReport> {
    const ipv6: NonNullable<ResyncReport['ipv6']> = [];
    const report: ResyncReport = { applied: [], removed: [], failures: [], ipv6 };
    const wanted = new Set(servers.map((s) => s.server.serverId));
    for (const id of await this.#driver.list()) {
      if (wanted.has(id)) continue;
      await this.removeServer(id).then(
        () => report.removed.push(id),
        (error: unknown) => report.failures.push(`remove server ${id}: ${messageOf(error)}`),
      );
    }
    for (const desired of servers) {
      await this.applyServer(desired).then(
        (state) => {
          report.applied.push(desired.server.serverId);
          ipv6.push({ serverId: desired.server.serverId, mode: state.ipv6 });
        },
        (error: unknown) => report.failures.push(`server ${desired.server.serverId}: ${messageOf(error)}`),
      );
    }
    return report;
  }

  /**
   * The drift check (GET /v1/digest): per server applied or on the host, the digest of the desired
   * state this agent holds and what the host differs in from what it applied (Driver.inspect). Each
   * server is read inside its queue, so no change of the agent's own is half seen; its counters are booked first
   * in the same turn, since the repair that may follow makes its interface anew.
   */
  async digest(): Promise<NodeDigest> {
    const ids = [...new Set([...(await this.#driver.list()), ...this.#specs.keys()])].sort((a, b) => a - b);
    const servers: NodeDigest['servers'] = [];
    for (let i = 0; i < ids.length; i += INSPECT_CONCURRENCY) {
      const batch = ids.slice(i, i + INSPECT_CONCURRENCY);
      servers.push(...(await Promise.all(batch.map((id) => this.#serial.run(id, () => this.#digestOf(id))))));
    }
    return { servers };
  }

  async #digestOf(serverId: number): Promise<NodeDigest['servers'][number]> {
    const spec = this.#specs.get(serverId);
    const peers = this.#peers.get(serverId);
    const admitted = this.#admitted.get(serverId);
    const throttled = this.#throttled.get(serverId);
    if (!spec || !peers || !admitted || !throttled) {
      return { serverId, digest: null, discrepancies: ['on the host, but not applied since the agent started'] };
    }
    // A peer the panel sent is a PeerSpec already: no copy of each for a check every 15 s, but of a throttled one.
    const onInterface = [...peers.values()]
      .filter((s) => admitted.has(s.peer.publicKey))
      .map((s) => (throttled.has(s.peer.publicKey) ? specOf(s.peer, 'throttled') : s.peer));
    const unreadable = (error: unknown) => [`cannot be inspected: ${messageOf(error)}`];
    // The inspection holds the queue, metering ticks wait behind it: a reading now keeps the last one of an interface
    // deleted meanwhile at most a tick old. Booked, not saved: the round after saves it, and a crash reads it again.
    await this.#meter(serverId).catch(() => undefined);
    const discrepancies = await this.#driver.inspect(spec, onInterface).catch(unreadable);
    const digest =
      this.#digests.get(serverId) ?? desiredDigest({ server: spec, peers: [...peers.values()].map((s) => s.peer) });
    this.#digests.set(serverId, digest);
    // Naming the mode also tells the panel this agent hashes the IPv6 fields (NodeDigestSchema).
    return { serverId, digest, discrepancies, ipv6: this.#ipv6.get(serverId) ?? 'off' };
  }

  /** The peers each server's interface holds now, as the driver reads them; one that cannot be read is left out. */
  async peersOnNode(): Promise<NodePeers> {
    const servers: NodePeers['servers'] = [];
    for (const serverId of await this.#driver.list()) {
      const reading = await this.#driver.readCounters(serverId).catch(() => undefined);
      if (reading) servers.push({ serverId, peers: reading.peers.map((p) => p.publicKey).sort() });
    }
    return { servers };
  }

  /** The panel's collection of usage (see UsageLedger.collect). */
  collectUsage(ack: UsageAck | null): UsageReport {
    const report = this.#ledger.collect(ack);
    this.#observer.unacknowledgedBatches(report.batches.length);
    return report;
  }

  /**
   * One metering round: every server's counters are read and booked, peers whose allowance is used
   * or whose expiry passed leave the interface, peers allowed again return.
   */
  meterAll(): Promise<void> {
    return this.#ticks.round();
  }

  /** Meters every `meterIntervalMs` (MeteringTicks); a round that fails is reported and retried next time. */
  start(onError: (error: unknown) => void): void {
    this.#ticks.start(onError);
  }

  async stop(): Promise<void> {
    await this.#ticks.stop();
    this.#ledger.flush();
  }

  async #enforce(serverId: number): Promise<void> {
    const peers = this.#peers.get(serverId);
    const admitted = this.#admitted.get(serverId);
    const throttled = this.#throttled.get(serverId);
    if (!peers || !admitted || !throttled) return;
    const counted = await this.#readAllowances(serverId);
    await this.#meter(serverId);
    const nowMs = this.#clock.nowMs();
    const remove: string[] = [];
    const upsert: PeerSpec[] = [];
    const moved: [string, Standing][] = [];
    for (const [key, state] of peers) {
      const standing = this.#standing(state, nowMs);
      const wasOn = admitted.has(key);
      if (isOn(standing) === wasOn && (standing === 'throttled') === throttled.has(key)) continue;
      this.#observeMove(standing, wasOn, throttled.has(key));
      if (isOn(standing)) upsert.push(specOf(state.peer, standing));
      else remove.push(key);
      moved.push([key, standing]);
    }
    for (const key of remove) admitted.delete(key);
    for (const peer of upsert) admitted.add(peer.publicKey);
    const nowThrottled = unthrottle(throttled, moved);
    // Moved every tick, before a peer comes back, so it never runs without its allowance.
    const allowed = await settled(this.#setAllowances(serverId, counted, nowMs));
    if (remove.length > 0 || upsert.length > 0) {
      this.#observer.serverPeers(serverId, admitted.size);
      await this.#driver.changePeers(serverId, upsert, remove);
      this.#ledger.forgetPeers(serverId, { remove });
    }
    for (const key of nowThrottled) throttled.add(key);
    if (allowed !== undefined) throw allowed;
  }

  /**
   * What the server's quotas counted, read before its counters so that the bytes passing in between are counted
   * against the allowance twice, never not at all; null (nothing read) where no peer is limited and none was.
   */
  #readAllowances(serverId: number): Promise<QuotaCounts> {
    const limited = [...(this.#peers.get(serverId)?.values() ?? [])].some((s) => s.peer.limits.remainingBytes !== null);
    if (!limited && !this.#allowanced.has(serverId)) return Promise.resolve(null);
    return this.#driver.readAllowances(serverId);
  }

  /**
   * Sets the kernel allowance of each limited peer on the interface: what its quota counted (`counted`) plus the
   * bytes the ledger leaves it, converted (allowance.ts). Peers cut off, throttled, or without a limit, get none.
   */
  async #setAllowances(serverId: number, counted: QuotaCounts, nowMs: number): Promise<void> {
    const peers = this.#peers.get(serverId);
    const admitted = this.#admitted.get(serverId);
    const throttled = this.#throttled.get(serverId);
    const mtu = this.#specs.get(serverId)?.mtu;
    if (counted === null || !peers || !admitted || !throttled || mtu === undefined) return;
    const allowances: PeerAllowance[] = [];
    const before = this.#lastCounted.get(serverId);
    let lastStep = false;
    for (const [key, state] of peers) {
      const remaining = admitted.has(key) && !throttled.has(key) ? this.#remaining(state, nowMs) : null;
      if (remaining === null) continue;
      const { allowedIp, allowedIp6 } = state.peer;
      const [count, step] = [counted.get(key) ?? 0, quotaAllowance(remaining, mtu)];
      // What it moved since the last reading would take it past its limit: the cut should not wait a whole tick.
      lastStep ||= step <= count - (before?.get(key) ?? count);
      allowances.push({ publicKey: key, allowedIp, limitBytes: count + step, ...(allowedIp6 ? { allowedIp6 } : {}) });
    }
    this.#lastCounted.set(serverId, counted);
    if (lastStep) this.#ticks.recheckSoon(serverId);
    await this.#driver.setAllowances(serverId, allowances);
    if (allowances.length > 0) this.#allowanced.add(serverId);
    else this.#allowanced.delete(serverId);
  }

  /** Reads one server's counters into the ledger. Runs inside the server's queue. */
  async #meter(serverId: number): Promise<void> {
    const reading = await this.#driver.readCounters(serverId);
    const peers = this.#peers.get(serverId);
    const booked = this.#ledger.record(serverId, reading, (key) => peers?.get(key)?.peer.deviceId, this.#clock.nowMs());
    if (booked.rxBytes + booked.txBytes > 0) this.#observer.metered(booked.rxBytes, booked.txBytes);
  }

  #stateOf(peer: AgentPeer, previous: PeerState | undefined): PeerState {
    const limits = peer.limits;
    const unchanged = previous !== undefined && JSON.stringify(previous.peer.limits) === JSON.stringify(limits);
    if (unchanged) return { ...previous, peer };
    const meter = this.#ledger.meter(peer.deviceId);
    return {
      peer,
      grantMeter: limits.journalId === this.#ledger.journalId ? Math.min(limits.meter, meter) : meter,
      rolloverMeter: undefined,
    };
  }

  /** Where the device must stand now: expired, its allowance used (cut off or throttled), or on as sent. */
  #standing(state: PeerState, nowMs: number): Standing {
    const limits = state.peer.limits;
    if (limits.expiresAtMs !== null && nowMs >= limits.expiresAtMs) return 'expired';
    const remaining = this.#remaining(state, nowMs);
    if (remaining === null || remaining > 0) return 'on';
    return limits.quotaAction === 'throttle' && limits.throttleKbps !== undefined ? 'throttled' : 'limit_reached';
  }

  /** Tells the observer of a peer on its interface that is cut off now, or throttled where it was not. */
  #observeMove(standing: Standing, wasOn: boolean, wasThrottled: boolean): void {
    if (standing === 'on' || !wasOn || (standing === 'throttled' && wasThrottled)) return;
    this.#observer.cutOff(standing);
  }

  /** Bytes the device may still use (as WireGuard counts them), null without a limit; past its period, a new one's. */
  #remaining(state: PeerState, nowMs: number): number | null {
    const limits = state.peer.limits;
    if (limits.remainingBytes === null) return null;
    const meter = this.#ledger.meter(state.peer.deviceId);
    if (limits.periodEndsAtMs !== null && nowMs >= limits.periodEndsAtMs) {
      state.rolloverMeter ??= meter;
      return limits.dataLimit - (meter - state.rolloverMeter);
    }
    return limits.remainingBytes - (meter - state.grantMeter);
  }
}
