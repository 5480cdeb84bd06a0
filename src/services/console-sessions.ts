import { type Clock, isoAt } from '../domain/clock.ts';
import {
  type ConsoleRole,
  consoleUserActor,
  SESSION_IDLE_MS,
  SESSION_LIFETIME_MS,
  SESSION_TOUCH_INTERVAL_MS,
  scopesOfRole,
  sessionEndMs,
} from '../domain/console-users.ts';
import { sessionEnded, signInRequired, wrongCredentials } from '../domain/error-cases.ts';
import { isKnownDeviceShape, knownDeviceId, knownDeviceToken } from '../domain/known-devices.ts';
import { generateSecretToken, hashSecretToken, isSecretTokenShape } from '../domain/secret-tokens.ts';
import {
  type ConsoleSessionOfUser,
  deleteConsoleSession,
  findConsoleSession,
  insertConsoleSession,
  pruneConsoleSessions,
  touchConsoleSession,
} from '../store/console-sessions.ts';
import { findConsoleUserByName, setConsoleUserSignedIn } from '../store/console-users.ts';
import type { Db } from '../store/db.ts';
import { consoleUserSignedIn, consoleUserSignedOut } from './change-kinds.ts';
import { type ChangePublisher, change } from './changes.ts';
import type { PasswordHasher } from './passwords.ts';
import type { ConsoleUserPrincipal } from './principals.ts';

/** A session just made: the token goes into the cookie and nowhere else; `device`, the known-device token. */
export interface SignedIn {
  token: string;
  /** Proves this browser's success to later sign-ins as the user (src/domain/known-devices.ts). */
  device: string;
  user: { name: string; role: ConsoleRole };
}

/** Lets a request with a session not known valid go on to the lookup, or refuses it (throws or rejects). */
type AdmitUnknown<C> = (context: C) => void | Promise<void>;

/** Sessions found valid by this panel that are kept in memory, at most (they only spare a budget; see #foundValid). */
const FOUND_VALID_MAX = 10_000;

function principalOf(session: ConsoleSessionOfUser): ConsoleUserPrincipal {
  return {
    kind: 'console_user',
    userId: session.user_id,
    name: session.user_name,
    role: session.user_role,
    sessionId: session.id,
    scopes: scopesOfRole(session.user_role),
    actor: consoleUserActor(session.user_name),
    rateLimitExempt: false,
    rateLimitId: `console-user:${session.user_id}`,
  };
}

/**
 * Console sessions: signing in with a user name and password, the session each request's cookie names,
 * signing out. Every lookup reads the database (one indexed row), so a session that a panel, the CLI
 * or another panel ended is refused at the next request.
 */
export class ConsoleSessionService {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #passwords: PasswordHasher;
  /**
   * Hashes of the tokens whose last lookup found a live session. Their requests skip `admitUnknown`'s
   * budget, which is for guesses, so a signed-in user keeps working from an address others flood.
   */
  readonly #foundValid = new Set<string>();
  readonly #changes: ChangePublisher;

  constructor(db: Db, clock: Clock, passwords: PasswordHasher, changes: ChangePublisher) {
    this.#db = db;
    this.#clock = clock;
    this.#passwords = passwords;
    this.#changes = changes;
  }

  /**
   * The id of the browser whose known-device token this is, when it was made for this user name and its
   * current password (a new password forgets every device); else undefined. One indexed read.
   */
  async knownDevice(name: string, token: string): Promise<string | undefined> {
    if (!isKnownDeviceShape(token)) return undefined;
    const user = await findConsoleUserByName(this.#db, name);
    return user && knownDeviceId(token, user.password_hash, user.name);
  }

  /**
   * A new session for the user, or `unauthorized` with the same message whether the name or the password
   * was wrong; an unknown name costs the same scrypt time as a known one. `deviceId` (from `knownDevice`)
   * puts the hash in the first queue and keeps the browser's id in the new known-device token. Sessions
   * past their end are deleted here, so the table holds only live ones and the few that ended since the last
   * sign-in. A new password or a removal while the hash ran also answers `unauthorized`: the session is
   * made only if the user still has the hash that was checked.
   */
  async signIn(name: string, password: string, deviceId?: string): Promise<SignedIn> {
    const user = await findConsoleUserByName(this.#db, name);
    const priority = deviceId === undefined ? 'queued' : 'first';
    const matches = await this.#passwords.verify(password, user?.password_hash, priority);
    if (user === undefined || !matches) throw wrongCredentials();
    const token = generateSecretToken();
    const tokenHash = hashSecretToken(token);
    const nowMs = this.#clock.nowMs();
    const now = isoAt(nowMs);
    await this.#changes.commit(async (tx) => {
      // A write first: on SQLite the transaction holds the write lock from here, so the check below holds.
      await pruneConsoleSessions(tx, now, isoAt(nowMs - SESSION_IDLE_MS));
      const signedIn = await setConsoleUserSignedIn(tx, { id: user.id, passwordHash: user.password_hash }, now);
      if (signedIn === undefined) throw wrongCredentials();
      await insertConsoleSession(tx, {
        userId: user.id,
        tokenHash,
        createdAt: now,
        expiresAt: isoAt(nowMs + SESSION_LIFETIME_MS),
      });
      return { result: undefined, change: consoleUserSignedIn(user, signedIn) };
    });
    // Made here, so known valid: its first request from a flooded address is not held back.
    this.#foundValid.add(tokenHash);
    const device = knownDeviceToken(user.password_hash, user.name, deviceId);
    return { token, device, user: { name: user.name, role: user.role } };
  }

  /**
   * The principal of a request's session token. A token this panel has not found valid before (or
   * none, or a malformed one) is first shown to `admitUnknown(context)`, which may refuse it before any
   * lookup. Refused with `unauthorized` when the session does not exist or has ended (it is then
   * deleted). The session's last use is written when SESSION_TOUCH_INTERVAL_MS has passed since.
   */
  async authenticate<C>(
    token: string | undefined,
    admitUnknown: AdmitUnknown<C>,
    context: C,
  ): Promise<ConsoleUserPrincipal> {
    const tokenHash = token !== undefined && isSecretTokenShape(token) ? hashSecretToken(token) : undefined;
    if (tokenHash === undefined || !this.#foundValid.has(tokenHash)) await admitUnknown(context);
    if (tokenHash === undefined) throw signInRequired();
    const session = await findConsoleSession(this.#db, tokenHash);
    const nowMs = this.#clock.nowMs();
    const lastUsedMs = Date.parse(session?.last_used_at ?? '');
    if (session === undefined || nowMs >= sessionEndMs(lastUsedMs, Date.parse(session.expires_at))) {
      this.#foundValid.delete(tokenHash);
      if (session !== undefined) await deleteConsoleSession(this.#db, session.id);
      throw sessionEnded();
    }
    if (this.#foundValid.size >= FOUND_VALID_MAX) this.#foundValid.clear();
    this.#foundValid.add(tokenHash);
    if (nowMs - lastUsedMs >= SESSION_TOUCH_INTERVAL_MS) await touchConsoleSession(this.#db, session.id, isoAt(nowMs));
    return principalOf(session);
  }

  /** Ends the principal's session (the row is deleted); recorded when it was still there. */
  async signOut(principal: ConsoleUserPrincipal): Promise<void> {
    await this.#changes.commit(async (tx) => {
      const ended = await deleteConsoleSession(tx, principal.sessionId);
      return { result: undefined, change: ended ? consoleUserSignedOut(principal) : change({}) };
    });
  }
}
