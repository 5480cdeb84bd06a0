import Type from 'typebox';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, type PageRequest } from '../domain/paging.ts';

/** The query fields every paged list takes (docs/api.md "Paging"); spread into a route's querystring schema. */
export const PageQueryFields = {
  after: Type.Optional(
    Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'the last id of the previous page' }),
  ),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_PAGE_SIZE, default: DEFAULT_PAGE_SIZE })),
};

export function pageRequest(query: { after?: number; limit?: number }): PageRequest {
  return { afterId: query.after ?? 0, limit: query.limit ?? DEFAULT_PAGE_SIZE };
}
