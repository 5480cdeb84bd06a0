import { type Clock, isoAt } from '../domain/clock.ts';
import { type ConsoleRole, consoleUserName, isConsoleRole } from '../domain/console-users.ts';
import { AppError } from '../domain/errors.ts';
import { newPassword } from '../domain/passwords.ts';
import { isUniqueViolation } from '../store/constraint-violations.ts';
import { deleteConsoleSessionsOf } from '../store/console-sessions.ts';
import {
  type ConsoleUserRow,
  deleteConsoleUser,
  findConsoleUserByName,
  insertConsoleUser,
  listConsoleUsers,
  setConsoleUserPassword,
} from '../store/console-users.ts';
import { type Db, type Tx, write } from '../store/db.ts';
import { recordActivity } from './activity.ts';
import { notifyChange } from './notifications.ts';
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
  /** `admin` (the default: the first user must be one) or `viewer`. */
  role?: string;
  password: string;
}

function toInfo(row: ConsoleUserRow): ConsoleUserInfo {
  return { id: row.id, name: row.name, role: row.role, createdAt: row.created_at, lastSignInAt: row.last_sign_in_at };
}

function nameTaken(name: string): AppError {
  return new AppError('name_taken', `a console user named ${name} exists already (names ignore case)`, {
    name: 'taken',
  });
}

/** The people who may sign in to the console: made, listed, given a new password and removed by the CLI. */
export class ConsoleUserService {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #passwords: PasswordHasher;

  constructor(db: Db, clock: Clock, passwords: PasswordHasher) {
    this.#db = db;
    this.#clock = clock;
    this.#passwords = passwords;
  }

  async add(input: AddConsoleUserInput, actor: string): Promise<ConsoleUserInfo> {
    const name = consoleUserName(input.name);
    const role = input.role ?? 'admin';
    if (!isConsoleRole(role)) {
      throw new AppError('validation_failed', `a console user's role is admin or viewer (got '${role}')`, {
        role: 'admin or viewer',
      });
    }
    const password = newPassword(input.password);
    if (await findConsoleUserByName(this.#db, name)) throw nameTaken(name);
    // Hashed before the transaction: a write lock is never held for the hash's ~200 ms.
    const passwordHash = await this.#passwords.hash(password);
    const row = await write(this.#db, async (tx) => {
      const created = await insertConsoleUser(tx, { name, role, passwordHash, createdAt: this.#now() });
      await recordActivity(tx, this.#clock, {
        resource: 'console_user',
        resourceId: created.id,
        verb: 'created',
        summary: `console user ${name} (${role}) created`,
        actor,
        before: null,
        after: created,
      });
      await notifyChange(tx, this.#clock, {
        headline: `Console user ${name} created`,
        details: [`Role: ${role}.`],
        actor,
      });
      return created;
    }).catch((error: unknown) => {
      // Another process added the same name since the check above.
      throw isUniqueViolation(error) ? nameTaken(name) : error;
    });
    return toInfo(row);
  }

  async list(): Promise<ConsoleUserInfo[]> {
    return (await listConsoleUsers(this.#db)).map(toInfo);
  }

  /** A new password; the user's sessions end at once, in every panel. */
  async setPassword(name: string, password: string, actor: string): Promise<ConsoleUserInfo> {
    const text = newPassword(password);
    const passwordHash = await this.#passwords.hash(text);
    return this.#change(name, async (tx, user) => {
      const changed = await setConsoleUserPassword(tx, user.id, passwordHash, this.#now());
      const ended = await deleteConsoleSessionsOf(tx, user.id);
      await recordActivity(tx, this.#clock, {
        resource: 'console_user',
        resourceId: user.id,
        verb: 'password_changed',
        summary: `console user ${user.name}: password changed, ${ended} session(s) ended`,
        actor,
        before: user,
        after: changed,
      });
      await notifyChange(tx, this.#clock, {
        headline: `Password of console user ${user.name} changed`,
        details: [`Sessions ended: ${ended}.`],
        actor,
      });
      return changed;
    });
  }

  /** Removes a user; their sessions end at once, in every panel. */
  async remove(name: string, actor: string): Promise<ConsoleUserInfo> {
    return this.#change(name, async (tx, user) => {
      const ended = await deleteConsoleSessionsOf(tx, user.id);
      await deleteConsoleUser(tx, user.id);
      await recordActivity(tx, this.#clock, {
        resource: 'console_user',
        resourceId: user.id,
        verb: 'deleted',
        summary: `console user ${user.name} removed, ${ended} session(s) ended`,
        actor,
        before: user,
        after: null,
      });
      await notifyChange(tx, this.#clock, {
        headline: `Console user ${user.name} removed`,
        details: [`Sessions ended: ${ended}.`],
        actor,
      });
      return user;
    });
  }

  /** Runs `change` on the named user in one transaction; `not_found` when there is none. */
  async #change(name: string, change: (tx: Tx, user: ConsoleUserRow) => Promise<ConsoleUserRow>) {
    const row = await write(this.#db, async (tx) => {
      const user = await findConsoleUserByName(tx, name);
      return user && (await change(tx, user));
    });
    if (row === undefined) throw new AppError('not_found', `no console user named ${name}`);
    return toInfo(row);
  }

  #now(): string {
    return isoAt(this.#clock.nowMs());
  }
}
