/**
 * Per-peer speed limits inside a server's namespace (design C of docs/dataplane.md, "Measured facts" 3; the whole
 * layout is in docs/dataplane.md). A limited peer gets an HTB class on the WireGuard interface (its
 * download) and one on the server end of the uplink veth (its upload), each with a byte FIFO as its
 * queue. An nft map in the server namespace, address → class id, sets `meta priority` in the forward
 * and output hooks; HTB puts a packet whose priority names one of its classes straight into it. So
 * there are no tc filters and no IFB, and classifying costs one hash lookup however many peers are
 * limited. Traffic of an address without a map entry is not classified and passes unshaped. IPv6 has
 * a map of its own (in an `ip6` table beside the `ip` one, made only while a limited peer has an IPv6
 * address) whose entries name the same class as the peer's IPv4 address: one limit for both families.
 *
 * Changes are incremental: a class is added, changed or deleted only for a peer whose limit differs,
 * never by rebuilding the tree (HTB's install time grows with the number of classes).
 *
 * This file reads the host and runs the commands; what to change is plan.ts's, the commands' text tc-nft.ts's.
 */
import { messageOf } from '../../domain/errors.ts';
import { CommandError, type CommandRunner } from '../commands.ts';
import type { PeerSpec } from '../driver.ts';
import {
  type Limit,
  checkedLimits,
  driftOf,
  limitsOnHost,
  planChange,
  planConvergence,
  restoredLimits,
  wantedLimits,
  withFailed,
} from './plan.ts';
import {
  type BatchLine,
  type Family,
  HTB_ROOT,
  SHAPING_TABLE,
  type ShapingPlace,
  type ShapingState,
  batchFailures,
  parseState,
} from './tc-nft.ts';

/**
 * Applies and reads speed limits through a CommandRunner. It remembers, per server, the limits it
 * applied by public key: changePeers names removed peers by key only, and the map is keyed by address.
 * setPeers re-reads the host and rebuilds this memory, so a lost or changed host state is repaired there.
 */
export class Shaper {
  readonly #runner: CommandRunner;
  readonly #known = new Map<number, Map<string, Limit>>();

  constructor(runner: CommandRunner) {
    this.#runner = runner;
  }

  /** Drops what is remembered of a server (it was taken down). */
  forget(serverId: number): void {
    this.#known.delete(serverId);
  }

