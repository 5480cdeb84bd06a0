import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parsePasswordHash, SCRYPT_PARAMS } from '../../src/domain/passwords.ts';
import { PasswordHasher } from '../../src/services/passwords.ts';

describe('PasswordHasher (scrypt)', () => {
  const hasher = new PasswordHasher();

  it('hashes with the current parameters and a new salt each time', async () => {
    const [a, b] = await Promise.all([hasher.hash('correct horse battery'), hasher.hash('correct horse battery')]);
    assert.notEqual(a, b);
    const parsed = parsePasswordHash(a);
    assert.deepEqual(parsed?.params, SCRYPT_PARAMS);
    assert.equal(parsed?.salt.length, 16);
    assert.equal(parsed?.key.length, 32);
    assert.doesNotMatch(a, /horse/);
  });

  it('matches the password it was made from, and no other', async () => {
    const stored = await hasher.hash('correct horse battery');
    assert.equal(await hasher.verify('correct horse battery', stored), true);
    assert.equal(await hasher.verify('correct horse batterY', stored), false);
    assert.equal(await hasher.verify('', stored), false);
  });

  it('matches a password typed with a decomposed accent (NFC)', async () => {
    const stored = await hasher.hash('caf\u00e9 au lait!');
    assert.equal(await hasher.verify('cafe\u0301 au lait!', stored), true);
  });

  it('checks an older hash with the parameters stored beside it', async () => {
    // Made with N=2^10 by an earlier setting: still verifies after SCRYPT_PARAMS changed.
    const { scryptSync } = await import('node:crypto');
    const salt = Buffer.alloc(16, 7);
    const key = scryptSync('old password!', salt, 32, { N: 1024, r: 8, p: 1 });
    const stored = `scrypt$N=1024,r=8,p=1$${salt.toString('base64url')}$${key.toString('base64url')}`;
    assert.equal(await hasher.verify('old password!', stored), true);
    assert.equal(await hasher.verify('old password?', stored), false);
  });

  it('never matches an unknown user (no stored hash), yet runs scrypt for as long as for a known one', async () => {
    const stored = await hasher.hash('correct horse battery');
    const timed = async (work: () => Promise<boolean>) => {
      const start = performance.now();
      const result = await work();
      return { result, ms: performance.now() - start };
    };
    const known = await timed(() => hasher.verify('wrong password!', stored));
    const unknown = await timed(() => hasher.verify('wrong password!', undefined));
    assert.equal(unknown.result, false);
    assert.equal(known.result, false);
    // Both run one scrypt of the current parameters; a lookup that skipped it would take well under 1 ms.
    assert.ok(unknown.ms > known.ms / 3, `unknown ${unknown.ms} ms, known ${known.ms} ms`);
  });
});
