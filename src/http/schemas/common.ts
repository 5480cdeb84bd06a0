import Type, { type TSchema } from 'typebox';
import { PLAIN_TEXT_PATTERN } from '../../domain/text.ts';

export const ErrorSchema = Type.Object(
  {
    error: Type.Object({
      code: Type.String({ description: 'machine-readable code, e.g. validation_failed' }),
      message: Type.String(),
      fields: Type.Record(Type.String(), Type.String(), {
        description: 'input name → what is wrong with it; {} when none',
      }),
    }),
  },
  { $id: 'Error', title: 'Error' },
);

/** A resource id wherever it is given: no larger than both databases' integers and JavaScript's hold exactly. */
export const Id = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER });

export const IdParams = Type.Object({ id: Id });

export const DateTime = Type.String({
  format: 'date-time',
  description: 'RFC 3339 date-time with Z or an offset; a leap second (:60) or a year outside 0001-9999 UTC is refused',
});

/** A name or identifier: text without control, line-separator or bidi-override characters (src/domain/text.ts). */
export function PlainText(options: { minLength?: number; maxLength: number; description?: string }) {
  return Type.String({ ...options, pattern: PLAIN_TEXT_PATTERN });
}

/** `{data, has_more}` of docs/api.md "Paging". */
export function Page<T extends TSchema>(item: T) {
  return Type.Object({ data: Type.Array(item), has_more: Type.Boolean() });
}
