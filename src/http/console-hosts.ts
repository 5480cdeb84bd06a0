import type { FastifyRequest } from 'fastify';
import { isIpAddress, unbracketed } from '../domain/addresses.ts';
import { AppError } from '../domain/errors.ts';
import type { Api } from './api.ts';

/** `name` or `name:port`, `[IPv6]` or `[IPv6]:port`: a Host header's value. */
const HOST = /^(\[[0-9A-Fa-f:.]+\]|[^\s/\\@?#[\]:]+)(?::[0-9]{1,5})?$/;

/** The name a Host names, as the console compares it: lowercase, without port, brackets or a final dot. */
function hostName(host: string): string | undefined {
  const name = HOST.exec(host)?.[1];
  return name === undefined ? undefined : unbracketed(name.toLowerCase().replace(/\.$/, ''));
}

/**
 * Whether a browser that asks for the console at `host` reached this panel by that name. A DNS-rebinding page
 * (served from a name its owner controls, then pointed at the panel's address) sends its own name; an IP address
 * cannot be rebound (the browser connected to that very address), and the names are those the operator gave:
 * `localhost`, `PANEL_URL`'s, `PUBLIC_HOST`'s and `HOST`'s (config `consoleHostNames`). Any port.
 */
export function isConsoleHost(host: string, names: ReadonlySet<string>): boolean {
  const name = hostName(host);
  return name !== undefined && (isIpAddress(name) || names.has(name));
}

function foreignHost(): AppError {
  const message =
    'the console answers at an IP address, localhost, or the host name of PANEL_URL, PUBLIC_HOST or HOST; ' +
    'to open it by another name, set PANEL_URL to the URL people open';
  return new AppError('csrf_check_failed', message, { host: 'not a name of this panel' });
}

/**
 * Refuses a console request (its pages, its session, a request made with a session) whose Host is not the
 * panel's, with 403 `csrf_check_failed`. The Host is `X-Forwarded-Host` from a proxy `TRUST_PROXY` lists.
 */
export function checkConsoleHost(request: FastifyRequest, names: ReadonlySet<string>): void {
  if (!isConsoleHost(request.host, names)) throw foreignHost();
}

/** Checks the Host of every request to the routes of `context` (an encapsulated one: the console's). */
export function guardConsoleHosts(context: Api, names: ReadonlySet<string>): void {
  context.addHook('onRequest', (request, _reply, done) =>
    done(isConsoleHost(request.host, names) ? undefined : foreignHost()),
  );
}
