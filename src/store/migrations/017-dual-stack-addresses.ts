import { type Kysely, sql } from 'kysely';
import { deviceAddress6 } from '../../domain/devices.ts';
import { ipToInt, parseSubnet } from '../../domain/subnets.ts';
import {
  bigIntToIpv6,
  DEFAULT_PREFIX6,
  firstFreeSubnet6,
  formatSubnet6,
  type Subnet6,
  serverAddress6Of,
} from '../../domain/subnets6.ts';
import { panelUlaPrefix } from '../panel-settings.ts';
import type { Database } from '../schema.ts';

/** The schema's tables as `withTables` takes them (an interface has no index signature). */
type Tables = { [Table in keyof Database]: Database[Table] };

/** Devices updated per statement: two bound values each, far below either database's limit. */
const BATCH_ROWS = 500;

/**
 * Dual stack (issue 15): every server gets a subnet6 and an address6, every device an address6, and the
 * server the node's report of what it does with them (`ipv6`, `off` until it reports). The panel's ULA /48 is
 * picked here when there are servers (panel_settings; else at the first server's creation); each server,
 * oldest first, takes its next /64 and its first address there, and each device the address the panel gives
 * a new device now (deviceAddress6: the one that reads like its IPv4 address), so migrated and new addresses
 * follow one rule. The nodes get them at the panel's start-up resync.
 * A backup made before this migration is restored at its own level and then migrated, so it gets them too.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('servers').addColumn('address6', 'text').execute();
  await db.schema.alterTable('servers').addColumn('subnet6', 'text').execute();
  await db.schema
    .alterTable('servers')
    .addColumn('ipv6', 'text', (c) => c.notNull().defaultTo('off'))
    .execute();
  await db.schema.alterTable('devices').addColumn('address6', 'text').execute();
  const typed = db.withTables<Tables>();
  const servers = await typed.selectFrom('servers').select(['id', 'subnet']).orderBy('id').execute();
  // The prefix is asked for only when there is a server: an empty database stays empty, so a backup can be
  // restored into it.
  if (servers.length > 0) await addressServers(typed, await panelUlaPrefix(typed), servers);
  await db.schema.createIndex('servers_subnet6').on('servers').column('subnet6').unique().execute();
  await db.schema
    .createIndex('devices_server_address6')
    .on('devices')
    .columns(['server_id', 'address6'])
    .unique()
    .execute();
}

/** Gives each server (oldest first) the next /64 of `pool`, and each of its devices an address6 there. */
async function addressServers(
  db: Kysely<Tables>,
  pool: Subnet6,
  servers: readonly { id: number; subnet: string }[],
): Promise<void> {
  const taken: Subnet6[] = [];
  for (const server of servers) {
    const subnet6 = firstFreeSubnet6(pool, DEFAULT_PREFIX6, taken);
    if (subnet6 === undefined) throw new Error(`more servers than /64s in ${formatSubnet6(pool)}`);
    taken.push(subnet6);
    const serverAddress6 = serverAddress6Of(subnet6);
    await db
      .updateTable('servers')
      .set({ subnet6: formatSubnet6(subnet6), address6: `${bigIntToIpv6(serverAddress6)}/${subnet6.prefix}` })
      .where('id', '=', server.id)
      .execute();
    const subnet = parseSubnet(server.subnet);
    const devices = await db
      .selectFrom('devices')
      .select(['id', 'address'])
      .where('server_id', '=', server.id)
      .orderBy('id')
      .execute();
    const used = new Set<bigint>();
    const assigned: { id: number; address6: string }[] = [];
    for (const device of devices) {
      const address = ipToInt(device.address);
      const address6 = deviceAddress6({ address, subnet }, subnet6, serverAddress6, (a) => used.has(a));
      if (address6 === undefined) throw new Error(`no IPv6 address left for device ${device.id}`);
      used.add(address6);
      assigned.push({ id: device.id, address6: bigIntToIpv6(address6) });
    }
    for (let i = 0; i < assigned.length; i += BATCH_ROWS) {
      const batch = assigned.slice(i, i + BATCH_ROWS);
      const cases = sql.join(
        batch.map((d) => sql`when ${d.id} then ${d.address6}`),
        sql` `,
      );
      await sql`update devices set address6 = case id ${cases} end
        where id in (${sql.join(batch.map((d) => d.id))})`.execute(db);
    }
  }
}
