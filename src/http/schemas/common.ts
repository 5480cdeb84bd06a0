import Type, { type TSchema } from 'typebox';

export const ErrorSchema = Type.Object(
  {
    error: Type.Object({
      code: Type.String({ description: 'machine-readable code, e.g. validation_failed' }),
      message: Type.String(),
      fields: Type.Record(Type.String(), Type.String(), { description: 'input name → what is wrong with it; {} when none' }),
    }),
  },
  { $id: 'Error', title: 'Error' },
);

export const IdParams = Type.Object({ id: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }) });

export const DateTime = Type.String({ format: 'date-time' });


/** `{data, has_more}` of spec §2.9. */
export function Page<T extends TSchema>(item: T) {
  return Type.Object({ data: Type.Array(item), has_more: Type.Boolean() });
}

