import { lowestFreeAddress } from '../domain/devices.ts';
import { type Subnet, size } from '../domain/subnets.ts';
import type { Queryable } from '../store/db.ts';
import { listDeviceAddresses } from '../store/devices.ts';

/** A stored dotted IPv4 address as an integer; stored addresses were validated when written. */
function storedIpToInt(address: string): number {
  let n = 0;
  for (const part of address.split('.')) n = n * 256 + Number(part);
  return n;
}

/**
 * The lowest free address of a server without reading every device on each create: a bitmap of the
 * used host offsets of each server, read from the database once and kept up to date by this
 * process's creates. Any removal in this process makes the server's bitmap be read again; a create of
 * another panel shows as a unique-index conflict, after which the caller forgets and retries. (An
 * address another panel freed is reused only after this process next reads the server.)
 * Callers hold the server's lock, so a bitmap is never read and changed at once.
 */
export class AddressAllocator {
  readonly #used = new Map<number, Uint8Array>();

  /** The lowest free address, or undefined when the subnet is full. */
  async lowestFree(
    db: Queryable,
    serverId: number,
    subnet: Subnet,
    serverAddress: number,
  ): Promise<number | undefined> {
    const used = await this.#bitmap(db, serverId, subnet);
    return lowestFreeAddress(subnet, serverAddress, (address) => used[address - subnet.network] === 1);
  }

  /** Records an address this process has just given out (after its insert succeeded). */
  taken(serverId: number, subnet: Subnet, address: number): void {
    const used = this.#used.get(serverId);
    if (used) used[address - subnet.network] = 1;
  }

  /** Drops what is known of the server: an address was freed, or another panel took one. */
  forget(serverId: number): void {
    this.#used.delete(serverId);
  }

  async #bitmap(db: Queryable, serverId: number, subnet: Subnet): Promise<Uint8Array> {
    let used = this.#used.get(serverId);
    if (used === undefined) {
      used = new Uint8Array(size(subnet));
      for (const address of await listDeviceAddresses(db, serverId)) {
        const offset = storedIpToInt(address) - subnet.network;
        if (offset >= 0 && offset < used.length) used[offset] = 1;
      }
      this.#used.set(serverId, used);
    }
    return used;
  }
}
