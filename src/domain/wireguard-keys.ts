/**
 * WireGuard (Curve25519) keys as `wg genkey` / `wg pubkey` make them: 32 bytes, base64.
 *
 * Not `crypto.generateKeyPairSync('x25519')`: in a loop it deadlocked Node in about 1 run of 3
 * (docs/dataplane.md, "Measured facts" 1). The path used here makes the private key from random bytes and asks
 * OpenSSL only for the public key, which never hung and matches `wg pubkey`.
 */
import { createPrivateKey, createPublicKey, randomBytes } from 'node:crypto';

export interface WireGuardKeyPair {
  /** base64, 44 characters. */
  privateKey: string;
  /** base64, 44 characters. */
  publicKey: string;
}

const KEY_BYTES = 32;
/** PKCS#8 DER header of an X25519 private key; the 32 key bytes follow. */
const PKCS8_X25519_PREFIX = Buffer.from('302e020100300506032b656e04220420', 'hex');
/** Length of the SPKI DER header of an X25519 public key, before its 32 key bytes. */
const SPKI_X25519_PREFIX_BYTES = 12;
/** 42 free characters, then one whose low 4 bits are zero (the 256 bits end there), then the pad. */
const KEY_PATTERN = /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/;

/** True for exactly 32 bytes in canonical base64 (44 characters, one `=`). */
export function isValidKey(base64: string): boolean {
  if (!KEY_PATTERN.test(base64)) return false;
  const bytes = Buffer.from(base64, 'base64');
  return bytes.length === KEY_BYTES && bytes.toString('base64') === base64;
}

/**
 * The Curve25519 points of small order, as libsodium lists them (`crypto_scalarmult` refuses them,
 * and WireGuard completes no handshake with one: its shared secret is all zeros whatever the private
 * key): 0, 1, the two points of order 8, p-1, and p and p+1 (non-canonical 0 and 1). X25519 ignores
 * the top bit, so each also has a second encoding with bit 255 set; keys are compared with it cleared.
 */
const LOW_ORDER_POINTS = [
  '0000000000000000000000000000000000000000000000000000000000000000',
  '0100000000000000000000000000000000000000000000000000000000000000',
  'e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800',
  '5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157',
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  'edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  'eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
].map((hex) => Buffer.from(hex, 'hex'));

/** True for a public key of small order (any encoding): no peer can share a secret with it. */
export function isLowOrderPoint(base64: string): boolean {
  const bytes = Buffer.from(base64, 'base64');
  if (bytes.length !== KEY_BYTES) return false;
  bytes[31] = (bytes[31] ?? 0) & 127;
  return LOW_ORDER_POINTS.some((point) => point.equals(bytes));
}

/** A key a client may give as its public key: well-formed (isValidKey) and not of small order. */
export function isUsablePublicKey(base64: string): boolean {
  return isValidKey(base64) && !isLowOrderPoint(base64);
}

/** A new key pair; the private key is clamped as `wg genkey` clamps it. */
export function generateKeyPair(): WireGuardKeyPair {
  const scalar = randomBytes(KEY_BYTES);
  clamp(scalar);
  const privateKey = scalar.toString('base64');
  return { privateKey, publicKey: publicKeyOfBytes(scalar) };
}

/** The public key of a base64 private key; throws on a malformed key. */
export function publicKeyOf(privateKey: string): string {
  if (!isValidKey(privateKey)) throw new Error('a WireGuard key is 32 bytes in base64 (44 characters)');
  return publicKeyOfBytes(Buffer.from(privateKey, 'base64'));
}

function publicKeyOfBytes(scalar: Buffer): string {
  const key = createPrivateKey({ key: Buffer.concat([PKCS8_X25519_PREFIX, scalar]), format: 'der', type: 'pkcs8' });
  const spki = createPublicKey(key).export({ format: 'der', type: 'spki' });
  return spki.subarray(SPKI_X25519_PREFIX_BYTES).toString('base64');
}

/** RFC 7748 §5: clear the 3 low bits and the top bit, set bit 254. */
function clamp(scalar: Buffer): void {
  scalar[0] = (scalar[0] ?? 0) & 248;
  scalar[31] = ((scalar[31] ?? 0) & 127) | 64;
}
