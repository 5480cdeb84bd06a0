import { deviceAddress6, lowestFreeAddress } from '../domain/devices.ts';
import { noFreeAddress } from '../domain/error-cases.ts';
import { intToIp, parseCidr, parseSubnet, size, type Subnet } from '../domain/subnets.ts';
import { bigIntToIpv6, ipv6ToBigInt, parseStoredCidr6, type Subnet6 } from '../domain/subnets6.ts';
import type { Queryable } from '../store/db.ts';
import { listDeviceAddresses } from '../store/devices.ts';
import type { ServerRow } from '../store/servers.ts';

/** A stored dotted IPv4 address as an integer; stored addresses were validated when written. */
function storedIpToInt(address: string): number {
  let n = 0;
  for (const part of address.split('.')) n = n * 256 + Number(part);
  return n;
}

/** A device's place on its server: its IPv4 address and, when the server has a subnet6, its IPv6 address. */
export interface DeviceAddresses {
  address: string;
  address6: string | null;
}

/**
 * What is in use on one server: a bitmap of IPv4 host offsets, the set of IPv6 addresses, and the offset
 * below which every address is taken (so a create looks at the free end only, not at every device).
 */
interface UsedAddresses {
  ipv4: Uint8Array;
  ipv6: Set<bigint>;
  takenBelow: number;
}

/** The server's subnets as the allocator works with them, parsed from its row. */
interface ServerSpace {
  id: number;
  subnet: Subnet;
  serverAddress: number;
  ipv6: { subnet: Subnet6; serverAddress: bigint } | undefined;
}

function spaceOf(server: Pick<ServerRow, 'id' | 'subnet' | 'address' | 'address6'>): ServerSpace {
  const stored6 = server.address6 === null ? undefined : parseStoredCidr6(server.address6);
  return {
    id: server.id,
    subnet: parseSubnet(server.subnet),
    serverAddress: parseCidr(server.address).address,
    ipv6: stored6 && { subnet: stored6.subnet, serverAddress: stored6.address },
  };
}

/**
 * The lowest free addresses of a server without reading every device on each create: the used IPv4 host
 * offsets (a bitmap) and IPv6 addresses (a set) of each server, read from the database once and kept up to
 * date by this process's creates, with the offset below which all are taken, where the next search starts
 * (the lowest free address stays the rule; only the addresses known taken are not looked at again). Any
 * removal in this process makes the server be read again; a create of another panel shows as a unique-index
 * conflict, after which the caller forgets and retries. (An address another panel freed is reused only after
 * this process next reads the server.)
 * Callers hold the server's lock, so what is known of a server is never read and changed at once.
 */
export class AddressAllocator {
  readonly #used = new Map<number, UsedAddresses>();

  /**
   * The lowest free IPv4 address and the IPv6 address that goes with it (deviceAddress6); server_full when
   * either family has none left.
   */
  async claim(
    db: Queryable,
    server: Pick<ServerRow, 'id' | 'name' | 'subnet' | 'address' | 'address6'>,
  ): Promise<DeviceAddresses> {
    const space = spaceOf(server);
    const used = await this.#usedOf(db, space);
    const address = lowestFreeAddress(
      space.subnet,
      space.serverAddress,
      (ip) => used.ipv4[ip - space.subnet.network] === 1,
      space.subnet.network + used.takenBelow,
    );
    if (address === undefined) throw noFreeAddress(server.name, 'ipv4');
    // Every address below the lowest free one is taken (the server's own counts as taken too).
    used.takenBelow = address - space.subnet.network;
    if (space.ipv6 === undefined) return { address: intToIp(address), address6: null };
    const address6 = deviceAddress6(
      { address, subnet: space.subnet },
      space.ipv6.subnet,
      space.ipv6.serverAddress,
      (ip) => used.ipv6.has(ip),
    );
    if (address6 === undefined) throw noFreeAddress(server.name, 'ipv6');
    return { address: intToIp(address), address6: bigIntToIpv6(address6) };
  }

  /** Records addresses this process has just given out (after its insert succeeded). */
  taken(server: Pick<ServerRow, 'id' | 'subnet'>, addresses: DeviceAddresses): void {
    const used = this.#used.get(server.id);
    if (used === undefined) return;
    used.ipv4[storedIpToInt(addresses.address) - parseSubnet(server.subnet).network] = 1;
    const address6 = addresses.address6 === null ? undefined : ipv6ToBigInt(addresses.address6);
    if (address6 !== undefined) used.ipv6.add(address6);
  }

  /** Drops what is known of the server: an address was freed, or another panel took one. */
  forget(serverId: number): void {
    this.#used.delete(serverId);
  }

  async #usedOf(db: Queryable, space: ServerSpace): Promise<UsedAddresses> {
    let used = this.#used.get(space.id);
    if (used === undefined) {
      used = { ipv4: new Uint8Array(size(space.subnet)), ipv6: new Set(), takenBelow: 1 };
      for (const { address, address6 } of await listDeviceAddresses(db, space.id)) {
        const offset = storedIpToInt(address) - space.subnet.network;
        if (offset >= 0 && offset < used.ipv4.length) used.ipv4[offset] = 1;
        const ip6 = address6 === null ? undefined : ipv6ToBigInt(address6);
        if (ip6 !== undefined) used.ipv6.add(ip6);
      }
      this.#used.set(space.id, used);
    }
    return used;
  }
}
