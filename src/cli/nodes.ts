import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { ADMIN_ACTOR } from '../domain/activity.ts';
import { systemClock } from '../domain/clock.ts';
import { storeConfig } from '../main/config.ts';
import { openMigratedStore } from '../main/store.ts';
import { quietPublisher } from '../services/changes.ts';
import { type NodeAdminView, NodeService } from '../services/nodes.ts';
import { parseCommandArgs, UsageError } from './usage.ts';

/** `vpn-panel nodes add|list|remove`: registers remote agents; a running panel picks them up on its next heartbeat. */
export async function nodesCommand(args: string[]): Promise<number> {
  const [action, ...rest] = args;
  const store = await openMigratedStore(storeConfig(process.env));
  try {
    const nodes = new NodeService(store.db, systemClock, quietPublisher(store.db, systemClock));
    switch (action) {
      case 'add': {
        const { values } = parseCommandArgs(rest, {
          name: { type: 'string' },
          url: { type: 'string' },
          token: { type: 'string' },
          'token-file': { type: 'string' },
          'cert-sha256': { type: 'string' },
          'public-host': { type: 'string' },
        });
        const { name, url } = values;
        if (name === undefined || url === undefined) throw new UsageError('nodes add needs --name and --url');
        const token = await nodeToken(values.token, values['token-file']);
        const input = { name, url, token, publicHost: values['public-host'], certSha256: values['cert-sha256'] };
        const node = await nodes.add(input, ADMIN_ACTOR);
        const pinned = node.cert_sha256 === null ? '' : ` (certificate sha256 ${node.cert_sha256})`;
        console.log(
          `added node ${node.id} '${node.name}' at ${node.url ?? ''}${pinned}; clients reach it at ${node.public_host}`,
        );
        return 0;
      }
      case 'list': {
        const { values } = parseCommandArgs(rest, { json: { type: 'boolean' } });
        const list = await nodes.listForAdmin();
        if (values.json) console.log(JSON.stringify(list, null, 2));
        else for (const n of list) console.log(nodeLine(n));
        return 0;
      }
      case 'remove': {
        const { positionals } = parseCommandArgs(rest, {});
        const [target] = positionals;
        if (target === undefined || positionals.length !== 1) throw new UsageError('nodes remove takes one NAME or ID');
        const node = await nodes.remove(target, ADMIN_ACTOR);
        console.log(`removed node ${node.id} '${node.name}'`);
        return 0;
      }
      default:
        throw new UsageError(`unknown nodes action '${action ?? ''}'`);
    }
  } finally {
    await store.close();
  }
}

function nodeLine(n: NodeAdminView): string {
  const pin = n.cert_sha256 === null ? '' : `\tpinned ${n.cert_sha256}`;
  const error = n.last_error === null ? '' : `\terror: ${n.last_error}`;
  const seen = `last seen ${n.last_seen_at ?? 'never'}`;
  const fields = [n.id, n.name, n.status, n.public_host, n.driver ?? '-', `servers=${n.server_count}`, seen];
  return `${fields.join('\t')}${pin}${error}`;
}

/**
 * The node's token: `--token` (visible to `ps`), the first line of `--token-file`, or else the first
 * line of standard input, so it appears in no process list.
 */
async function nodeToken(token: string | undefined, tokenFile: string | undefined): Promise<string> {
  if (token !== undefined && tokenFile !== undefined) throw new UsageError('nodes add takes --token or --token-file');
  if (token !== undefined) return token;
  if (tokenFile !== undefined) return (await readFile(tokenFile, 'utf8')).split('\n')[0]?.trim() ?? '';
  if (process.stdin.isTTY) process.stderr.write("the node's AGENT_TOKEN: ");
  const lines = createInterface({ input: process.stdin, terminal: false });
  try {
    for await (const line of lines) return line.trim();
  } finally {
    lines.close();
  }
  throw new UsageError('nodes add reads the token from standard input (one line), or give --token-file F');
}