  async #read(place: ShapingPlace): Promise<ShapingState> {
    const tc = (args: string[]): Promise<string> =>
      this.#runner.run('tc', ['-n', place.netns, ...args]).then(
        (r) => r.stdout,
        () => '',
      );
    const nft = (family: Family): Promise<string> =>
      this.#runner.run('nft', ['list', 'table', family, SHAPING_TABLE], { netns: place.netns }).then(
        (r) => r.stdout,
        () => '',
      );
    const [table4, table6, wgRoot, wgClasses, uplinkRoot, uplinkClasses] = await Promise.all([
      nft('ip'),
      nft('ip6'),
      tc(['qdisc', 'show', 'dev', place.wg, 'root']),
      tc(['class', 'show', 'dev', place.wg]),
      tc(['qdisc', 'show', 'dev', place.uplink, 'root']),
      tc(['class', 'show', 'dev', place.uplink]),
    ]);
    return parseState(place, { table4, table6, wgRoot, wgClasses, uplinkRoot, uplinkClasses });
  }

  /**
   * setPeers: makes the host's limits exactly those of `peers` (allowed ips as `wg` prints them), reading
   * what the host has and changing only the difference; the shaping of `keepIps` (the addresses of peers
   * left as they are) is not touched.
   */
  async sync(
    serverId: number,
    place: ShapingPlace,
    peers: readonly PeerSpec[],
    keepIps: ReadonlySet<string>,
    failures: string[],
  ): Promise<void> {
    const { want, problems } = wantedLimits(peers);
    failures.push(...problems);
    await this.#converge(serverId, place, await this.#read(place), want, keepIps, failures);
  }

  /**
   * up() after the interface or the veth was made again (their classes went with them): puts back
   * the limits of `peers` (public key → bare addresses) as remembered, or as the surviving half of the
   * host's state says.
   */
  async restore(
    serverId: number,
    place: ShapingPlace,
    peers: ReadonlyMap<string, readonly string[]>,
    failures: string[],
  ): Promise<void> {
    const state = await this.#read(place);
    const known = this.#known.get(serverId);
    if (known === undefined && state.elements.size === 0) return;
    await this.#converge(serverId, place, state, restoredLimits(state, known, peers), new Set(), failures);
  }

  /**
   * The drift check: how the host's shaping differs from the limits of `peers` (allowed ips as `wg`
   * prints them), read without changing anything. A server with no limited peer, to which this process
   * applied none, is not read (its shaping costs nothing, its check neither).
   */
  async inspect(serverId: number, place: ShapingPlace, peers: readonly PeerSpec[]): Promise<string[]> {
    const wanted = checkedLimits(peers);
    if (wanted.kbps.size === 0 && (this.#known.get(serverId)?.size ?? 0) === 0) return [];
    return driftOf(place, await this.#read(place), wanted);
  }

  /**
   * changePeers: applies the limits of `upsert` and removes those of the keys in `remove`, touching
   * only peers whose limit differs from what was applied; reads nothing from the host unless this
   * process has not seen the server yet (`peersOnHost` then gives public key → bare addresses).
   */
  async change(
    serverId: number,
    place: ShapingPlace,
    upsert: readonly PeerSpec[],
    remove: readonly string[],
    peersOnHost: () => Promise<Map<string, string[]>>,
    failures: string[],
  ): Promise<void> {
    const previous = this.#known.get(serverId) ?? (await this.#load(place, peersOnHost));
    const plan = planChange(place, previous, upsert, remove);
    failures.push(...plan.problems);
    const failed = plan.lines.length === 0 ? new Set<string>() : await this.#batch(place, plan.lines, failures);
    if (plan.script !== '') {
      // A table is made with its first limit; when it is missing or damaged, make it and try once more.
      const applied =
        (await this.#nft(place, plan.script, null)) || (await this.#nft(place, plan.ensure + plan.script, failures));
      if (!applied) for (const ip of plan.scriptOwners) failed.add(ip);
    }
    this.#known.set(serverId, withFailed(plan.known, failed));
  }

  /**
   * What the host says about the server's limited peers, when this process has not applied any yet
   * (the agent always runs setPeers first). Without an HTB root nothing is limited, and the peers need
   * not be read.
   */
  async #load(place: ShapingPlace, peersOnHost: () => Promise<Map<string, string[]>>): Promise<Map<string, Limit>> {
    const roots = await Promise.all(
      [place.wg, place.uplink].map((dev) =>
        this.#runner.run('tc', ['-n', place.netns, 'qdisc', 'show', 'dev', dev, 'root']).then(
          (r) => HTB_ROOT.test(r.stdout),
          () => false,
        ),
      ),
    );
    if (!roots.includes(true)) return new Map();
    const [state, peers] = await Promise.all([
      this.#read(place),
      peersOnHost().catch(() => new Map<string, string[]>()),
    ]);
    return limitsOnHost(state, peers);
  }

  /** Makes the host hold exactly `want` (by public key), leaving `keepIps` alone, and remembers what it applied. */
  async #converge(
    serverId: number,
    place: ShapingPlace,
    state: ShapingState,
    want: ReadonlyMap<string, Limit>,
    keepIps: ReadonlySet<string>,
    failures: string[],
  ): Promise<void> {
    const plan = planConvergence(place, state, want, keepIps, this.#known.get(serverId));
    const failed = plan.lines.length === 0 ? new Set<string>() : await this.#batch(place, plan.lines, failures);
    if (plan.script !== '' && !(await this.#nft(place, plan.script, failures))) {
      for (const ip of plan.scriptOwners) failed.add(ip);
    }
    this.#known.set(serverId, withFailed(want, failed));
  }

  /**
   * Runs `lines` in one `tc -force -batch`; records every failure not tolerated; returns the
   * addresses whose lines failed.
   */
  async #batch(place: ShapingPlace, lines: readonly BatchLine[], failures: string[]): Promise<Set<string>> {
    const failed = new Set<string>();
    try {
      await this.#runner.run('tc', ['-n', place.netns, '-force', '-batch', '-'], {
        input: `${lines.map((l) => l.text).join('\n')}\n`,
      });
      return failed;
    } catch (error) {
      const byLine = error instanceof CommandError ? batchFailures(error.stderr) : new Map<number, string>();
      if (byLine.size === 0) {
        failures.push(messageOf(error));
        for (const line of lines) if (line.ip !== null) failed.add(line.ip);
        return failed;
      }
      for (const [number, message] of byLine) {
        const line = lines[number - 1];
        if (line === undefined || line.tolerate?.test(message) === true) continue;
        failures.push(`${line.ip === null ? '' : `speed limit of ${line.ip}: `}\`tc ${line.text}\` failed: ${message}`);
        if (line.ip !== null) failed.add(line.ip);
      }
      return failed;
    }
  }

  /**
   * Runs an nft script in the server's namespace (one transaction); false when it failed (recorded
   * unless `failures` is null).
   */
  async #nft(place: ShapingPlace, script: string, failures: string[] | null): Promise<boolean> {
    try {
      await this.#runner.run('nft', ['-f', '-'], { netns: place.netns, input: script });
      return true;
    } catch (error) {
      failures?.push(messageOf(error));
      return false;
    }
  }
}
