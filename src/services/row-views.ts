import { type Page, type PageRequest, toPage } from '../domain/paging.ts';
import type { ReusedRows } from '../store/query-shapes.ts';

interface Kept<V> {
  limit: number;
  /** The instants between which the page shows what it would if made again (its views may depend on the time). */
  fromMs: number;
  untilMs: number;
  page: Page<V>;
}

/**
 * Pages of a list made of reused rows (ReusedRows), each kept as long as its rows object lives (the store answers
 * it again while nothing is committed): a list asked for again is the very same page object, whose body the route
 * keeps (PageWriter). The rules: docs/architecture.md, "Reused reads".
 */
export class KeptPages<R, V> {
  readonly #pages = new WeakMap<ReusedRows<R>, Kept<V>>();

  /** The page kept for `rows` and the request's limit, if it still holds at `nowMs`. */
  kept(rows: ReusedRows<R>, request: PageRequest, nowMs = 0): Page<V> | undefined {
    const kept = this.#pages.get(rows);
    const holds = kept !== undefined && kept.limit === request.limit && kept.fromMs <= nowMs && nowMs < kept.untilMs;
    return holds ? kept.page : undefined;
  }

  /** Keeps `page`, made of `rows` for `request`, for the instants from `fromMs` until `untilMs`. */
  keep(rows: ReusedRows<R>, request: PageRequest, page: Page<V>, fromMs = -Infinity, untilMs = Infinity): Page<V> {
    this.#pages.set(rows, { limit: request.limit, fromMs, untilMs, page });
    return page;
  }
}

/** Pages (toPage) of reused rows made of each row's `view`, a function of the row alone: kept (KeptPages). */
export function keptPages<R, V>(view: (row: Readonly<R>) => V): (rows: ReusedRows<R>, request: PageRequest) => Page<V> {
  const pages = new KeptPages<R, V>();
  return (rows, request) => {
    const kept = pages.kept(rows, request);
    if (kept !== undefined) return kept;
    const { data, has_more } = toPage(rows.rows, request);
    return pages.keep(rows, request, { data: data.map(view), has_more });
  };
}
