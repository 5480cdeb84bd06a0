import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { AppError } from '../../src/domain/errors.ts';
import {
  SCOPES,
  type Scope,
  KEY_PREFIX,
  apiKeyActor,
  generateApiKey,
  hashApiKey,
  isWellFormedApiKey,
  parseScopes,
} from '../../src/domain/api-keys.ts';

const KEY_SHAPE = /^vpnk_[0-9A-Za-z]{38}$/;
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/**
 * A key made outside the code under test: the secret's CRC-32 (node:zlib) in six base62 digits. It must
 * stay well formed in every later version, or keys already handed out would be refused.
 */
const KNOWN_KEY = 'vpnk_abcdefghijklmnopqrstuvwxyzABCDEF1mVgZW';

/** `key` with the character at `index` replaced by `char`. */
const withChar = (key: string, index: number, char: string): string =>
  key.slice(0, index) + char + key.slice(index + 1);

describe('generated API keys (docs/decisions.md "API keys": vpnk_ + 32 base62 + 6-char checksum)', () => {
  test('have the key shape and are well formed', () => {
    for (let i = 0; i < 200; i++) {
      const key = generateApiKey();
      assert.match(key, KEY_SHAPE);
      assert.ok(key.startsWith(KEY_PREFIX));
      assert.equal(isWellFormedApiKey(key), true, key);
    }
  });

  test('1,000 keys are distinct', () => {
    const keys = new Set(Array.from({ length: 1000 }, () => generateApiKey()));
    assert.equal(keys.size, 1000);
  });

  test('secrets use the whole base62 alphabet, not a part of it', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 200; i++) for (const char of generateApiKey().slice(5, 37)) seen.add(char);
    assert.equal(seen.size, 62);
  });

  test('a key made with an independent CRC-32 checksum is well formed', () => {
    assert.equal(isWellFormedApiKey(KNOWN_KEY), true);
  });
});

describe('isWellFormedApiKey: one changed character is caught', () => {
  const keys = [KNOWN_KEY, generateApiKey(), generateApiKey(), generateApiKey()];
  const SECRET_START = KEY_PREFIX.length;
  const CHECKSUM_START = SECRET_START + 32;

  const parts: Array<[part: string, from: number, to: number]> = [
    ['secret', SECRET_START, CHECKSUM_START],
    ['checksum', CHECKSUM_START, CHECKSUM_START + 6],
  ];
  for (const [part, from, to] of parts) {
    test(`every position of the ${part}, every other base62 character`, () => {
      for (const key of keys) {
        for (let index = from; index < to; index++) {
          for (const char of BASE62) {
            if (char === key[index]) continue;
            const changed = withChar(key, index, char);
            assert.match(changed, KEY_SHAPE, 'the change keeps the key shape, so only the checksum can catch it');
            assert.equal(isWellFormedApiKey(changed), false, `${key} with ${char} at ${index}`);
          }
        }
      }
    });
  }

  test('two neighbouring characters swapped in the secret', () => {
    for (const key of keys) {
      for (let index = SECRET_START; index < CHECKSUM_START - 1; index++) {
        const [a, b] = [key[index] ?? '', key[index + 1] ?? ''];
        if (a === b) continue;
        const swapped = key.slice(0, index) + b + a + key.slice(index + 2);
        assert.equal(isWellFormedApiKey(swapped), false, `${key} swapped at ${index}`);
      }
    }
  });

  const notKeys: Array<[intent: string, text: string]> = [
    ['the empty string', ''],
    ['the prefix alone', 'vpnk_'],
    ['another prefix', `vpnx_${KNOWN_KEY.slice(5)}`],
    ['an upper-case prefix', `VPNK_${KNOWN_KEY.slice(5)}`],
    ['no prefix', KNOWN_KEY.slice(5)],
    ['one character short', KNOWN_KEY.slice(0, -1)],
    ['one character long', `${KNOWN_KEY}0`],
    ['a non-base62 character', withChar(KNOWN_KEY, 10, '-')],
    ['an underscore in the secret', withChar(KNOWN_KEY, 10, '_')],
    ['a trailing newline', `${KNOWN_KEY}\n`],
    ['a leading space', ` ${KNOWN_KEY}`],
    ['Bearer included', `Bearer ${KNOWN_KEY}`],
    ['the key twice', KNOWN_KEY + KNOWN_KEY],
  ];
  for (const [intent, text] of notKeys) {
    test(`refuses ${intent}`, () => assert.equal(isWellFormedApiKey(text), false));
  }
});

