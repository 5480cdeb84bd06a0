/**
 * The node's usage ledger: turns peer counters into per-device deltas that count every byte once,
 * and keeps them, numbered, until the panel acknowledges them.
 *
 * - Baselines (the counters last read, per server and peer) survive restarts of the agent through the
 *   journal file; a counter that went down, or an interface made anew (another `instance`), starts
 *   counting from 0 again, so a reset never loses or repeats bytes.
 * - Deltas go to the open batch of their quarter-hour slot; a collection seals the open batches with
 *   the next sequence numbers and hands out every batch not yet acknowledged. The journal is saved
 *   before a batch leaves, so a batch the panel may have stored is never made again differently.
 *   After a crash the agent goes on from the last save: the counters read since then are read again
 *   against the saved baselines, so they are counted once.
 * - A journal id names the ledger: sequence numbers are unique within it, so a node whose journal
 *   was lost starts a new one and the panel does not take its batches for ones it has seen.
 * - Each device has a meter, its bytes counted by this journal so far: the panel's allowance names
 *   the meter value it was counted to, so the node knows exactly what was used since.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, openSync, closeSync, fsyncSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import Type, { type Static } from 'typebox';
import Value from 'typebox/value';
import { counterDelta, slotStartMs } from '../domain/usage.ts';
import type { CounterReading } from './driver.ts';
import { type UsageAck, type UsageBatch, type UsageReport, UsageBatchSchema } from './protocol.ts';

/** [deviceId, rx, tx] as the server counted them (rx: the device's upload). */
const BaselineSchema = Type.Tuple([Type.Integer(), Type.Integer(), Type.Integer()]);
type Baselines = Record<string, Static<typeof BaselineSchema>>;

/** The keys of a record, counted without making their array. */
function countKeys(record: object): number {
  let count = 0;
  for (const _ in record) count++;
  return count;
}

const JournalSchema = Type.Object({
  journalId: Type.String(),
  nextSeq: Type.Integer({ minimum: 1 }),
  meters: Type.Record(Type.String(), Type.Integer()),
  baselines: Type.Record(
    Type.String(),
    Type.Object({ instance: Type.String(), peers: Type.Record(Type.String(), BaselineSchema) }),
  ),
  /** slot start → deviceId → [rx, tx, meter after them], rx and tx from the device's side. */
  open: Type.Record(
    Type.String(),
    Type.Record(Type.String(), Type.Tuple([Type.Integer(), Type.Integer(), Type.Integer()])),
  ),
  sealed: Type.Array(UsageBatchSchema),
});

type Journal = Static<typeof JournalSchema>;

/** Where the journal lives between runs of the agent. */
export interface JournalStore {
  load(): Journal | undefined;
  save(journal: Journal): void;
}

