/** Keyset paging (docs/api.md "Paging"): items in id order after a cursor, `{data, has_more}`. */
export const MAX_PAGE_SIZE = 200;
export const DEFAULT_PAGE_SIZE = 50;

export interface PageRequest {
  /** Items with an id above this one. */
  afterId: number;
  limit: number;
}

/** Never changed once made: a kept page (KeptPages) is given to every caller. */
export interface Page<T> {
  readonly data: readonly T[];
  readonly has_more: boolean;
}

/** Store functions fetch `limit + 1` rows in id order; the extra row only says that more exist. */
export function toPage<T>(rows: readonly T[], request: PageRequest): Page<T> {
  return { data: rows.slice(0, request.limit), has_more: rows.length > request.limit };
}
