import type SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import pg from 'pg';
import type { Queryable } from './db.ts';

/** What a process may cache while other processes (the CLI, other panels) may change it. */
export type ChangeTopic = 'api_keys';

export interface ChangeWatch {
  /** True when the topic may have changed since the previous call (and on the first call). */
  changed(): boolean;
}

/** How long one read of SQLite's data_version answers for. */
const WATCH_SHARE_MS = 1;

const LISTEN_RETRY_MS = 2_000;

/** On SQLite any commit by another connection counts, whatever the topic. */
export function sqliteChangeWatch(file: SQLite.Database): ChangeWatch {
  // data_version changes when another connection commits; this process's own writes leave it.
  // Reading it costs more than a typical query, so requests within one millisecond share a read:
  // another process's change is seen within 1 ms of its commit.
  const dataVersion = file.prepare('PRAGMA data_version').pluck();
  let seen: unknown;
  let readAtMs = Number.NEGATIVE_INFINITY;
  return {
    changed() {
      const nowMs = performance.now();
      if (nowMs - readAtMs < WATCH_SHARE_MS) return false;
      readAtMs = nowMs;
      const version: unknown = dataVersion.get();
      const changed = version !== seen;
      seen = version;
      return changed;
    },
  };
}

function channelOf(topic: ChangeTopic): string {
  return `vpn_panel_${topic}`;
}

/** Tells the PostgreSQL watches of `topic` that it changed; NOTIFY delivers it when `db`'s transaction commits. */
export async function announceOnPostgres(db: Queryable, topic: ChangeTopic): Promise<void> {
  await sql`select pg_notify(${channelOf(topic)}, '')`.execute(db);
}

/**
 * On PostgreSQL, a LISTEN connection hears the writers' announcements; while it is not listening
 * every call reports a change, so nothing stale is used.
 */
export class PostgresChangeWatch implements ChangeWatch {
  readonly #url: string;
  readonly #channel: string;
  #client: pg.Client | undefined;
  #listening = false;
  #notified = true;
  #closed = false;
  #retry: NodeJS.Timeout | undefined;

  constructor(url: string, topic: ChangeTopic) {
    this.#url = url;
    this.#channel = channelOf(topic);
    this.#connect();
  }

  changed(): boolean {
    const changed = this.#notified || !this.#listening;
    this.#notified = false;
    return changed;
  }

  #connect(): void {
    const client = new pg.Client({ connectionString: this.#url });
    this.#client = client;
    const lost = () => {
      this.#listening = false;
      client.removeAllListeners();
      client.end().catch(() => undefined);
      if (!this.#closed) this.#retry = setTimeout(() => this.#connect(), LISTEN_RETRY_MS).unref();
    };
    client.on('notification', () => {
      this.#notified = true;
    });
    client.on('error', lost);
    client.on('end', lost);
    client
      .connect()
      .then(() => client.query(`LISTEN ${this.#channel}`))
      .then(() => {
        this.#notified = true;
        this.#listening = true;
      }, lost);
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retry);
    this.#client?.removeAllListeners();
    await this.#client?.end().catch(() => undefined);
  }
}
