import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../domain/clock.ts';
import type { PanelObserver, SignInBudget } from '../services/metrics.ts';

/**
 * Whom a spent budget belongs to, as the log may show it: `user`, the digest of the name typed (never the
 * name: it may be a password typed into the wrong field), and `address`, the address bucket (IPv4, IPv6 /64
 * or /48).
 */
export interface RefusedSubject {
  user?: string;
  address?: string;
}

/** A budget's refusals of one subject are logged at most this often. */
const LOG_INTERVAL_MS = 60_000;
/** Subjects remembered for that, at most; past it those logged over LOG_INTERVAL_MS ago are forgotten. */
const REMEMBERED_MAX = 10_000;

interface Logged {
  atMs: number;
  /** Refusals since that line, not logged on their own. */
  since: number;
}

/**
 * Tells of console sign-ins refused by a budget (src/http/sign-in-gate.ts) or by a full hash queue: each one
 * counted in the metrics, and a `warn` line per budget and subject at most once a minute, so a guesser or a
 * flood leaves a trace without flooding the log.
 */
export class SignInRefusals {
  readonly #log: FastifyBaseLogger;
  readonly #clock: Clock;
  readonly #observer: PanelObserver | undefined;
  readonly #logged = new Map<string, Logged>();

  constructor(log: FastifyBaseLogger, clock: Clock, observer: PanelObserver | undefined) {
    this.#log = log;
    this.#clock = clock;
    this.#observer = observer;
  }

  refused(budget: SignInBudget, subject: RefusedSubject, retryAfterSeconds: number): void {
    this.#observer?.signInRefused(budget);
    const key = `${budget} ${subject.user ?? ''} ${subject.address ?? ''}`;
    const nowMs = this.#clock.nowMs();
    const last = this.#logged.get(key);
    if (last !== undefined && nowMs - last.atMs < LOG_INTERVAL_MS) {
      last.since++;
      return;
    }
    if (this.#logged.size >= REMEMBERED_MAX) this.#forget(nowMs);
    this.#logged.set(key, { atMs: nowMs, since: 0 });
    const fields = { budget, ...subject, retryAfterSeconds, refusedSinceLastLine: last?.since ?? 0 };
    this.#log.warn(fields, 'console sign-in refused: a budget ran out');
  }

  /** Past LOG_INTERVAL_MS a subject's next refusal is logged anyway; should all be recent, they all go. */
  #forget(nowMs: number): void {
    for (const [key, logged] of this.#logged) if (nowMs - logged.atMs >= LOG_INTERVAL_MS) this.#logged.delete(key);
    if (this.#logged.size >= REMEMBERED_MAX) this.#logged.clear();
  }
}
