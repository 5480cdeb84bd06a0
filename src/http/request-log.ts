import type { FastifyBaseLogger } from 'fastify';
import {
  type Bindings,
  type ChildLoggerOptions,
  type Level,
  type LevelWithSilentOrString,
  levels,
  type LogFn,
} from 'pino';

/**
 * A request's logger that makes its pino child (the request id in every line) only when the request
 * first logs at an enabled level. Fastify makes a child for every request, which costs about a
 * microsecond, and almost no request logs anything at the usual levels.
 */
export class RequestLogger implements FastifyBaseLogger {
  readonly #parent: FastifyBaseLogger;
  readonly #bindings: Bindings;
  readonly #options: ChildLoggerOptions;
  #child: FastifyBaseLogger | undefined;

  readonly fatal: LogFn = (...args: unknown[]) => this.#log('fatal', args);
  readonly error: LogFn = (...args: unknown[]) => this.#log('error', args);
  readonly warn: LogFn = (...args: unknown[]) => this.#log('warn', args);
  readonly info: LogFn = (...args: unknown[]) => this.#log('info', args);
  readonly debug: LogFn = (...args: unknown[]) => this.#log('debug', args);
  readonly trace: LogFn = (...args: unknown[]) => this.#log('trace', args);
  readonly silent: LogFn = () => {};

  constructor(parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#options = options;
  }

  get level(): LevelWithSilentOrString {
    return this.#child?.level ?? this.#options.level ?? this.#parent.level;
  }

  set level(level: LevelWithSilentOrString) {
    this.#logger().level = level;
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#logger().child(bindings, options);
  }

  #logger(): FastifyBaseLogger {
    this.#child ??= this.#parent.child(this.#bindings, this.#options);
    return this.#child;
  }

  #log(level: Level, args: unknown[]): void {
    const wanted = levels.values[level];
    const threshold = levels.values[this.level];
    // A level pino's table lacks ('silent', a custom one) is left to the child to decide.
    if (wanted !== undefined && threshold !== undefined && wanted < threshold) return;
    const logger = this.#logger();
    Reflect.apply(logger[level], logger, args);
  }
}
