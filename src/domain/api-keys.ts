import { createHash, randomInt } from 'node:crypto';
import { AppError } from './errors.ts';

/** The scopes of docs/api.md "Keys and scopes". */
export const SCOPES = [
  'devices:read',
  'devices:write',
  'plans:write',
  'servers:read',
  'servers:write',
  'events:read',
  'webhooks:write',
] as const;
export type Scope = (typeof SCOPES)[number];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/** Parses `a,b` or `all` (every scope) into a sorted list without repeats. */
export function parseScopes(text: string): Scope[] {
  const names = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (names.length === 0)
    throw new AppError('validation_failed', 'at least one scope is required', { scopes: 'required' });
  // Unknown names are refused first, so a typo beside `all` never passes unnoticed.
  const unknown = names.filter((n) => n !== 'all' && !isScope(n));
  if (unknown.length > 0) {
    throw new AppError(
      'validation_failed',
      `unknown scope ${unknown.join(', ')}; scopes are ${SCOPES.join(', ')} or all`,
      {
        scopes: `unknown: ${unknown.join(', ')}`,
      },
    );
  }
  if (names.includes('all')) return [...SCOPES];
  return SCOPES.filter((s) => names.includes(s));
}

export const KEY_PREFIX = 'vpnk_';
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const SECRET_CHARS = 32;
const CHECKSUM_CHARS = 6;
const KEY_PATTERN = new RegExp(`^${KEY_PREFIX}[0-9A-Za-z]{${SECRET_CHARS + CHECKSUM_CHARS}}$`);

/** CRC-32 (IEEE), the checksum secret scanners use to tell a real key from a look-alike. */
const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(text: string): number {
  let crc = 0xffffffff;
  for (let i = 0; i < text.length; i++) crc = (CRC_TABLE[(crc ^ text.charCodeAt(i)) & 0xff] ?? 0) ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function checksum(secret: string): string {
  let n = crc32(secret);
  let out = '';
  for (let i = 0; i < CHECKSUM_CHARS; i++) {
    out = BASE62[n % 62] + out;
    n = Math.floor(n / 62);
  }
  return out;
}

/** A new key: `vpnk_` + 32 random base62 characters (190 bits) + a 6-character checksum. */
export function generateApiKey(): string {
  let secret = '';
  for (let i = 0; i < SECRET_CHARS; i++) secret += BASE62[randomInt(62)];
  return KEY_PREFIX + secret + checksum(secret);
}

/** True when the text has the key shape and its checksum matches: cheap to check before any lookup. */
export function isWellFormedApiKey(key: string): boolean {
  if (!KEY_PATTERN.test(key)) return false;
  const body = key.slice(KEY_PREFIX.length);
  return checksum(body.slice(0, SECRET_CHARS)) === body.slice(SECRET_CHARS);
}

/** Only this hash is stored; the key itself is shown once. */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** The actor recorded for changes made with a key (events, activity log, emails). */
export function apiKeyActor(name: string): string {
  return `via API key ${name}`;
}
