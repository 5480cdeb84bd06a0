import { lookup } from 'node:dns/promises';
import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { createRequire } from 'node:module';
import { type CountryResponse, Reader } from 'maxmind';

/** Guesses the ISO country of a host from its IP address. */
export interface CountryLookup {
  countryOf(host: string): Promise<string | undefined>;
}

/** geo-whois-asn-country records are `{country_code}`, not the GeoIP2 shape the reader's types name. */
function countryCodeOf(record: unknown): string | undefined {
  if (typeof record !== 'object' || record === null || !('country_code' in record)) return undefined;
  return typeof record.country_code === 'string' ? record.country_code : undefined;
}

const RESOLVE_TIMEOUT_MS = 2_000;

/**
 * The offline geo-whois-asn-country database (CC0) from the npm registry; no network lookups. The file (8 MB) is
 * read at each lookup, made when a server is created without a country: held open, its buffer would stay in the
 * panel's memory for a lookup that comes seldom.
 */
export class MmdbCountryLookup {
  readonly #file: string;

  private constructor(file: string) {
    this.#file = file;
  }

  /** Checks once that the database reads, so a broken installation stops the start, not a server's creation. */
  static async open(): Promise<MmdbCountryLookup> {
    const file = createRequire(import.meta.url).resolve(
      '@ip-location-db/geo-whois-asn-country-mmdb/geo-whois-asn-country.mmdb',
    );
    await MmdbCountryLookup.#read(file);
    return new MmdbCountryLookup(file);
  }

  static async #read(file: string): Promise<Reader<CountryResponse>> {
    return new Reader<CountryResponse>(await readFile(file));
  }

  async countryOf(host: string): Promise<string | undefined> {
    let ip = host;
    if (isIP(host) === 0) {
      try {
        ip = (await Promise.race([lookup(host), rejectAfter(RESOLVE_TIMEOUT_MS)])).address;
      } catch {
        return undefined;
      }
    }
    return countryCodeOf((await MmdbCountryLookup.#read(this.#file)).get(ip));
  }
}

function rejectAfter(ms: number): Promise<never> {
  return new Promise((_, reject) => setTimeout(() => reject(new Error('timed out')), ms).unref());
}
