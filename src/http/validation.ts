import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import { isHost, isIpAddress, isNetwork } from '../domain/addresses.ts';
import { instantMs } from '../domain/clock.ts';

function makeAjv(coerceTypes: boolean): Ajv {
  // removeAdditional stays off: an unknown field is an error naming it, never silently dropped.
  const ajv = new Ajv({ allErrors: true, coerceTypes, useDefaults: true, removeAdditional: false, strict: false });
  addFormats.default(ajv);
  // Formats whose rule is the domain's, so the schema of every route (bodies and query strings) says it.
  ajv.addFormat('date-time', (text: string) => instantMs(text) !== undefined);
  ajv.addFormat('host', isHost);
  ajv.addFormat('ip', isIpAddress);
  ajv.addFormat('network', isNetwork);
  return ajv;
}

/** JSON bodies are taken as typed (`"5"` is not a number); query and path text is converted. */
const bodyAjv = makeAjv(false);
const textAjv = makeAjv(true);

/**
 * Fastify keeps this compiler for every route only while no plugin context calls `addSchema`
 * (a context that does builds its own controller with the default Ajv): shared schemas are
 * therefore added once, at the root, in buildApp.
 */
export const validatorCompiler: FastifySchemaCompiler<object> = ({ schema, httpPart }) =>
  (httpPart === 'body' ? bodyAjv : textAjv).compile(schema);
