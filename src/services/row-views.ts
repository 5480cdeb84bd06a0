import { type Page, type PageRequest, toPage } from '../domain/paging.ts';

/**
 * `view` kept per row object. A list's rows are the same objects while nothing is committed (a reused query
 * shape), so each row's view is made once, and the same view object lets the route keep its JSON (ItemJson).
 */
export function keptPerRow<R extends object, V extends object>(view: (row: R) => V): (row: R) => V {
  const kept = new WeakMap<R, V>();
  return (row) => {
    let made = kept.get(row);
    if (made === undefined) {
      made = view(row);
      kept.set(row, made);
    }
    return made;
  };
}

/**
 * The page (toPage) of `rows` made of each row's `view`, kept while the rows are the same array: a reused query
 * shape answers the same array while nothing is committed, so a list asked for again is the same page object,
 * which its route sends as the bytes it sent last (PageWriter). Frozen, since every caller gets the same one.
 */
export function keptPages<R, V>(view: (row: R) => V): (rows: readonly R[], request: PageRequest) => Page<V> {
  let last: { rows: readonly R[]; limit: number; page: Page<V> } | undefined;
  return (rows, request) => {
    if (last !== undefined && last.rows === rows && last.limit === request.limit) return last.page;
    const { data, has_more } = toPage(rows, request);
    const page = { data: data.map(view), has_more };
    Object.freeze(page.data);
    Object.freeze(page);
    last = { rows, limit: request.limit, page };
    return page;
  };
}
