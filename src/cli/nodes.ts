import { ADMIN_ACTOR } from '../domain/activity.ts';
import { systemClock } from '../domain/clock.ts';
import { storeConfig } from '../main/config.ts';
import { openMigratedStore } from '../main/panel.ts';
import { NodeService } from '../services/nodes.ts';
import { parseCommandArgs, UsageError } from './usage.ts';

/** `vpn-panel nodes add|list|remove`: registers remote agents; a running panel picks them up on its next heartbeat. */
export async function nodesCommand(args: string[]): Promise<number> {
  const [action, ...rest] = args;
  const store = await openMigratedStore(storeConfig(process.env));
  try {
    const nodes = new NodeService(store.db, systemClock);
    switch (action) {
      case 'add': {
        const { values } = parseCommandArgs(rest, {
          name: { type: 'string' },
          url: { type: 'string' },
          token: { type: 'string' },
          'public-host': { type: 'string' },
        });
        if (values.name === undefined || values.url === undefined || values.token === undefined) {
          throw new UsageError('nodes add needs --name, --url and --token');
        }
        const node = await nodes.add({ name: values.name, url: values.url, token: values.token, publicHost: values['public-host'] }, ADMIN_ACTOR);
        console.log(`added node ${node.id} '${node.name}' at ${node.url ?? ''}; clients reach it at ${node.public_host}`);
        return 0;
      }
      case 'list': {
        const { values } = parseCommandArgs(rest, { json: { type: 'boolean' } });
        const list = await nodes.list();
        if (values.json) console.log(JSON.stringify(list, null, 2));
        else for (const n of list) console.log(`${n.id}\t${n.name}\t${n.status}\t${n.public_host}\t${n.driver ?? '-'}\tservers=${n.server_count}\tlast seen ${n.last_seen_at ?? 'never'}`);
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
