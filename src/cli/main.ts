import { AppError, messageOf } from '../domain/errors.ts';
import { ConfigError } from '../main/config.ts';
import { UsageError } from './usage.ts';

const USAGE = `usage: vpn-panel <command>

  serve                                   run the panel (and its local node)
  node                                    run the node agent alone on a VPN host
  nodes add --name N --url https://host:7000 --cert-sha256 FP [--token-file F] [--public-host H]
                                          register a node agent; its token comes from stdin (one line)
                                          or --token-file (--token T also works, but ps shows it)
  nodes list [--json] | nodes remove NAME|ID
  keys create --name N --scopes a,b|all [--no-rate-limit]
                                          make an API key; the key is the last line of output
  keys list [--json]                      list keys (never the key itself)
  keys revoke NAME|ID                     stop a key at once
  users add --name N [--role admin|viewer]
                                          add a console user (default role admin); the password comes
                                          from stdin (one line, at least 12 characters), never an argument
  users list [--json] | users passwd NAME | users remove NAME
                                          list console users · new password (stdin) · remove; passwd and
                                          remove end the user's sessions at once
  users role NAME admin|viewer            change a user's role; the last admin stays one
  activity [--actor A] [--resource R [--id ID]] [--since ISO] [--after ID] [--limit N] [--json]
                                          the activity log, oldest first: who changed what
  backup FILE                             a consistent snapshot of the whole state, while panels run
  restore FILE [--replace]                load a backup into an empty database (--replace: overwrite one)

Configuration comes from the environment; see docs/configuration.md.`;

/**
 * Each command's module is loaded when it runs, so a command loads only what it uses: `node` (the agent
 * on a VPN host) never loads the panel, its store or its database drivers (test/architecture/imports.test.ts).
 */
async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'serve':
      return (await import('./serve.ts')).serveCommand(rest);
    case 'node':
      return (await import('./node.ts')).nodeCommand(rest);
    case 'nodes':
      return (await import('./nodes.ts')).nodesCommand(rest);
    case 'keys':
      return (await import('./keys.ts')).keysCommand(rest);
    case 'users':
      return (await import('./users.ts')).usersCommand(rest);
    case 'activity':
      return (await import('./activity.ts')).activityCommand(rest);
    case 'backup':
      return (await import('./backup.ts')).backupCommand(rest);
    case 'restore':
      return (await import('./backup.ts')).restoreCommand(rest);
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      console.log(USAGE);
      return command === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown command '${command}'`);
  }
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (error) {
  if (error instanceof UsageError) {
    console.error(`vpn-panel: ${error.message}\n\n${USAGE}`);
    process.exitCode = 2;
  } else if (error instanceof AppError || error instanceof ConfigError) {
    console.error(`vpn-panel: ${error.message}`);
    process.exitCode = 1;
  } else {
    console.error(`vpn-panel: ${messageOf(error)}`);
    process.exitCode = 1;
  }
}
