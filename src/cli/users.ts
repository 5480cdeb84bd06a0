import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';
import { ADMIN_ACTOR } from '../domain/activity.ts';
import { systemClock } from '../domain/clock.ts';
import { PASSWORD_MIN_CHARS } from '../domain/passwords.ts';
import { storeConfig } from '../main/config.ts';
import { openMigratedStore } from '../main/store.ts';
import { quietPublisher } from '../services/changes.ts';
import { type ConsoleUserInfo, ConsoleUserService } from '../services/console-users.ts';
import { PasswordHasher } from '../services/passwords.ts';
import { table } from './table.ts';
import { parseCommandArgs, UsageError } from './usage.ts';

function userTable(users: ConsoleUserInfo[]): string {
  return table([
    ['ID', 'NAME', 'ROLE', 'CREATED', 'LAST SIGN-IN'],
    ...users.map((u) => [String(u.id), u.name, u.role, u.createdAt, u.lastSignInAt ?? 'never']),
  ]);
}

/** A password on the command line would be in every process list (`ps`) and the shell's history. */
function refusePasswordArgument(args: string[]): void {
  if (args.some((a) => a === '--password' || a.startsWith('--password='))) {
    throw new UsageError('the password is read from standard input (one line), never taken as an argument');
  }
}

/** One line typed at the terminal, not shown: the terminal stops echoing before the prompt asks for it. */
async function typedUnseen(prompt: string): Promise<string> {
  const muted = new Writable({ write: (_chunk, _encoding, done) => done() });
  const lines = createInterface({ input: process.stdin, output: muted, terminal: true });
  process.stderr.write(prompt);
  try {
    const cancelled = once(lines, 'SIGINT').then(() => {
      throw new Error('cancelled');
    });
    const [line] = await Promise.race([once(lines, 'line'), cancelled]);
    return String(line);
  } finally {
    lines.close();
    process.stderr.write('\n');
  }
}

/** The new password: typed twice at a terminal, unseen; else the first line of standard input (a pipe, a file). */
async function readPassword(name: string): Promise<string> {
  if (process.stdin.isTTY) {
    const password = await typedUnseen(`password for ${name} (at least ${PASSWORD_MIN_CHARS} characters): `);
    if ((await typedUnseen('the same again: ')) !== password) throw new UsageError('the two passwords differ');
    return password;
  }
  const lines = createInterface({ input: process.stdin, terminal: false });
  try {
    for await (const line of lines) return line;
  } finally {
    lines.close();
  }
  throw new UsageError('the password is read from standard input (one line), and it was empty');
}

function oneName(action: string, args: string[]): string {
  const { positionals } = parseCommandArgs(args, {});
  const [name] = positionals;
  if (name === undefined || positionals.length !== 1) throw new UsageError(`users ${action} takes one NAME`);
  return name;
}

/** `vpn-panel users add|list|passwd|role|remove`: the people who sign in to the console. */
export async function usersCommand(args: string[]): Promise<number> {
  const [action, ...rest] = args;
  refusePasswordArgument(rest);
  const store = await openMigratedStore(storeConfig(process.env));
  try {
    const users = new ConsoleUserService(
      store.db,
      systemClock,
      new PasswordHasher(),
      quietPublisher(store.db, systemClock),
    );
    switch (action) {
      case 'add': {
        const { values, positionals } = parseCommandArgs(rest, { name: { type: 'string' }, role: { type: 'string' } });
        if (values.name === undefined) throw new UsageError('users add needs --name');
        if (positionals.length > 0) throw new UsageError(`users add takes no argument '${positionals[0] ?? ''}'`);
        const password = await readPassword(values.name);
        // Whoever holds the panel's machine makes the first user, who must be able to do everything.
        const role = values.role ?? 'admin';
        const user = await users.add({ name: values.name, role, password }, ADMIN_ACTOR);
        console.log(`added console user ${user.id} '${user.name}' (${user.role})`);
        return 0;
      }
      case 'list': {
        const { values } = parseCommandArgs(rest, { json: { type: 'boolean' } });
        const list = await users.list();
        console.log(values.json ? JSON.stringify(list, null, 2) : userTable(list));
        return 0;
      }
      case 'passwd': {
        const name = oneName('passwd', rest);
        const user = await users.setPassword(name, await readPassword(name), ADMIN_ACTOR);
        console.log(`changed the password of console user ${user.id} '${user.name}'; their sessions have ended`);
        return 0;
      }
      case 'role': {
        const { positionals } = parseCommandArgs(rest, {});
        const [name, role] = positionals;
        if (name === undefined || role === undefined || positionals.length !== 2)
          throw new UsageError('users role takes NAME and admin or viewer');
        const user = await users.setRole(name, role, ADMIN_ACTOR);
        console.log(`console user ${user.id} '${user.name}' is now ${user.role}`);
        return 0;
      }
      case 'remove': {
        const user = await users.remove(oneName('remove', rest), ADMIN_ACTOR);
        console.log(`removed console user ${user.id} '${user.name}'; their sessions have ended`);
        return 0;
      }
      default:
        throw new UsageError(`unknown users action '${action ?? ''}'`);
    }
  } finally {
    await store.close();
  }
}
