/** A share link's token is a secret token (src/domain/secret-tokens.ts); the link is found by its SHA-256. */
export {
  generateSecretToken as generateShareToken,
  hashSecretToken as hashShareToken,
  isSecretTokenShape as isShareTokenShape,
} from './secret-tokens.ts';
