import { messageOf } from '../domain/errors.ts';
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';

/** Wrong words on the command line: printed with the usage text, exit code 2. */
export class UsageError extends Error {}

export function parseCommandArgs<T extends ParseArgsOptionsConfig>(args: string[], options: T) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError(messageOf(error));
  }
}
