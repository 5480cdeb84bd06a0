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

/**
 * The rows of a ReusedShape's read (docs/architecture.md, "Reused reads"). On SQLite the very same object is
 * answered again, to every caller, while nothing has been committed since it was read; on PostgreSQL every read
 * is a new one. So neither the rows nor the array may be changed, and what is made of them may be kept per this
 * object or per row object (`src/services/row-views.ts`). Only this module makes one: the type is exported, the
 * class is not.
 */
class ReusedRows<R> {
  readonly #rows: readonly Readonly<R>[];

  constructor(rows: readonly Readonly<R>[]) {
    this.#rows = rows;
  }

  get rows(): readonly Readonly<R>[] {
    return this.#rows;
  }

  /** Whether every row passes `keep`; if so these are reused rows of its type, this very object. */
  every<S extends Readonly<R>>(keep: (row: Readonly<R>) => row is S): this is ReusedRows<S> {
    return this.#rows.every(keep);
  }

  /** The rows that pass `keep`: the same row objects, in a new object each call (so nothing is kept of it). */
  filter<S extends Readonly<R>>(keep: (row: Readonly<R>) => row is S): ReusedRows<S> {
    return new ReusedRows<S>(this.#rows.filter(keep));
  }
}
export type { ReusedRows };

/** The databases whose reads may run at once (SQLite), for the query shapes. */
const immediateReads = new WeakMap<Db, ImmediateReads>();

/** Lets every query shape run its reads on `db` at once; called by whoever opens `db`. */
export function useImmediateReads(db: Db, reads: ImmediateReads): void {
  immediateReads.set(db, reads);
}

/**
 * Lets `derived`, the same database as `db` seen through a plugin (`withPlugin`), read at once too:
 * reads made at once skip kysely's plugins, so `rows` must do to each answer what the plugin's
 * `transformResult` does. Without it, a store wrapped in a plugin (the sealed one) lost the fast path.
 */
export function deriveImmediateReads(db: Db, derived: Db, rows: <R>(read: readonly R[]) => readonly R[]): void {
  const reads = immediateReads.get(db);
  if (reads === undefined) return;
  immediateReads.set(derived, {
    prepare<R>(sql: string) {
      const read = reads.prepare<R>(sql);
      return (parameters: readonly unknown[]) => {
        const answer = read(parameters);
        return answer === undefined ? undefined : rows(answer);
      };
    },
    prepareReused<R>(sql: string) {
      const read = reads.prepareReused<R>(sql);
      // An answer given again is transformed once, and stays the same array.
      let last: { answer: readonly R[]; rows: readonly R[] } | undefined;
      return (parameters: readonly unknown[]) => {
        const answer = read(parameters);
        if (answer === undefined) return undefined;
        if (last?.answer !== answer) last = { answer, rows: rows(answer) };
        return last.rows;
      };
    },
  });
}

/** How a kind of shape answers: from a read run at once (undefined while the connection is busy), or from kysely's. */
interface Answers<R, T> {
  atOnce(reads: ImmediateReads, sql: string): (parameters: readonly unknown[]) => T | undefined;
  of(rows: R[]): T;
}

interface Template<R, T> {
  compiled: CompiledQuery<R>;
  /** Where each argument goes among the bound parameters (-1: a constant of the query). */
  positions: number[];
  readNow: ((parameters: readonly unknown[]) => T | undefined) | undefined;
}

/**
 * A query shape compiled once and run with new values. Kysely rebuilds and recompiles a query on
 * every call, which costs more than SQLite takes to run an indexed one; on hot paths the SQL of a
 * shape never changes, only its bound values. The shape is compiled once with `sample` arguments
 * (distinct values that never occur as constants in the query); where each sample lands among the
 * bound parameters is where the real arguments go on every run. An argument given as undefined
 * must leave its condition out (an optional filter): each pattern of given arguments is compiled
 * once. On SQLite the query runs at once when the connection is free (see ImmediateReads).
 */
class QueryShape<A extends readonly unknown[], R, T> {
  readonly #build: (db: Db, ...args: A) => Compilable<R>;
  readonly #sample: A;
  readonly #answers: Answers<R, T>;
  /** Per database (the SQL differs) and pattern of given arguments (bit i: argument i given). */
  readonly #templates = new WeakMap<Db, Map<number, Template<R, T>>>();

  constructor(build: (db: Db, ...args: A) => Compilable<R>, sample: NoInfer<A>, answers: Answers<R, T>) {
    this.#build = build;
    this.#sample = sample;
    this.#answers = answers;
  }

  async execute(db: Db, ...args: A): Promise<T> {
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
    const now = readNow?.(parameters);
    if (now !== undefined) return now;
    const query: CompiledQuery<R> = { ...compiled, parameters };
    return this.#answers.of((await db.executeQuery(query)).rows);
  }

  #compile(db: Db, args: A): Template<R, T> {
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
    const reads = immediateReads.get(db);
    return { compiled, positions, readNow: reads && this.#answers.atOnce(reads, compiled.sql) };
  }
}

/** A query shape (QueryShape) whose every read is new: its rows are the caller's. */
export class CompiledShape<A extends readonly unknown[], R> extends QueryShape<A, R, readonly R[]> {
  constructor(build: (db: Db, ...args: A) => Compilable<R>, sample: NoInfer<A>) {
    super(build, sample, { atOnce: (reads, sql) => reads.prepare<R>(sql), of: (rows) => rows });
  }
}

/**
 * A query shape (QueryShape) whose rows are reused (ReusedRows): on SQLite the same answer again for the same
 * arguments while nothing has been committed (exact: see ImmediateReads). The check reads data_version, once per
 * request (Store.requestBegins), and costs about a small indexed query, so it pays for queries that count, join
 * or scan many rows, or whose rows are opened (the sealed store) or viewed (pages kept per rows: KeptPages).
 */
export class ReusedShape<A extends readonly unknown[], R> extends QueryShape<A, R, ReusedRows<R>> {
  constructor(build: (db: Db, ...args: A) => Compilable<R>, sample: NoInfer<A>) {
    super(build, sample, {
      atOnce(reads, sql) {
        const read = reads.prepareReused<R>(sql);
        let last: ReusedRows<R> | undefined;
        return (parameters) => {
          const rows = read(parameters);
          if (rows === undefined) return undefined;
          // The same answer again is the same object: what is kept per ReusedRows holds.
          if (last?.rows !== rows) last = new ReusedRows(rows);
          return last;
        };
      },
      of: (rows) => new ReusedRows(rows),
    });
  }
}

/** A page of a ReusedShape: one shape per row limit, given to `build` as a literal (see rowLimit). */
export class ReusedPageShape<A extends readonly unknown[], R> {
  readonly #build: (db: Db, limit: RawBuilder<number>, ...args: A) => Compilable<R>;
  readonly #sample: A;
  readonly #shapes = new Map<number, ReusedShape<A, R>>();

  constructor(build: (db: Db, limit: RawBuilder<number>, ...args: A) => Compilable<R>, sample: NoInfer<A>) {
    this.#build = build;
    this.#sample = sample;
  }

  execute(db: Db, limit: number, ...args: A): Promise<ReusedRows<R>> {
    let shape = this.#shapes.get(limit);
    if (shape === undefined) {
      const build = (shapeDb: Db, ...shapeArgs: A) => this.#build(shapeDb, rowLimit(limit), ...shapeArgs);
      shape = new ReusedShape(build, this.#sample);
      this.#shapes.set(limit, shape);
    }
    return shape.execute(db, ...args);
  }
}
