import { type Compilable, type CompiledQuery, type RawBuilder, sql } from 'kysely';
import type { Db } from './db.ts';
import type { ImmediateReads } from './sqlite-dialect.ts';

/**
 * A page's row limit as a literal in the SQL. SQLite runs `LIMIT ?` about 5 µs slower than `LIMIT 51`
 * on every execution (measured on a cached statement); the limit is a validated small integer, so
 * inlining it is safe and makes at most a couple of hundred statement shapes.
 */
export function rowLimit(limit: number): RawBuilder<number> {
  if (!Number.isSafeInteger(limit) || limit < 1) {
    throw new Error(`row limit must be a positive integer, got ${limit}`);
  }
  return sql.lit(limit);
}

/** The databases whose reads may run at once (SQLite), for CompiledShape. */
const immediateReads = new WeakMap<Db, ImmediateReads>();

/** Lets every CompiledShape run its reads on `db` at once; called by whoever opens `db`. */
export function useImmediateReads(db: Db, reads: ImmediateReads): void {
  immediateReads.set(db, reads);
}

/**
 * Lets `derived`, the same database as `db` seen through a plugin (`withPlugin`), read at once too:
 * reads made at once skip kysely's plugins, so `rows` must do to each answer what the plugin's
 * `transformResult` does. Without it, a store wrapped in a plugin (the sealed one) lost the fast path.
 */
export function deriveImmediateReads(
  db: Db,
  derived: Db,
  rows: <R>(read: readonly Readonly<R>[]) => readonly Readonly<R>[],
): void {
  const reads = immediateReads.get(db);
  if (reads === undefined) return;
  immediateReads.set(derived, {
    prepare<R>(sql: string, reuse: boolean) {
      const read = reads.prepare<R>(sql, reuse);
      // Rows given again (reuse) are transformed once, not on every read.
      let last: { answer: readonly Readonly<R>[]; rows: readonly Readonly<R>[] } | undefined;
      return (parameters: readonly unknown[]) => {
        const answer = read(parameters);
        if (answer === undefined) return undefined;
        if (last?.answer !== answer) last = { answer, rows: rows(answer) };
        return last.rows;
      };
    },
  });
}

export interface ShapeOptions {
  /**
   * On SQLite, answer the last rows again for the same arguments while nothing has been committed
   * (exact: see ImmediateReads). The check reads data_version in a read transaction, which the reads
   * of one request share: it costs about a small indexed query, so this pays for queries
   * that count, join or scan many rows, or whose rows are opened or viewed (kept per row object).
   */
  reuse?: boolean;
}

interface Template<R> {
  compiled: CompiledQuery<R>;
  /** Where each argument goes among the bound parameters (-1: a constant of the query). */
  positions: number[];
  readNow: ((parameters: readonly unknown[]) => readonly Readonly<R>[] | undefined) | undefined;
}

/**
 * A query shape compiled once and run with new values. Kysely rebuilds and recompiles a query on
 * every call, which costs more than SQLite takes to run an indexed one; on hot paths the SQL of a
 * shape never changes, only its bound values. The shape is compiled once with `sample` arguments
 * (distinct values that never occur as constants in the query); where each sample lands among the
 * bound parameters is where the real arguments go on every run. An argument given as undefined
 * must leave its condition out (an optional filter): each pattern of given arguments is compiled
 * once. On SQLite the query runs at once when the connection is free (see ImmediateReads). Rows
 * are read-only, since a shape made with `reuse` gives the same rows to every caller.
 */
export class CompiledShape<A extends readonly unknown[], R> {
  readonly #build: (db: Db, ...args: A) => Compilable<R>;
  readonly #sample: A;
  readonly #reuse: boolean;
  /** Per database (the SQL differs) and pattern of given arguments (bit i: argument i given). */
  readonly #templates = new WeakMap<Db, Map<number, Template<R>>>();

  constructor(build: (db: Db, ...args: A) => Compilable<R>, sample: A, options: ShapeOptions = {}) {
    this.#build = build;
    this.#sample = sample;
    this.#reuse = options.reuse ?? false;
  }

  async execute(db: Db, ...args: A): Promise<readonly Readonly<R>[]> {
    let templates = this.#templates.get(db);
    if (templates === undefined) {
      templates = new Map();
      this.#templates.set(db, templates);
    }
    let given = 0;
    for (let i = 0; i < args.length; i++) if (args[i] !== undefined) given |= 1 << i;
    let template = templates.get(given);
    if (template === undefined) {
      template = this.#compile(db, args);
      templates.set(given, template);
    }
    const { compiled, positions, readNow } = template;
    const parameters = compiled.parameters.map((value, position) => {
      const argument = positions[position] ?? -1;
      return argument === -1 ? value : args[argument];
    });
    const rows = readNow?.(parameters);
    if (rows !== undefined) return rows;
    const query: CompiledQuery<R> = { ...compiled, parameters };
    return (await db.executeQuery(query)).rows;
  }

  #compile(db: Db, args: A): Template<R> {
    const sample: [...A] = [...this.#sample];
    args.forEach((value, i) => {
      if (value === undefined) sample[i] = undefined;
    });
    const compiled = this.#build(db, ...sample).compile();
    const positions = compiled.parameters.map((p) => (p === undefined ? -1 : sample.indexOf(p)));
    sample.forEach((value, i) => {
      if (value !== undefined && compiled.parameters.filter((p) => p === value).length !== 1) {
        throw new Error(`query shape must bind sample argument ${i} exactly once`);
      }
    });
    return { compiled, positions, readNow: immediateReads.get(db)?.prepare<R>(compiled.sql, this.#reuse) };
  }
}

/** A page of a query shape: one CompiledShape per row limit, given to `build` as a literal (see rowLimit). */
export class CompiledPageShape<A extends readonly unknown[], R> {
  readonly #build: (db: Db, limit: RawBuilder<number>, ...args: A) => Compilable<R>;
  readonly #sample: A;
  readonly #options: ShapeOptions;
  readonly #shapes = new Map<number, CompiledShape<A, R>>();

  constructor(
    build: (db: Db, limit: RawBuilder<number>, ...args: A) => Compilable<R>,
    sample: A,
    options: ShapeOptions = {},
  ) {
    this.#build = build;
    this.#sample = sample;
    this.#options = options;
  }

  execute(db: Db, limit: number, ...args: A): Promise<readonly Readonly<R>[]> {
    let shape = this.#shapes.get(limit);
    if (shape === undefined) {
      const build = (shapeDb: Db, ...shapeArgs: A) => this.#build(shapeDb, rowLimit(limit), ...shapeArgs);
      shape = new CompiledShape(build, this.#sample, this.#options);
      this.#shapes.set(limit, shape);
    }
    return shape.execute(db, ...args);
  }
}
