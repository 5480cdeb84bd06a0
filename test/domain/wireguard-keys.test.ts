import assert from 'node:assert/strict';
import { createPrivateKey, createPublicKey, diffieHellman, randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { generateKeyPair, isLowOrderPoint, isUsablePublicKey, isValidKey } from '../../src/domain/wireguard-keys.ts';

/** X25519 with a fresh private key: OpenSSL refuses (throws) when the shared secret is all zeros. */
function sharesASecret(publicKey: string): boolean {
  const pkcs8 = Buffer.concat([Buffer.from('302e020100300506032b656e04220420', 'hex'), randomBytes(32)]);
  const spki = Buffer.concat([Buffer.from('302a300506032b656e032100', 'hex'), Buffer.from(publicKey, 'base64')]);
  const privateKey = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' });
  const peer = createPublicKey({ key: spki, format: 'der', type: 'spki' });
  try {
    return !diffieHellman({ privateKey, publicKey: peer }).equals(Buffer.alloc(32));
  } catch {
    return false;
  }
}

const LOW_ORDER_HEX = [
  ['zero', '0000000000000000000000000000000000000000000000000000000000000000'],
  ['one', '0100000000000000000000000000000000000000000000000000000000000000'],
  ['a point of order 8', 'e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800'],
  ['the other point of order 8', '5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157'],
  ['p-1', 'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f'],
  ['p (zero, not canonical)', 'edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f'],
  ['p+1 (one, not canonical)', 'eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f'],
] as const;

describe('WireGuard public keys of small order', () => {
  for (const [name, hex] of LOW_ORDER_HEX) {
    for (const topBit of [0, 0x80]) {
      const bytes = Buffer.from(hex, 'hex');
      bytes[31] = (bytes[31] ?? 0) | topBit;
      const key = bytes.toString('base64');
      test(`refuses ${name}${topBit ? ' with bit 255 set' : ''} (${key}): no peer shares a secret with it`, () => {
        assert.equal(isValidKey(key), true, 'well-formed base64 of 32 bytes');
        assert.equal(isLowOrderPoint(key), true);
        assert.equal(isUsablePublicKey(key), false);
        assert.equal(sharesASecret(key), false, 'X25519 with it gives the all-zero secret');
      });
    }
  }

  test('accepts real public keys, which share a secret', () => {
    for (let i = 0; i < 20; i++) {
      const { publicKey } = generateKeyPair();
      assert.equal(isUsablePublicKey(publicKey), true, publicKey);
      assert.equal(sharesASecret(publicKey), true);
    }
  });

  test('a malformed key is not usable either', () => {
    for (const bad of ['', 'AAAA', `${'A'.repeat(43)}=\n`, `${'A'.repeat(42)}B=`]) {
      assert.equal(isUsablePublicKey(bad), false, JSON.stringify(bad));
    }
  });
});
