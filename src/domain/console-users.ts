import { SCOPES, type Scope } from './api-keys.ts';
import { AppError } from './errors.ts';

/** What a console user may do: an admin everything, a viewer read only. */
export const CONSOLE_ROLES = ['admin', 'viewer'] as const;
export type ConsoleRole = (typeof CONSOLE_ROLES)[number];

export function isConsoleRole(value: string): value is ConsoleRole {
  return (CONSOLE_ROLES as readonly string[]).includes(value);
}

/**
 * A viewer's scopes: the read scopes of docs/api.md "Keys and scopes". Webhooks are left out although a
 * viewer sees everything else: reading them takes `webhooks:write`, since their URLs often hold the
 * receiver's own secret.
 */
const VIEWER_SCOPES: ReadonlySet<Scope> = new Set(['devices:read', 'servers:read', 'events:read']);
const ADMIN_SCOPES: ReadonlySet<Scope> = new Set(SCOPES);

/**
 * Beyond the API key scopes (docs/api.md "Keys and scopes"): managing API keys and console users takes an
 * admin's console session. No API key reaches it, whatever its scopes, so a leaked key cannot mint keys or users
 * for itself.
 */
export const CONSOLE_ADMIN = 'console:admin';

/** What an operation asks of its caller: an API key scope (or a console role having it), or CONSOLE_ADMIN. */
export type Requirement = Scope | typeof CONSOLE_ADMIN;

/** The scopes a console session of the role has on /api/v1, as if it were an API key. */
export function scopesOfRole(role: ConsoleRole): ReadonlySet<Scope> {
  return role === 'admin' ? ADMIN_SCOPES : VIEWER_SCOPES;
}

/** The actor recorded for changes made in the console (events, activity log, mail). */
export function consoleUserActor(name: string): string {
  return `via console user ${name}`;
}

/**
 * Letters, digits and `.`, `_`, `-`, `@` (an email address fits): a name that reads the same everywhere it is
 * shown.
 */
const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;

/** A user name as given to `users add`, checked; refused with `validation_failed` naming `name`. */
export function consoleUserName(text: string): string {
  const name = text.trim();
  if (!NAME_PATTERN.test(name)) {
    const message =
      'a console user name is 1 to 64 letters, digits, dots, dashes, underscores or @, a letter or digit first';
    throw new AppError('validation_failed', message, { name: 'invalid' });
  }
  return name;
}

/** Sign-in matches names whatever their case (a phone capitalises the first letter); names are unique so too. */
export function nameKey(name: string): string {
  return name.toLowerCase();
}

/** A session ends this long after its last request (to the minute: see SESSION_TOUCH_INTERVAL_MS). */
export const SESSION_IDLE_MS = 12 * 60 * 60 * 1000;
/** And at the latest this long after its sign-in, however busy. */
export const SESSION_LIFETIME_MS = 7 * 24 * 60 * 60 * 1000;
/** A session's last use is written at most this often, so a request with a session stays a read. */
export const SESSION_TOUCH_INTERVAL_MS = 60_000;

/** When a session ends: SESSION_IDLE_MS after its last use, and at its absolute end (sign-in + SESSION_LIFETIME_MS). */
export function sessionEndMs(lastUsedAtMs: number, expiresAtMs: number): number {
  return Math.min(lastUsedAtMs + SESSION_IDLE_MS, expiresAtMs);
}
