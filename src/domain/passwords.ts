import { isCommonPassword } from './common-passwords.ts';
import { AppError } from './errors.ts';

/** A console user's password: at least this many characters (Unicode code points, after NFC). */
export const PASSWORD_MIN_CHARS = 12;
/** And at most this many: anything longer is a mistake, and hashing it would cost for nothing. */
export const PASSWORD_MAX_CHARS = 1024;

/**
 * The password as it is hashed and compared: in Unicode NFC, so the same password typed on another system
 * (which may compose accents differently) matches.
 */
export function normalisedPassword(password: string): string {
  return password.normalize('NFC');
}

function refused(message: string, problem: string): AppError {
  return new AppError('validation_failed', message, { password: problem });
}

/**
 * A new password, checked against the rules (for the CLI and the API alike): its length, not only whitespace, and
 * not one of the most common passwords (`isCommonPassword`), which a guesser tries first. Refused with
 * `validation_failed` naming `password`.
 */
export function newPassword(password: string): string {
  const text = normalisedPassword(password);
  const chars = [...text].length;
  if (chars < PASSWORD_MIN_CHARS || chars > PASSWORD_MAX_CHARS) {
    const rule = `${PASSWORD_MIN_CHARS} to ${PASSWORD_MAX_CHARS} characters`;
    throw refused(`a console password is ${rule} (this one has ${chars})`, rule);
  }
  if (/^\s+$/u.test(text)) throw refused('a console password of only spaces is refused', 'not only spaces');
  if (isCommonPassword(text)) {
    const message = 'this password is among the most common ones, which are guessed first; choose another';
    throw refused(message, 'too common');
  }
  return text;
}

/** scrypt's cost: N (CPU and memory), r (block size), p (parallel lanes, run one after another by Node). */
export interface ScryptParams {
  N: number;
  r: number;
  p: number;
}

/**
 * OWASP's scrypt setting for 32 MiB of memory (the equivalent of N=2^17, r=8, p=1 at a quarter of the memory):
 * 0.2-0.4 s a hash on the 2-core test machine, depending on its load (docs/benchmarks.md, "Console passwords").
 */
export const SCRYPT_PARAMS: ScryptParams = { N: 2 ** 15, r: 8, p: 3 };
export const SALT_BYTES = 16;
export const KEY_BYTES = 32;

/** The memory scrypt needs for the parameters (128·N·r), with room: Node refuses to start one above its limit. */
export function scryptMaxmem(params: ScryptParams): number {
  return 2 * 128 * params.N * params.r;
}

/** A stored hash: `scrypt$N=32768,r=8,p=3$<salt>$<key>` (base64, no padding), parameters kept beside the hash. */
export interface PasswordHash {
  params: ScryptParams;
  salt: Buffer;
  key: Buffer;
}

export function formatPasswordHash(hash: PasswordHash): string {
  const { N, r, p } = hash.params;
  return `scrypt$N=${N},r=${r},p=${p}$${hash.salt.toString('base64url')}$${hash.key.toString('base64url')}`;
}

const STORED = /^scrypt\$N=(\d{1,10}),r=(\d{1,4}),p=(\d{1,4})\$([A-Za-z0-9_-]{16,})\$([A-Za-z0-9_-]{16,})$/;

/** The parts of a stored hash; undefined when the text is not one (a row written by hand). */
export function parsePasswordHash(text: string): PasswordHash | undefined {
  const m = STORED.exec(text);
  if (m === null) return undefined;
  const [N = 0, r = 0, p = 0] = m.slice(1, 4).map(Number);
  // A power of two above 1 is what scrypt takes as N.
  if (N < 2 || (N & (N - 1)) !== 0 || r < 1 || p < 1) return undefined;
  return { params: { N, r, p }, salt: Buffer.from(m[4] ?? '', 'base64url'), key: Buffer.from(m[5] ?? '', 'base64url') };
}
