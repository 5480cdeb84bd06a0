/** The panel secret is 32 random bytes; PANEL_SECRET and DATA_DIR/panel.secret hold them in base64. */
export const SECRET_BYTES = 32;

export function parseSecret(text: string): Buffer | undefined {
  return /^[A-Za-z0-9+/]{43}=$/.test(text) ? Buffer.from(text, 'base64') : undefined;
}

export function formatSecret(secret: Buffer): string {
  return secret.toString('base64');
}
