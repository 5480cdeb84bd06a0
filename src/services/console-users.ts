import { type Clock, isoAt } from '../domain/clock.ts';
import { type ConsoleRole, consoleUserName, isConsoleRole } from '../domain/console-users.ts';
import { consoleUserNameTaken, consoleUserNotFound, lastAdmin } from '../domain/error-cases.ts';
import { AppError } from '../domain/errors.ts';
import { newPassword } from '../domain/passwords.ts';
import { isUniqueViolation } from '../store/constraint-violations.ts';
import { deleteConsoleSessionsOf } from '../store/console-sessions.ts';
import {
  type ConsoleUserRow,
  deleteConsoleUser,
  findConsoleUserById,
  findConsoleUserByName,
  insertConsoleUser,
  listConsoleUsers,
  lockAdminIds,
  setConsoleUserPassword,
  setConsoleUserRole,
} from '../store/console-users.ts';
import type { Db, Tx } from '../store/db.ts';
import {
  consoleUserAdded,
  consoleUserPasswordChanged,
  consoleUserRemoved,
  consoleUserRoleChanged,
} from './change-kinds.ts';
import { type Change, type ChangePublisher, change } from './changes.ts';
import type { PasswordHasher } from './passwords.ts';

/** A console user as `users list` shows it; never the password hash. */
export interface ConsoleUserInfo {
  id: number;
  name: string;
  role: ConsoleRole;
  createdAt: string;
  lastSignInAt: string | null;
}

export interface AddConsoleUserInput {
  name: string;
  /** `admin` or `viewer` (the default: an admin who leaves it out makes no admin by mistake). */
  role?: string;
  password: string;
}

function toInfo(row: ConsoleUserRow): ConsoleUserInfo {
  return { id: row.id, name: row.name, role: row.role, createdAt: row.created_at, lastSignInAt: row.last_sign_in_at };
}

/** A user by id (the API) or by name (the CLI). */
export type ConsoleUserRef = number | string;

function roleOf(text: string): ConsoleRole {
  if (!isConsoleRole(text)) {
    throw new AppError('validation_failed', `a console user's role is admin or viewer (got '${text}')`, {
      role: 'admin or viewer',
    });
  }
  return text;
}

function findUser(tx: Tx, ref: ConsoleUserRef): Promise<ConsoleUserRow | undefined> {
  return typeof ref === 'number' ? findConsoleUserById(tx, ref) : findConsoleUserByName(tx, ref);
}

/**
 * Refuses a change that would leave no admin (`user` removed or made a viewer): nobody could then manage
 * users or keys from the console. The admins stay locked until the transaction ends.
 */
async function keepAnAdmin(tx: Tx, user: ConsoleUserRow): Promise<void> {
  if (user.role !== 'admin') return;
  const others = (await lockAdminIds(tx)).filter((id) => id !== user.id);
  if (others.length === 0) throw lastAdmin(user.name);
}

/**
 * The people who may sign in to the console: made, listed, given a new password or role and removed by the CLI
 * and by an admin in the console (the Users page).
 */
export class ConsoleUserService {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #passwords: PasswordHasher;
  readonly #changes: ChangePublisher;

  constructor(db: Db, clock: Clock, passwords: PasswordHasher, changes: ChangePublisher) {
    this.#db = db;
    this.#clock = clock;
    this.#passwords = passwords;
    this.#changes = changes;
  }

  async add(input: AddConsoleUserInput, actor: string): Promise<ConsoleUserInfo> {
    const name = consoleUserName(input.name);
    const role = roleOf(input.role ?? 'viewer');
    const password = newPassword(input.password);
    if (await findConsoleUserByName(this.#db, name)) throw consoleUserNameTaken(name);
    // Hashed before the transaction: a write lock is never held for the hash's ~200 ms.
    const passwordHash = await this.#passwords.hash(password);
    const row = await this.#changes
      .commit(async (tx) => {
        const created = await insertConsoleUser(tx, { name, role, passwordHash, createdAt: this.#now() });
        return { result: created, change: consoleUserAdded(created, actor) };
      })
      .catch((error: unknown) => {
        // Another process added the same name since the check above.
        throw isUniqueViolation(error) ? consoleUserNameTaken(name) : error;
      });
    return toInfo(row);
  }

  async list(): Promise<ConsoleUserInfo[]> {
    return (await listConsoleUsers(this.#db)).map(toInfo);
  }

  /** A new password; the user's sessions end at once, in every panel. */
  async setPassword(ref: ConsoleUserRef, password: string, actor: string): Promise<ConsoleUserInfo> {
    const text = newPassword(password);
    const passwordHash = await this.#passwords.hash(text);
    return this.#change(ref, async (tx, user) => {
      const changed = await setConsoleUserPassword(tx, user.id, passwordHash, this.#now());
      const ended = await deleteConsoleSessionsOf(tx, user.id);
      return { result: changed, change: consoleUserPasswordChanged(user, changed, ended, actor) };
    });
  }

  /**
   * A new role; the user's sessions keep going with it from their next request (a session's role is read
   * with it). Refused with `last_admin` when the last admin would become a viewer.
   */
  async setRole(ref: ConsoleUserRef, role: string, actor: string): Promise<ConsoleUserInfo> {
    const next = roleOf(role);
    return this.#change(ref, async (tx, user) => {
      if (user.role === next) return { result: user, change: change({}) };
      if (next !== 'admin') await keepAnAdmin(tx, user);
      const changed = await setConsoleUserRole(tx, user.id, next, this.#now());
      return { result: changed, change: consoleUserRoleChanged(user, changed, actor) };
    });
  }

  /** Removes a user; their sessions end at once, in every panel. Refused with `last_admin` for the last admin. */
  async remove(ref: ConsoleUserRef, actor: string): Promise<ConsoleUserInfo> {
    return this.#change(ref, async (tx, user) => {
      await keepAnAdmin(tx, user);
      const ended = await deleteConsoleSessionsOf(tx, user.id);
      await deleteConsoleUser(tx, user.id);
      return { result: user, change: consoleUserRemoved(user, ended, actor) };
    });
  }

  /** Commits `alter` of the user in one transaction; `not_found` when there is none. */
  async #change(
    ref: ConsoleUserRef,
    alter: (tx: Tx, user: ConsoleUserRow) => Promise<{ result: ConsoleUserRow; change: Change }>,
  ) {
    const row = await this.#changes.commit(async (tx) => {
      const user = await findUser(tx, ref);
      return user === undefined ? { result: undefined, change: change({}) } : await alter(tx, user);
    });
    if (row === undefined) throw consoleUserNotFound(ref);
    return toInfo(row);
  }

  #now(): string {
    return isoAt(this.#clock.nowMs());
  }
}
