import { type DestinationStream, type Logger, pino, stdSerializers } from 'pino';

/** `/s/<token>` and `/s/<token>/config`: the token is the share page's whole secret. */
const SHARE_PATH = /\/s\/[^/?#\s"\\]+/g;
/** An Authorization header logged as a field of any object (a header map), whatever its scheme. */
const AUTHORIZATION_FIELD = /"((?:proxy-)?authorization)":"(?:[^"\\]|\\.)*"/gi;
/** A bearer credential (API key, node token) wherever it appears: a message, an error's text. */
const BEARER = /\b(bearer)\s+[^\s"\\,]+/gi;
/** An API key sent where it does not belong (a query string, a body). */
const API_KEY = /\bvpnk_[A-Za-z0-9]+/g;
/** What each of the above begins with. */
const SUSPECT = /\/s\/|authorization|bearer|vpnk_/i;

/**
 * Every log line as written, with share tokens and credentials replaced. Applied to the final text
 * so that every path to the log is covered: Fastify's request lines (`url`), its messages that quote
 * a URL, error messages and whatever a later change logs.
 */
export function redactSecrets(line: string): string {
  // Almost no line holds any of these: one scan instead of four (measured 0.3-0.5 µs a line, not 3-4 µs).
  if (!SUSPECT.test(line)) return line;
  return line
    .replace(SHARE_PATH, '/s/[redacted]')
    .replace(AUTHORIZATION_FIELD, '"$1":"[redacted]"')
    .replace(BEARER, '$1 [redacted]')
    .replace(API_KEY, 'vpnk_[redacted]');
}

/**
 * Errors as pino serializes them, without `rawPacket`: Node puts the raw bytes of a malformed
 * request on its clientError (Fastify logs it at trace), headers and path included, as a byte array
 * that no text redaction would recognise.
 */
function serializeError(error: unknown): unknown {
  // A string (a node call's detail) or another non-error is logged as it is.
  if (!(error instanceof Error)) return error;
  return Object.fromEntries(Object.entries(stdSerializers.err(error)).filter(([name]) => name !== 'rawPacket'));
}

/**
 * The one logger of a process (`serve`, `node`): JSON lines on stdout (or `destination`, where a test
 * reads them), never a secret.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino({ level, serializers: { err: serializeError }, hooks: { streamWrite: redactSecrets } }, destination);
}
