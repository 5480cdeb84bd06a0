import { Ajv, type Format } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

function makeAjv(coerceTypes: boolean, formats: Record<string, Format>): Ajv {
  // removeAdditional stays off: an unknown field is an error naming it, never silently dropped.
  const ajv = new Ajv({ allErrors: true, coerceTypes, useDefaults: true, removeAdditional: false, strict: false });
  addFormats.default(ajv);
  for (const [name, format] of Object.entries(formats)) ajv.addFormat(name, format);
  return ajv;
}

/**
 * The schema compiler of both JSON APIs, the agent's and the panel's (which adds its domain's formats):
 * JSON bodies are taken as typed (`"5"` is not a number, a null limit never turns into 0); query and
 * path text is converted.
 *
 * Fastify keeps this compiler for every route only while no plugin context calls `addSchema`
 * (a context that does builds its own controller with the default Ajv): shared schemas are
 * therefore added once, at the root.
 */
export function jsonValidatorCompiler(formats: Record<string, Format> = {}): FastifySchemaCompiler<object> {
  const bodyAjv = makeAjv(false, formats);
  const textAjv = makeAjv(true, formats);
  return ({ schema, httpPart }) => (httpPart === 'body' ? bodyAjv : textAjv).compile(schema);
}
