import Type from 'typebox';

export const MAX_PAGE_SIZE = 200;
export const DEFAULT_PAGE_SIZE = 50;

/** The query fields every paged list takes (spec §4.1); merge into a route's querystring schema. */
export const PageQueryFields = {
  after: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'the last id of the previous page' })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_PAGE_SIZE, default: DEFAULT_PAGE_SIZE })),
};

export interface PageRequest {
  /** Items with an id above this one. */
  afterId: number;
  limit: number;
}

export function pageRequest(query: { after?: number; limit?: number }): PageRequest {
  return { afterId: query.after ?? 0, limit: query.limit ?? DEFAULT_PAGE_SIZE };
}

/**
 * Store functions fetch `limit + 1` rows in id order; the extra row only says that more exist.
 */
export function toPage<T>(rows: readonly T[], request: PageRequest): { data: T[]; has_more: boolean } {
  return { data: rows.slice(0, request.limit), has_more: rows.length > request.limit };
}
