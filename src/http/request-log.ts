import type { FastifyBaseLogger } from 'fastify';
import { type Bindings, type ChildLoggerOptions, type Level, type LevelWithSilentOrString, levels } from 'pino';

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

  constructor(parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#options = options;
  }

  // Methods, not arrow-function fields: every request makes one of these, and fields were seven closures each.
  fatal(...args: unknown[]): void {
    this.#log('fatal', args);
  }
  error(...args: unknown[]): void {
    this.#log('error', args);
  }
  warn(...args: unknown[]): void {
    this.#log('warn', args);
  }
  info(...args: unknown[]): void {
    this.#log('info', args);
  }
  debug(...args: unknown[]): void {
    this.#log('debug', args);
  }
  trace(...args: unknown[]): void {
    this.#log('trace', args);
  }
  silent(): void {}

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
