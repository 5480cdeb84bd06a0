import { randomBytes } from 'node:crypto';
import { formatSubnet6, parseNetwork6, type Subnet6, ulaPrefixOf } from '../domain/subnets6.ts';
import type { Queryable } from './db.ts';

/** The panel_settings key of the panel's ULA /48, the pool of default server subnet6s. */
export const ULA_PREFIX_KEY = 'ipv6_ula_prefix';

/**
 * The panel's ULA /48 (RFC 4193): picked at random the first time it is asked for (migration 017 asks), then
 * kept in panel_settings, so it is in every backup and the same for every panel on one database. Two panels
 * asking at once keep the first one written.
 */
export async function panelUlaPrefix(db: Queryable): Promise<Subnet6> {
  const stored = async () =>
    (await db.selectFrom('panel_settings').select('value').where('key', '=', ULA_PREFIX_KEY).executeTakeFirst())?.value;
  let value = await stored();
  if (value === undefined) {
    await db
      .insertInto('panel_settings')
      .values({ key: ULA_PREFIX_KEY, value: formatSubnet6(ulaPrefixOf(randomBytes(5))) })
      .onConflict((oc) => oc.column('key').doNothing())
      .execute();
    value = await stored();
  }
  if (value === undefined) throw new Error(`panel_settings holds no ${ULA_PREFIX_KEY} after writing it`);
  return parseNetwork6(value);
}
