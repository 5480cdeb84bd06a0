import { sql } from 'kysely';
import pg from 'pg';
import type { Queryable } from './db.ts';

/** What a process may cache while other processes (the CLI, other panels) may change it. */
export type ChangeTopic = 'api_keys';

export interface ChangeWatch {
  /** True when the topic may have changed since the previous call (and on the first call). */
  changed(): boolean;
}

const LISTEN_RETRY_MS = 2_000;

/**
 * On SQLite any commit by another connection counts, whatever the topic. `dataVersion` is the database's
 * data_version as of the current request (read anyway for the reused reads, so the watch costs nothing):
 * a commit made before a request arrived is seen by it.
 */
export function sqliteChangeWatch(dataVersion: () => unknown): ChangeWatch {
  let seen: unknown;
  return {
    changed() {
      const version = dataVersion();
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
      quiet(client);
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
    if (this.#client !== undefined) quiet(this.#client);
    await this.#client?.end().catch(() => undefined);
  }
}

/**
 * Drops a client's listeners but keeps one for 'error': pg emits it again when the socket ends after the
 * server's own error (a restart ends the session with one), and an unhandled one would end the process.
 */
function quiet(client: pg.Client): void {
  client.removeAllListeners();
  client.on('error', () => undefined);
}
