/**
 * The console's session (`/console/session`): sign in with a user name and password for an HttpOnly
 * cookie, ask who is signed in, sign out. The cookie is the only credential: no API key is kept here.
 */
import { problemOf } from './api.ts';

export type Role = 'admin' | 'viewer';

export interface ConsoleUser {
  name: string;
  role: Role;
}

export interface Session {
  user: ConsoleUser;
  /** The panel's zone (PANEL_TIMEZONE) when the panel names it; times show it on hover. */
  timeZone: string;
}

const SESSION = '/console/session';

function field(value: unknown, name: string): unknown {
  return typeof value === 'object' && value !== null && name in value
    ? Object.getOwnPropertyDescriptor(value, name)?.value
    : undefined;
}

/** The session the panel answered, or undefined when the answer is not one. */
export function sessionOf(body: unknown): Session | undefined {
  const user = field(body, 'user');
  const name = field(user, 'name');
  const role = field(user, 'role');
  const zone = field(body, 'time_zone');
  if (typeof name !== 'string' || (role !== 'admin' && role !== 'viewer')) return undefined;
  return { user: { name, role }, timeZone: typeof zone === 'string' && zone !== '' ? zone : 'UTC' };
}

/** Who is signed in; undefined when nobody is (401) or the panel has no sessions. */
export async function currentSession(): Promise<Session | undefined> {
  try {
    const response = await fetch(SESSION, { credentials: 'same-origin', headers: { accept: 'application/json' } });
    return response.ok ? sessionOf(await response.json()) : undefined;
  } catch {
    return undefined;
  }
}

export type SignIn = { ok: true } | { ok: false; message: string };

export async function signIn(user: string, password: string): Promise<SignIn> {
  try {
    const response = await fetch(SESSION, {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'content-type': 'application/json', 'x-console-request': '1' },
      body: JSON.stringify({ user, password }),
    });
    if (response.ok) return { ok: true };
    if (response.status === 429) {
      const seconds = Number(response.headers.get('retry-after'));
      const wait = Number.isFinite(seconds) && seconds > 0 ? `in ${seconds} s` : 'in a moment';
      return { ok: false, message: `Too many sign-in attempts. Try again ${wait}.` };
    }
    const body: unknown = await response.json().catch(() => undefined);
    return { ok: false, message: problemOf(response.status, body).message };
  } catch {
    return { ok: false, message: problemOf(0, undefined).message };
  }
}

export async function signOut(): Promise<void> {
  await fetch(SESSION, { method: 'DELETE', credentials: 'same-origin', headers: { 'x-console-request': '1' } }).catch(
    () => undefined,
  );
}
