import { lookup as dnsLookup } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import type { Agent } from 'undici';
import { AppError } from '../domain/errors.ts';
import { isForbiddenAddress } from '../domain/webhooks.ts';

/** A webhook URL is checked when saved; a name that does not answer by then is refused. */
const SAVE_LOOKUP_TIMEOUT_MS = 3_000;

/** The connection of an attempt went, or would have gone, to an address webhooks may not reach. */
export class ForbiddenTargetError extends Error {
  constructor() {
    super('target resolves to a private address');
    this.name = 'ForbiddenTargetError';
  }
}

function refused(message: string, reason: string): AppError {
  return new AppError('validation_failed', message, { url: reason });
}

/**
 * Refuses a webhook URL that is not http(s), carries credentials, or (unless `allowPrivate`) names
 * or resolves to an internal address (isForbiddenAddress). Resolving here only gives the admin an
 * early answer: a name may later resolve elsewhere, which the dispatcher checks on every connection.
 */
export async function checkWebhookUrl(url: string, allowPrivate: boolean): Promise<void> {
  const parsed = URL.parse(url);
  if (parsed === null || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
    throw refused('url must be an absolute http or https URL', 'must be an absolute http or https URL');
  }
  if (parsed.username !== '' || parsed.password !== '') {
    throw refused('url must not contain a user name or password', 'must not contain credentials');
  }
  if (allowPrivate) return;
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  const addresses = isIP(host) !== 0 ? [host] : await resolveForSave(host);
  if (addresses.some(isForbiddenAddress)) {
    throw refused(
      `url must not point at a loopback, private, link-local or other internal address (${host})`,
      'resolves to a private address',
    );
  }
}

async function resolveForSave(host: string): Promise<string[]> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(refused(`url host ${host} did not resolve in time`, 'host did not resolve in time')),
      SAVE_LOOKUP_TIMEOUT_MS,
    );
  });
  try {
    const answers = await Promise.race([lookup(host, { all: true }), timeout]);
    return answers.map((a) => a.address);
  } catch (error) {
    if (error instanceof AppError) throw error;
    throw refused(`url host ${host} does not resolve`, 'host does not resolve');
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Resolves as the system does, but fails when any answer is forbidden: the socket then connects to
 * none of them, so the check is on the addresses actually connected to and a name re-pointed at an
 * internal address after it was saved (DNS rebinding) fails the attempt.
 */
const guardedLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (error, answers) => {
    if (error) return callback(error, []);
    if (answers.some((a) => isForbiddenAddress(a.address))) return callback(new ForbiddenTargetError(), []);
    const [first] = answers;
    if (options.all === true || first === undefined) return callback(null, answers);
    callback(null, first.address, first.family);
  });
};

/**
 * The HTTP client of webhook attempts: keep-alive connections pooled per origin, redirects never
 * followed (undici follows none unless told). Unless `allowPrivate`, a literal IP host is judged
 * before connecting and a name through guardedLookup (net.connect skips the lookup for literals).
 */
export async function makeWebhookDispatcher(allowPrivate: boolean): Promise<Agent> {
  // Loaded at the first webhook sent: a panel that sends none keeps undici out of memory.
  const { Agent, buildConnector } = await import('undici');
  if (allowPrivate) return new Agent();
  const connect = buildConnector({ lookup: guardedLookup });
  return new Agent({
    connect(options, callback) {
      if (isIP(options.hostname) !== 0 && isForbiddenAddress(options.hostname))
        return callback(new ForbiddenTargetError(), null);
      connect(options, callback);
    },
  });
}
