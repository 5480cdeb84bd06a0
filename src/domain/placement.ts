import { serverRoom } from './devices.ts';
import { noServerAvailable } from './error-cases.ts';
import type { ServerStatus } from './servers.ts';
import { parseSubnet } from './subnets.ts';

/** What placing a device reads of a server. */
export interface PlacementServer {
  id: number;
  status: ServerStatus;
  /** ISO 3166-1 alpha-2, stored upper case. */
  country: string;
  city: string;
  capacity: number;
  subnet: string;
  /** How many devices it holds now. */
  device_count: number;
}

/** What `server_id: auto` asks for. */
export interface PlacementRequest {
  /** ISO code, any case. */
  country?: string;
  /** Any case. */
  city?: string;
  /** The server a moved device is on: never picked (docs/api.md "Changing, moving and deleting"). */
  current?: number;
}

/**
 * `server_id: auto` (docs/api.md "Creating a device", docs/decisions.md "Automatic placement"): the running
 * server with the fewest devices that still has room (its capacity, within its subnet), narrowed by country
 * and city; on a tie the oldest (lowest id). None is `no_server_available`.
 */
export function pickServer<S extends PlacementServer>(servers: readonly S[], request: PlacementRequest): S {
  const { country, city, current } = request;
  const devicesOn = (server: S) => server.device_count;
  const candidates = servers.filter(
    (s) =>
      s.status === 'running' &&
      s.id !== current &&
      (country === undefined || s.country === country.toUpperCase()) &&
      (city === undefined || s.city.toLowerCase() === city.toLowerCase()) &&
      devicesOn(s) < serverRoom(s.capacity, parseSubnet(s.subnet)),
  );
  candidates.sort((a, b) => devicesOn(a) - devicesOn(b) || a.id - b.id);
  const [best] = candidates;
  if (!best) throw noServerAvailable();
  return best;
}
