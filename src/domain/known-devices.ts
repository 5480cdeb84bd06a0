import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { nameKey } from './console-users.ts';

/**
 * A browser that signed in as a console user gets a known-device token: a random id and a MAC of the id
 * and the user's name, keyed with the user's password hash. Only the panel can make one (the hash never
 * leaves the database), a new password forgets every device of the user, and nothing is stored for it.
 * It proves an earlier success from that browser, which sign-in budgets and the hash queue favour; it is
 * not a credential: the password is still checked.
 */
const DEVICE_ID_BYTES = 16;
const TOKEN_SHAPE = /^([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/;
const PURPOSE = 'vpn-panel known device v1';

function proofOf(passwordHash: string, name: string, deviceId: string): Buffer {
  return createHmac('sha256', passwordHash)
    .update(`${PURPOSE}\0${nameKey(name)}\0${deviceId}`)
    .digest();
}

/** The token of a browser that signed in as `name`, whose stored hash is `passwordHash`; a new device without an id. */
export function knownDeviceToken(passwordHash: string, name: string, deviceId?: string): string {
  const id = deviceId ?? randomBytes(DEVICE_ID_BYTES).toString('base64url');
  return `${id}.${proofOf(passwordHash, name, id).toString('base64url')}`;
}

/** The id of the device a token names, when it was made for this name and password hash; else undefined. */
export function knownDeviceId(token: string, passwordHash: string, name: string): string | undefined {
  const [, id, proof] = TOKEN_SHAPE.exec(token) ?? [];
  if (id === undefined || proof === undefined) return undefined;
  return timingSafeEqual(Buffer.from(proof, 'base64url'), proofOf(passwordHash, name, id)) ? id : undefined;
}

/** True when the text could be a token: anything else is ignored before any lookup. */
export function isKnownDeviceShape(token: string): boolean {
  return TOKEN_SHAPE.test(token);
}
