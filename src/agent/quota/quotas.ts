/**
 * Kernel allowances inside a server's namespace (docs/dataplane.md, "Where each byte is counted"): each limited
 * peer's nftables quota, read and moved through a CommandRunner. The agent reads what the quotas counted before
 * it reads WireGuard's counters, then sets each quota's limit to that count plus the allowance its ledger leaves
 * (allowance.ts); nft.ts holds the text.
 *
 * It remembers, per server, the limits it set last (the drift check compares the host with them) and the table
 * as last read (the set that follows a read changes only what differs from it).
 */
import { messageOf } from '../../domain/errors.ts';
import type { CommandRunner } from '../commands.ts';
import type { PeerAllowance } from '../driver.ts';
import {
  deleteObjectStatements,
  deleteTableStatement,
  elementStatements,
  ensureScript,
  entriesOf,
  limitStatement,
  objectStatements,
  parseTable,
  publicKeyOf,
  QUOTA_TABLE,
  type QuotaPlace,
  type QuotaTable,
  quotaName,
  tableScript,
  type WantedQuota,
} from './nft.ts';

/** A peer's addresses without their prefix length. */
function addressesOf(peer: PeerAllowance): string[] {
  const bare = (cidr: string) => cidr.replace(/\/\d+$/, '');
  return peer.allowedIp6 === undefined ? [bare(peer.allowedIp)] : [bare(peer.allowedIp), bare(peer.allowedIp6)];
}

/** The statements that turn `host` into `wanted`, changing only what differs. */
function changeStatements(place: QuotaPlace, host: QuotaTable, wanted: readonly WantedQuota[]): string[] {
  const lines = host.state === 'ok' ? [] : [ensureScript(place).trimEnd()];
  const wantedElements = new Map(entriesOf(wanted));
  const names = new Set(wanted.map((q) => q.name));
  const stale = [...host.elements].filter(([entry, name]) => wantedElements.get(entry) !== name);
  lines.push(...elementStatements('delete', stale));
  for (const q of wanted) {
    const held = host.quotas.get(q.name);
    // `add` leaves an object that is there as it is, but for a quota's limit.
    if (held?.limit === undefined || held.counted === undefined) lines.push(...objectStatements(q.name, q.limit, 0));
    else if (held.limit !== q.limit) lines.push(limitStatement(q.name, q.limit));
  }
  const missing = [...wantedElements].filter(([entry, name]) => host.elements.get(entry) !== name);
  lines.push(...elementStatements('add', missing));
  for (const [name, held] of host.quotas) if (!names.has(name)) lines.push(...deleteObjectStatements(name, held));
  return lines;
}

export class Quotas {
  readonly #runner: CommandRunner;
  /** Per server, the limit of each quota as last set, by quota name. */
  readonly #applied = new Map<number, Map<string, WantedQuota>>();
  /** Per server, the table as read by the last read(), for the set() that follows it. */
  readonly #read = new Map<number, QuotaTable>();

  constructor(runner: CommandRunner) {
    this.#runner = runner;
  }

  /** Drops what is remembered of a server (it was taken down with its namespace). */
  forget(serverId: number): void {
    this.#applied.delete(serverId);
    this.#read.delete(serverId);
  }

  async #list(place: QuotaPlace): Promise<QuotaTable> {
    const stdout = await this.#runner
      .run('nft', ['-j', 'list', 'table', 'inet', QUOTA_TABLE], { netns: place.netns })
      .then(
        (r) => r.stdout,
        () => '',
      );
    return parseTable(stdout, place);
  }

  /** What each peer's quota has counted so far (its counter), by public key; a server with none reads as none. */
  async read(serverId: number, place: QuotaPlace): Promise<Map<string, number>> {
    const table = await this.#list(place);
    this.#read.set(serverId, table);
    const counted = new Map<string, number>();
    for (const [name, quota] of table.quotas) {
      const key = publicKeyOf(name);
      if (key !== undefined && quota.counted !== undefined) counted.set(key, quota.counted);
    }
    return counted;
  }

  /**
   * Makes the server's quotas exactly `allowances` in one nft transaction, against the table as last read (read
   * now when it was not); when that fails, makes the table afresh, keeping what each quota counted.
   */
  async set(
    serverId: number,
    place: QuotaPlace,
    allowances: readonly PeerAllowance[],
    failures: string[],
  ): Promise<void> {
    const host = this.#read.get(serverId) ?? (await this.#list(place));
    this.#read.delete(serverId);
    const wanted = allowances.map((a) => ({
      name: quotaName(a.publicKey),
      addresses: addressesOf(a),
      limit: Math.max(0, Math.floor(a.limitBytes)),
    }));
    this.#applied.set(serverId, new Map(wanted.map((q) => [q.name, q])));
    if (wanted.length === 0) {
      if (host.state !== 'missing') await this.#nft(place, `${deleteTableStatement()}\n`, failures);
      return;
    }
    const lines = changeStatements(place, host, wanted);
    if (lines.length === 0 || (await this.#nft(place, `${lines.join('\n')}\n`, null))) return;
    const counted = new Map([...host.quotas].map(([name, q]): [string, number] => [name, q.counted ?? 0]));
    await this.#nft(place, tableScript(place, wanted, counted), failures);
  }

  /**
   * The drift check: how the host's quotas differ from what was set last, read without changing anything. A
   * server this process set no quota on is not read.
   */
  async inspect(serverId: number, place: QuotaPlace): Promise<string[]> {
    const applied = this.#applied.get(serverId);
    if (applied === undefined || applied.size === 0) return [];
    const host = await this.#list(place);
    const where = `kernel allowances of server ${serverId}`;
    if (host.state === 'missing') return [`${where}: table inet ${QUOTA_TABLE} is missing`];
    const found = host.state === 'damaged' ? [`${where}: the chains or maps of inet ${QUOTA_TABLE} differ`] : [];
    for (const [name, quota] of applied) {
      const peer = `peer ${publicKeyOf(name) ?? name}`;
      const limit = host.quotas.get(name)?.limit;
      if (limit === undefined) found.push(`${peer} has no kernel allowance`);
      else if (limit !== quota.limit)
        found.push(`${peer}'s kernel allowance ends at ${limit} bytes, not ${quota.limit}`);
      for (const [entry, owner] of entriesOf([quota])) {
        if (host.elements.get(entry) !== owner) found.push(`${peer}: ${entry} is not mapped to its allowance`);
      }
    }
    for (const name of host.quotas.keys()) {
      if (!applied.has(name)) found.push(`${where}: quota ${name} is of no limited peer`);
    }
    return found;
  }

  /** Runs an nft script in the server's namespace (one transaction); false when it failed (recorded unless null). */
  async #nft(place: QuotaPlace, script: string, failures: string[] | null): Promise<boolean> {
    try {
      await this.#runner.run('nft', ['-f', '-'], { netns: place.netns, input: script });
      return true;
    } catch (error) {
      failures?.push(`kernel allowances: ${messageOf(error)}`);
      return false;
    }
  }
}