/** A journal file, replaced atomically (write, fsync, rename), so a crash leaves the old or the new one. */
export class JournalFile implements JournalStore {
  readonly #path: string;
  constructor(path: string) {
    this.#path = path;
  }
  load(): Journal | undefined {
    let text: string;
    try {
      text = readFileSync(this.#path, 'utf8');
    } catch {
      return undefined;
    }
    return Value.Parse(JournalSchema, JSON.parse(text));
  }
  save(journal: Journal): void {
    mkdirSync(dirname(this.#path), { recursive: true, mode: 0o700 });
    const temp = `${this.#path}.tmp`;
    writeFileSync(temp, JSON.stringify(journal), { mode: 0o600 });
    const fd = openSync(temp, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, this.#path);
  }
}

/** A journal kept in memory only: for nodes without a data directory, and for tests. */
export class MemoryJournal implements JournalStore {
  #saved: string | undefined;
  load(): Journal | undefined {
    return this.#saved === undefined ? undefined : Value.Parse(JournalSchema, JSON.parse(this.#saved));
  }
  save(journal: Journal): void {
    this.#saved = JSON.stringify(journal);
  }
}

function emptyJournal(): Journal {
  return { journalId: randomUUID(), nextSeq: 1, meters: {}, baselines: {}, open: {}, sealed: [] };
}

/** Bytes one reading booked, from the devices' side (rx: what they received). */
export interface Booked {
  rxBytes: number;
  txBytes: number;
}

export class UsageLedger {
  readonly #store: JournalStore;
  #journal: Journal;
  /** Latest handshake by device, and the ones the panel has not heard of yet. */
  readonly #handshakes = new Map<number, number>();
  readonly #unreported = new Set<number>();
  #dirty = false;

  constructor(store: JournalStore) {
    this.#store = store;
    this.#journal = store.load() ?? emptyJournal();
  }

  get journalId(): string {
    return this.#journal.journalId;
  }

  /** Batches sealed for the panel that it has not acknowledged yet. */
  get unacknowledgedBatches(): number {
    return this.#journal.sealed.length;
  }

  /** The device's bytes counted by this journal. */
  meter(deviceId: number): number {
    return this.#journal.meters[deviceId] ?? 0;
  }

  /**
   * Books a reading of one server's counters. `deviceOf` names the device of a peer the node runs now;
   * a peer it does not know keeps the device its baseline names (after a restart, before the resync),
   * and a peer nobody knows is not counted. Peers missing from the reading lose their baselines.
   * Returns the bytes booked, from the devices' side.
   */
  record(
    serverId: number,
    reading: CounterReading,
    deviceOf: (publicKey: string) => number | undefined,
    nowMs: number,
  ): Booked {
    const previous = this.#journal.baselines[serverId];
    // The baselines of the same interface are updated in place: made anew every reading (each second), a server's
    // baselines were garbage that lived long enough to fill the old generation.
    const peers: Baselines = previous?.instance === reading.instance ? previous.peers : {};
    const known = countKeys(peers);
    let seen = 0;
    const slot = String(slotStartMs(nowMs));
    const booked = { rxBytes: 0, txBytes: 0 };
    for (const peer of reading.peers) {
      const baseline = peers[peer.publicKey];
      // A peer that has counted nothing keeps no baseline: its absence counts from 0 alike, and most peers of a large
      // node are idle (at 100,000 peers the baselines were 13 MB, and finding each one's device every second was
      // most of the metering's time). One that never shook hands either has nothing to book.
      if (baseline === undefined && peer.rxBytes + peer.txBytes + peer.lastHandshakeMs === 0) continue;
      const deviceId = deviceOf(peer.publicKey) ?? baseline?.[0];
      if (deviceId === undefined) continue;
      const uploaded = counterDelta(baseline?.[1] ?? 0, peer.rxBytes);
      const downloaded = counterDelta(baseline?.[2] ?? 0, peer.txBytes);
      if (baseline === undefined) {
        if (peer.rxBytes + peer.txBytes > 0) peers[peer.publicKey] = [deviceId, peer.rxBytes, peer.txBytes];
      } else {
        seen++;
        baseline[0] = deviceId;
        baseline[1] = peer.rxBytes;
        baseline[2] = peer.txBytes;
      }
      if (uploaded + downloaded > 0) {
        this.#book(slot, deviceId, downloaded, uploaded);
        booked.rxBytes += downloaded;
        booked.txBytes += uploaded;
      }
      if (peer.lastHandshakeMs > (this.#handshakes.get(deviceId) ?? 0)) {
        this.#handshakes.set(deviceId, peer.lastHandshakeMs);
        this.#unreported.add(deviceId);
      }
    }
    if (seen < known) {
      const read = new Set(reading.peers.map((peer) => peer.publicKey));
      for (const key of Object.keys(peers)) if (!read.has(key)) delete peers[key];
    }
    this.#journal.baselines[serverId] = { instance: reading.instance, peers };
    return booked;
  }

  /**
   * Peers left the server's interface (their counters booked just before): their baselines go, so a
   * peer added again counts from 0 even once its new counters pass the old ones. `keep` keeps only those.
   */
  forgetPeers(serverId: number, gone: { remove: Iterable<string> } | { keep: ReadonlySet<string> }): void {
    const baseline = this.#journal.baselines[serverId];
    if (!baseline) return;
    const keys = 'remove' in gone ? [...gone.remove] : Object.keys(baseline.peers).filter((key) => !gone.keep.has(key));
    for (const key of keys) {
      if (delete baseline.peers[key]) this.#dirty = true;
    }
  }

  /** The server is gone from the node: its baselines go (counters of a server made anew start at 0). */
  forgetServer(serverId: number): void {
    if (delete this.#journal.baselines[serverId]) this.#dirty = true;
  }

  #book(slot: string, deviceId: number, rx: number, tx: number): void {
    const open = this.#journal.open[slot] ?? {};
    this.#journal.open[slot] = open;
    const meter = this.meter(deviceId) + rx + tx;
    const sums = open[deviceId] ?? [0, 0, 0];
    open[deviceId] = [sums[0] + rx, sums[1] + tx, meter];
    this.#journal.meters[deviceId] = meter;
    this.#dirty = true;
  }

  /** Saves the journal if anything was booked since the last save. */
  flush(): void {
    if (!this.#dirty) return;
    this.#store.save(this.#journal);
    this.#dirty = false;
  }

  /**
   * The panel's collection: drops the batches it acknowledged (of this journal), seals every open
   * slot, saves, and hands out all batches still unacknowledged, oldest first.
   */
  collect(ack: UsageAck | null): UsageReport {
    const journal = this.#journal;
    if (ack !== null && ack.journalId === journal.journalId) {
      const kept = journal.sealed.filter((b) => b.seq > ack.seq);
      if (kept.length !== journal.sealed.length) this.#dirty = true;
      journal.sealed = kept;
    }
    for (const slot of Object.keys(journal.open).sort((a, b) => Number(a) - Number(b))) {
      const entries = Object.entries(journal.open[slot] ?? {}).map(([id, [rxBytes, txBytes, meter]]) => ({
        deviceId: Number(id),
        rxBytes,
        txBytes,
        meter,
      }));
      journal.sealed.push({ seq: journal.nextSeq++, slotStartMs: Number(slot), entries });
      this.#dirty = true;
    }
    journal.open = {};
    this.flush();
    const handshakes = [...this.#unreported].map((deviceId) => ({
      deviceId,
      lastHandshakeMs: this.#handshakes.get(deviceId) ?? 0,
    }));
    this.#unreported.clear();
    return { journalId: journal.journalId, batches: journal.sealed.map((b): UsageBatch => b), handshakes };
  }
}
