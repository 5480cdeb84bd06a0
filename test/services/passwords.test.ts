import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AppError } from '../../src/domain/errors.ts';
import { parsePasswordHash, SCRYPT_PARAMS } from '../../src/domain/passwords.ts';
import { type Derive, type HashPriority, PasswordHasher } from '../../src/services/passwords.ts';

/** A key derivation that holds every hash until the test lets the oldest go, and tells which began in what order. */
function heldDerive() {
  const started: string[] = [];
  const running: (() => void)[] = [];
  const derive: Derive = (password, _salt, _params, keyBytes) => {
    started.push(password);
    return new Promise((resolve) => running.push(() => resolve(Buffer.alloc(keyBytes))));
  };
  return { derive, started, finishOldest: () => running.shift()?.(), running: () => running.length };
}

/** Lets `count` held hashes finish, oldest first, each once it has begun. */
async function finish(held: ReturnType<typeof heldDerive>, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    await until(() => held.running() > 0);
    held.finishOldest();
  }
}

/** Waits (turn by turn of the event loop, never a fixed time) until `condition` holds. */
async function until(condition: () => boolean): Promise<void> {
  for (let turns = 0; !condition(); turns++) {
    assert.ok(turns < 1000, 'the condition never came');
    await new Promise((resolve) => setImmediate(resolve));
  }
}

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

  it('lets 32 hashes wait in each queue and refuses more at once (429 with Retry-After), telling of each', async () => {
    const held = heldDerive();
    const refused: number[] = [];
    const hasher = new PasswordHasher({ derive: held.derive, onQueueFull: (seconds) => refused.push(seconds) });
    const verify = (name: string, priority?: HashPriority) => hasher.verify(name, undefined, priority);
    const admitted = Array.from({ length: 2 + 32 }, (_, i) => verify(`queued ${i}`));
    const error = await verify('one too many').then(
      () => assert.fail('not refused'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof AppError, String(error));
    assert.equal(error.code, 'rate_limited');
    assert.match(error.message, /too many sign-ins are waiting for their password check/);
    assert.equal(error.retryAfterSeconds, 5, 'the 33 before it, at 0.3 s a hash before any was timed, two at a time');
    assert.deepEqual(refused, [error.retryAfterSeconds]);
    const first = verify('known browser', 'first'); // its queue is another: not refused
    assert.deepEqual(held.started, ['queued 0', 'queued 1'], 'two at a time');
    await finish(held, 2 + 32 + 1);
    assert.deepEqual(await Promise.all([...admitted, first]), Array(2 + 32 + 1).fill(false), 'each ran, none matched');
  });

  it('runs a hash of the first queue before every queued one', async () => {
    const held = heldDerive();
    const hasher = new PasswordHasher({ derive: held.derive });
    const all: Promise<unknown>[] = ['a', 'b', 'c', 'd'].map((name) => hasher.verify(name, undefined));
    all.push(hasher.verify('known browser', undefined, 'first'), hasher.hash('new password by an admin'));
    assert.deepEqual(held.started, ['a', 'b']);
    for (let next = 2; next < 6; next++) {
      held.finishOldest();
      await until(() => held.started.length > next);
    }
    assert.deepEqual(held.started, ['a', 'b', 'known browser', 'new password by an admin', 'c', 'd']);
    await finish(held, 2);
    await Promise.all(all);
  });
});
