import assert from 'node:assert/strict';
import { scryptSync } from 'node:crypto';
import { describe, it } from 'node:test';
import { SCOPES } from '../../src/domain/api-keys.ts';
import {
  consoleUserActor,
  consoleUserName,
  nameKey,
  SESSION_IDLE_MS,
  SESSION_LIFETIME_MS,
  scopesOfRole,
  sessionEndMs,
} from '../../src/domain/console-users.ts';
import { AppError } from '../../src/domain/errors.ts';
import { generateSecretToken, hashSecretToken, isSecretTokenShape } from '../../src/domain/secret-tokens.ts';
import {
  formatPasswordHash,
  newPassword,
  PASSWORD_MIN_CHARS,
  parsePasswordHash,
  SCRYPT_PARAMS,
} from '../../src/domain/passwords.ts';

function refusal(work: () => unknown): AppError {
  try {
    work();
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  assert.fail('not refused');
}

describe('console roles', () => {
  it('an admin has every scope of docs/api.md "Keys and scopes"', () => {
    assert.deepEqual([...scopesOfRole('admin')].sort(), [...SCOPES].sort());
  });

  it('a viewer has the read scopes and nothing that writes (webhooks need webhooks:write even to be read)', () => {
    assert.deepEqual([...scopesOfRole('viewer')].sort(), ['devices:read', 'events:read', 'servers:read']);
  });

  it('changes made in the console name their user', () => {
    assert.equal(consoleUserActor('alice'), 'via console user alice');
  });
});

describe('console user names', () => {
  for (const name of ['alice', 'a', 'ops.team-1', 'alice@example.com', 'A_b', 'x'.repeat(64)]) {
    it(`'${name}' is a name`, () => assert.equal(consoleUserName(` ${name} `), name));
  }
  for (const name of ['', ' ', '.alice', 'al ice', 'al\u001bice', 'al\u202eice', 'ä', 'x'.repeat(65), 'a/b']) {
    it(`${JSON.stringify(name)} is refused, naming the field`, () => {
      const error = refusal(() => consoleUserName(name));
      assert.equal(error.code, 'validation_failed');
      assert.deepEqual(Object.keys(error.fields), ['name']);
    });
  }

  it('names compare without their case', () => assert.equal(nameKey('Alice'), nameKey('aLICE')));
});

describe('console passwords', () => {
  it(`need at least ${PASSWORD_MIN_CHARS} characters, counted as characters, not bytes or UTF-16 units`, () => {
    // Neither repeats a piece nor is a common one (a password that does is refused whatever its length).
    assert.equal(newPassword('zq8!Lm#2vR0p'), 'zq8!Lm#2vR0p');
    assert.equal(refusal(() => newPassword('zq8!Lm#2vR0')).fields.password !== undefined, true);
    // 11 emoji are 22 UTF-16 units and 44 bytes, but 11 characters.
    const emoji = (count: number) => String.fromCodePoint(...Array.from({ length: count }, (_, i) => 0x1f600 + i));
    assert.equal(refusal(() => newPassword(emoji(11))).code, 'validation_failed');
    assert.equal(newPassword(emoji(12)), emoji(12));
  });

  it('are hashed in NFC, so a composed and a decomposed accent are the same password', () => {
    assert.equal(newPassword('cafe\u0301 au lait!'), newPassword('caf\u00e9 au lait!'));
  });

  it('refuse more than 1024 characters', () => {
    assert.equal(refusal(() => newPassword('a'.repeat(1025))).code, 'validation_failed');
  });

  it('are stored with their scrypt parameters, and read back as written', () => {
    const salt = Buffer.alloc(16, 1);
    const key = scryptSync('pw', salt, 32, { N: 1024, r: 8, p: 1 });
    const text = formatPasswordHash({ params: { N: 1024, r: 8, p: 1 }, salt, key });
    assert.match(text, /^scrypt\$N=1024,r=8,p=1\$[A-Za-z0-9_-]+\$[A-Za-z0-9_-]+$/);
    assert.deepEqual(parsePasswordHash(text), { params: { N: 1024, r: 8, p: 1 }, salt, key });
  });

  it('use the OWASP scrypt setting for 32 MiB (N=2^15, r=8, p=3)', () => {
    assert.deepEqual(SCRYPT_PARAMS, { N: 32768, r: 8, p: 3 });
  });

  for (const text of [
    '',
    'bcrypt$x',
    'scrypt$N=1000,r=8,p=1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA',
    'scrypt$N=1024,r=0,p=1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA',
  ]) {
    it(`${JSON.stringify(text.slice(0, 24))} is no stored hash`, () =>
      assert.equal(parsePasswordHash(text), undefined));
  }
});

describe('console sessions (secret tokens, as share links)', () => {
  it('tokens are 256 random bits in base64url, distinct, well formed', () => {
    const tokens = new Set(Array.from({ length: 1000 }, () => generateSecretToken()));
    assert.equal(tokens.size, 1000);
    for (const token of tokens) assert.equal(isSecretTokenShape(token), true, token);
  });

  for (const token of ['', 'x', `${generateSecretToken()}=`, `${generateSecretToken().slice(1)}+`, 'vpnk_abc']) {
    it(`${JSON.stringify(token)} is not a token`, () => assert.equal(isSecretTokenShape(token), false));
  }

  it('only the SHA-256 of a token is kept', () => {
    assert.equal(hashSecretToken('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('end 12 h after their last use, and 7 days after sign-in at the latest', () => {
    assert.equal(SESSION_IDLE_MS, 12 * 3600_000);
    assert.equal(SESSION_LIFETIME_MS, 7 * 86400_000);
    const signIn = 1_000_000;
    const expires = signIn + SESSION_LIFETIME_MS;
    assert.equal(sessionEndMs(signIn, expires), signIn + SESSION_IDLE_MS);
    assert.equal(sessionEndMs(expires - 3600_000, expires), expires);
  });
});
