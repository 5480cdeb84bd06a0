import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { nameKey } from '../domain/console-users.ts';
import { AppError } from '../domain/errors.ts';
import { addressBucket, networkBucket } from '../domain/rate-limit.ts';
import type { SignInBudget } from '../services/metrics.ts';
import { cookieValues, setCookieValue } from './cookies.ts';
import type { RateLimiter } from './rate-limiter.ts';
import type { RefusedSubject, SignInRefusals } from './sign-in-refusals.ts';

/** The cookie of a browser that signed in before: its known-device token (src/domain/known-devices.ts). */
export const DEVICE_COOKIE = 'vpn_panel_device';
/** A browser stays known this long after its last sign-in (each sign-in sets the cookie again). */
const DEVICE_COOKIE_MAX_AGE_SECONDS = 365 * 24 * 60 * 60;

/** The budgets of console sign-in attempts (src/domain/rate-limit.ts), and whom their refusals are told. */
export interface SignInLimiters {
  /** Per client address (IPv6: its /64), whatever the name: SIGN_IN_ADDRESS_RATE. */
  perAddress: RateLimiter;
  /** Per IPv6 /48, besides its /64: SIGN_IN_NETWORK_RATE. */
  perNetwork: RateLimiter;
  /** Per user name and address, or name and known browser: SIGN_IN_USER_RATE; a success there gives it back. */
  perUserFrom: RateLimiter;
  /** Per user name from anywhere, for browsers not known for it: SIGN_IN_NAME_RATE. */
  perUser: RateLimiter;
  refusals: SignInRefusals;
}

/** What `admit` let through: the budget a success gives back, and the browser's id when it is known. */
export interface SignInAdmission {
  ownBudget: string;
  deviceId: string | undefined;
}

/** The budgets a limiter keeps (the hash queue is the hasher's). */
type RateBudget = Exclude<SignInBudget, 'hash_queue'>;

/** The id of a browser whose known-device token proves an earlier sign-in as `name`; else undefined. */
export type KnownDevice = (name: string, token: string) => Promise<string | undefined>;

/** The value of one cookie of the request's Cookie header (the first of that name); undefined without it. */
export function cookieOf(request: FastifyRequest, name: string): string | undefined {
  return cookieValues(request.headers.cookie, name)[0];
}

/** The `Set-Cookie` value of a known-device token, sent back only to the sign-in (its Path). */
export function deviceCookie(token: string, secure: boolean): string {
  return setCookieValue(DEVICE_COOKIE, token, {
    path: '/console/session',
    maxAgeSeconds: DEVICE_COOKIE_MAX_AGE_SECONDS,
    secure,
  });
}

/** The limiters' id of a user name: a digest, as a name that is typed may be anything up to 256 characters. */
function nameDigest(name: string): string {
  return createHash('sha256').update(nameKey(name)).digest('hex').slice(0, 16);
}

/**
 * Admits console sign-in attempts, before any password is hashed, so that someone who does not know a
 * user's password cannot hold back the one who does:
 * - a browser known for the name (it signed in as that user before, and their password is the same since)
 *   spends only its own budget for the name; guessers elsewhere cannot touch it;
 * - any other attempt spends its address's budget (and its IPv6 /48's), its budget for the name from that
 *   address, and the name's budget from anywhere, high enough that one address never spends it.
 * A success gives back the budget for the name from that browser or address.
 */
export class SignInGate {
  readonly #limiters: SignInLimiters;
  readonly #knownDevice: KnownDevice;
  readonly #byBudget: Record<RateBudget, RateLimiter>;

  constructor(limiters: SignInLimiters, knownDevice: KnownDevice) {
    this.#limiters = limiters;
    this.#knownDevice = knownDevice;
    const { perAddress, perNetwork, perUserFrom, perUser } = limiters;
    this.#byBudget = {
      address: perAddress,
      network: perNetwork,
      name_address: perUserFrom,
      name_device: perUserFrom,
      name: perUser,
    };
  }

  /** Spends the attempt's budgets, or refuses it with `rate_limited` and a `Retry-After`. */
  async admit(name: string, ip: string, deviceToken: string | undefined): Promise<SignInAdmission> {
    const user = nameDigest(name);
    const deviceId = deviceToken === undefined ? undefined : await this.#knownDevice(name, deviceToken);
    if (deviceId !== undefined) {
      const ownBudget = `sign-in:name:${user}:device:${deviceId}`;
      await this.#take('name_device', ownBudget, { user }, 'for this user name from this browser');
      return { ownBudget, deviceId };
    }
    const address = addressBucket(ip);
    await this.#take('address', `sign-in:address:${address}`, { address }, 'from this address');
    const network = networkBucket(ip);
    if (network !== undefined) {
      await this.#take('network', `sign-in:network:${network}`, { address: network }, 'from this network');
    }
    const ownBudget = `sign-in:name:${user}:address:${address}`;
    await this.#take('name_address', ownBudget, { user, address }, 'for this user name from this address');
    const elsewhere = 'for this user name from browsers that have not signed in as this user before';
    await this.#take('name', `sign-in:name:${user}`, { user }, elsewhere);
    return { ownBudget, deviceId };
  }

  /** The attempt signed in: its budget for the name from its browser or address is whole again. */
  async succeeded(admission: SignInAdmission): Promise<void> {
    await this.#limiters.perUserFrom.reset(admission.ownBudget);
  }

  async #take(budget: RateBudget, id: string, subject: RefusedSubject, whose: string): Promise<void> {
    const decision = await this.#byBudget[budget].take(id);
    if (decision.allowed) return;
    this.#limiters.refusals.refused(budget, subject, decision.retryAfterSeconds);
    const message = `too many sign-in attempts ${whose}; try again in ${decision.retryAfterSeconds} s`;
    throw new AppError('rate_limited', message, {}, decision.retryAfterSeconds);
  }
}
