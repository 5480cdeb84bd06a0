import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { createRequire } from 'node:module';
import maxmind, { type CountryResponse, type Reader } from 'maxmind';

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

/** The offline geo-whois-asn-country database (CC0) from the npm registry; no network lookups. */
export class MmdbCountryLookup implements CountryLookup {
  readonly #reader: Reader<CountryResponse>;

  private constructor(reader: Reader<CountryResponse>) {
    this.#reader = reader;
  }

  static async open(): Promise<MmdbCountryLookup> {
    const file = createRequire(import.meta.url).resolve(
      '@ip-location-db/geo-whois-asn-country-mmdb/geo-whois-asn-country.mmdb',
    );
    return new MmdbCountryLookup(await maxmind.open<CountryResponse>(file));
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
    return countryCodeOf(this.#reader.get(ip));
  }
}

function rejectAfter(ms: number): Promise<never> {
  return new Promise((_, reject) => setTimeout(() => reject(new Error('timed out')), ms).unref());
}
