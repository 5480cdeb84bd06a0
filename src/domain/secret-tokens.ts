import { createHash, randomBytes } from 'node:crypto';

/**
 * Bearer secrets the panel makes for a browser (share links, console sessions): 256 random bits
 * (docs/decisions.md "Share links"; a share link needs at least 128), 43 base64url characters.
 */
const TOKEN_BYTES = 32;
const TOKEN_SHAPE = /^[A-Za-z0-9_-]{43}$/;

export function generateSecretToken(): string {
  return randomBytes(TOKEN_BYTES).toString('base64url');
}

/** True when the text could be a token: anything else is refused before any lookup. */
export function isSecretTokenShape(text: string): boolean {
  return TOKEN_SHAPE.test(text);
}

/**
 * What a token is found by: its SHA-256 (hex). The token has 256 random bits, so no salt or slow hash is
 * needed: a table of hashes gives no way back to a working token.
 */
export function hashSecretToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}
