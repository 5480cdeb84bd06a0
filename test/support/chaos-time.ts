import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { RETRY_SCHEDULE_MS } from '../../src/domain/webhooks.ts';

/** What a receiver does with the next request: not listen (connection refused), answer 500, or take it (200). */
export type ReceiverMode = 'refuse' | 'fail' | 'accept';

/** One request a receiver saw: its `webhook-id`, the event it carried and what the receiver answered. */
export interface ReceivedPost {
  webhookId: string;
  eventId: number;
  deviceId: number | null;
  status: number;
}

/**
 * A real webhook receiver on a fixed loopback port whose outage is scripted: while `refuse` the port has no
 * listener, so the panel's connects are refused; `fail` answers every POST 500; `accept` answers 200.
 * It records every request it answered, in arrival order.
 */
export class ScriptedReceiver {
  readonly port: number;
  readonly posts: ReceivedPost[] = [];
  #mode: ReceiverMode = 'refuse';
  #server: Server | undefined;

  constructor(port: number) {
    this.port = port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  async set(mode: ReceiverMode): Promise<void> {
    this.#mode = mode;
    if (mode === 'refuse') await this.close();
    else if (this.#server === undefined) await this.#listen();
  }

  /** The events taken (answered 200), by `webhook-id`, each with how many times it was taken. */
  accepted(): Map<string, { eventId: number; deviceId: number | null; times: number }> {
    const taken = new Map<string, { eventId: number; deviceId: number | null; times: number }>();
    for (const post of this.posts) {
      if (post.status !== 200) continue;
      const seen = taken.get(post.webhookId);
      if (seen === undefined) taken.set(post.webhookId, { eventId: post.eventId, deviceId: post.deviceId, times: 1 });
      else seen.times += 1;
    }
    return taken;
  }

  async close(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (server === undefined) return;
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  }

  async #listen(): Promise<void> {
    const server = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        const event: { id?: unknown; device_id?: unknown } = JSON.parse(body);
        const status = this.#mode === 'accept' ? 200 : 500;
        this.posts.push({
          webhookId: String(request.headers['webhook-id']),
          eventId: Number(event.id),
          deviceId: typeof event.device_id === 'number' ? event.device_id : null,
          status,
        });
        response.writeHead(status).end();
      });
    });
    server.listen(this.port, '127.0.0.1');
    await once(server, 'listening');
    this.#server = server;
  }
}

/**
 * The production retry schedule (RETRY_SCHEDULE_MS) divided by `factor`, as `WEBHOOK_RETRY_SCHEDULE` takes it
 * (seconds, comma-separated): the same shape, compressed in time.
 */
export function compressedSchedule(factor: number): string {
  return RETRY_SCHEDULE_MS.map((ms) => ms / factor / 1000).join(',');
}

/** The total wait of a schedule given as `WEBHOOK_RETRY_SCHEDULE` text, in ms. */
export function scheduleTotalMs(schedule: string): number {
  return schedule.split(',').reduce((sum, seconds) => sum + Number(seconds) * 1000, 0);
}

const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

/**
 * A process clock under libfaketime (Debian's `faketime` package): the environment preloads it with an offset
 * read from a file, which `step` rewrites, so only the process started with `env` sees its wall clock step.
 * The monotonic clock is left alone (Node's timers run on it), and the file is read again at most each second.
 */
export class SteppedClock {
  readonly file: string;
  #offsetMs = 0;

  constructor(file: string, offsetMs: number) {
    this.file = file;
    this.#write(offsetMs);
  }

  static readonly library = LIBFAKETIME;

  get env(): Record<string, string> {
    return {
      LD_PRELOAD: LIBFAKETIME,
      FAKETIME_TIMESTAMP_FILE: this.file,
      FAKETIME_CACHE_DURATION: '1',
      FAKETIME_DONT_FAKE_MONOTONIC: '1',
    };
  }

  /** The process's wall clock now, as it should read it. */
  nowMs(): number {
    return Date.now() + this.#offsetMs;
  }

  step(byMs: number): void {
    this.#write(this.#offsetMs + byMs);
  }

  #write(offsetMs: number): void {
    this.#offsetMs = offsetMs;
    // libfaketime reads "+N"/"-N" as an offset in seconds from the real clock; fractions are honoured.
    const seconds = offsetMs / 1000;
    writeFileSync(this.file, `${seconds >= 0 ? '+' : ''}${seconds.toFixed(3)}\n`);
  }
}
