import { jsonValidatorCompiler } from '../platform/json-validation.ts';
import { isHost, isIpAddress, isNetwork } from '../domain/addresses.ts';
import { instantMs } from '../domain/clock.ts';

/** Formats whose rule is the domain's, so the schema of every route (bodies and query strings) says it. */
export const validatorCompiler = jsonValidatorCompiler({
  'date-time': (text: string) => instantMs(text) !== undefined,
  host: isHost,
  ip: isIpAddress,
  network: isNetwork,
});
