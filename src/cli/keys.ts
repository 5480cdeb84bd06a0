import { storeConfig } from '../main/config.ts';
import { openMigratedStore } from '../main/store.ts';
import { ADMIN_ACTOR } from '../domain/activity.ts';
import { systemClock } from '../domain/clock.ts';
import { type ApiKeyInfo, ApiKeyService } from '../services/api-keys.ts';
import { quietPublisher } from '../services/changes.ts';
import { table } from './table.ts';
import { parseCommandArgs, UsageError } from './usage.ts';

function keyTable(keys: ApiKeyInfo[]): string {
  return table([
    ['ID', 'NAME', 'SCOPES', 'CREATED', 'LAST USED', 'STATE'],
    ...keys.map((k) => [
      String(k.id),
      k.name,
      k.scopes.join(','),
      k.createdAt,
      k.lastUsedAt ?? 'never',
      k.revokedAt === null ? (k.rateLimitExempt ? 'live (no rate limit)' : 'live') : `revoked ${k.revokedAt}`,
    ]),
  ]);
}

export async function keysCommand(args: string[]): Promise<number> {
  const [action, ...rest] = args;
  const store = await openMigratedStore(storeConfig(process.env));
  try {
    const keys = new ApiKeyService(store, systemClock, quietPublisher(store.db, systemClock));
    switch (action) {
      case 'create': {
        const { values } = parseCommandArgs(rest, {
          name: { type: 'string' },
          scopes: { type: 'string' },
          'no-rate-limit': { type: 'boolean' },
        });
        if (values.name === undefined || values.scopes === undefined)
          throw new UsageError('keys create needs --name and --scopes');
        const { key, info } = await keys.create(
          { name: values.name, scopes: values.scopes, rateLimitExempt: values['no-rate-limit'] ?? false },
          ADMIN_ACTOR,
        );
        console.log(
          `created API key ${info.id} '${info.name}' with scopes ${info.scopes.join(',')}; it is shown only now:`,
        );
        console.log(key);
        return 0;
      }
      case 'list': {
        const { values } = parseCommandArgs(rest, { json: { type: 'boolean' } });
        const list = await keys.list();
        console.log(values.json ? JSON.stringify(list, null, 2) : keyTable(list));
        return 0;
      }
      case 'revoke': {
        const { positionals } = parseCommandArgs(rest, {});
        const [target] = positionals;
        if (target === undefined || positionals.length !== 1) throw new UsageError('keys revoke takes one NAME or ID');
        const info = await keys.revoke(target, ADMIN_ACTOR);
        console.log(`revoked API key ${info.id} '${info.name}'`);
        return 0;
      }
      default:
        throw new UsageError(`unknown keys action '${action ?? ''}'`);
    }
  } finally {
    await store.close();
  }
}