describe('parseScopes (docs/api.md "Keys and scopes"; `all` is every scope)', () => {
  const accepted: Array<[intent: string, text: string, scopes: readonly Scope[]]> = [
    ['all', 'all', SCOPES],
    ['all with spaces around', '  all ', SCOPES],
    ['all next to a scope', 'all,devices:read', SCOPES],
    ['one scope', 'devices:read', ['devices:read']],
    ['a list with spaces after commas', 'devices:read, servers:write', ['devices:read', 'servers:write']],
    [
      'a list with spaces everywhere',
      '  events:read ,webhooks:write  ,  devices:write ',
      ['devices:write', 'events:read', 'webhooks:write'],
    ],
    ['duplicates, once each', 'devices:read,devices:read, devices:read', ['devices:read']],
    ['a trailing comma', 'servers:read,', ['servers:read']],
    ['every scope by name', SCOPES.join(','), SCOPES],
    ['every scope by name, reversed', [...SCOPES].reverse().join(','), SCOPES],
  ];
  for (const [intent, text, scopes] of accepted) {
    test(`accepts ${intent}`, () => assert.deepEqual(parseScopes(text), [...scopes]));
  }

  test('the seven scopes are those of docs/api.md "Keys and scopes"', () => {
    assert.deepEqual([...SCOPES].sort(), [
      'devices:read',
      'devices:write',
      'events:read',
      'plans:write',
      'servers:read',
      'servers:write',
      'webhooks:write',
    ]);
  });

  const refused: Array<[intent: string, text: string]> = [
    ['an unknown scope', 'devices:admin'],
    ['an unknown scope among known ones', 'devices:read,nodes:write'],
    ['a misspelt scope', 'device:read'],
    ['a scope in upper case', 'Devices:Read'],
    ['ALL in upper case', 'ALL'],
    ['an unknown scope next to all', 'all,devices:wirte'],
    ['a space-separated list (one unknown name)', 'devices:read servers:read'],
    ['nothing', ''],
    ['only commas and spaces', ' , ,'],
  ];
  for (const [intent, text] of refused) {
    test(`refuses ${intent} naming scopes`, () => {
      assert.throws(
        () => parseScopes(text),
        (error: unknown) => {
          assert.ok(error instanceof AppError, `expected an AppError, got ${String(error)}`);
          assert.equal(error.code, 'validation_failed');
          assert.ok(Object.hasOwn(error.fields, 'scopes'), `fields ${JSON.stringify(error.fields)} should name scopes`);
          return true;
        },
      );
    });
  }
});

describe('hashApiKey: only the hash is stored (docs/decisions.md "API keys")', () => {
  test('is the SHA-256 of the key in lower-case hex', () => {
    // Known SHA-256 test vector (FIPS 180-2): "abc".
    assert.equal(hashApiKey('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    assert.match(hashApiKey(generateApiKey()), /^[0-9a-f]{64}$/);
  });

  test('is the same for the same key and differs per key', () => {
    const keys = Array.from({ length: 200 }, () => generateApiKey());
    for (const key of keys) assert.equal(hashApiKey(key), hashApiKey(key));
    assert.equal(new Set(keys.map(hashApiKey)).size, 200);
    assert.notEqual(hashApiKey(KNOWN_KEY), hashApiKey(withChar(KNOWN_KEY, 41, 'X')));
  });
});

test('the actor of a change made with a key is "via API key <name>" (docs/decisions.md "Actors")', () => {
  assert.equal(apiKeyActor('billing bot'), 'via API key billing bot');
});
