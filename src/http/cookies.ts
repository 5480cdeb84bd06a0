/** The values of every cookie named `name` in a Cookie header, in order (a planted twin shows as a second). */
export function cookieValues(header: string | undefined, name: string): string[] {
  const values: string[] = [];
  for (const part of header?.split(';') ?? []) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) values.push(part.slice(eq + 1).trim());
  }
  return values;
}

export interface CookieOptions {
  path: string;
  maxAgeSeconds: number;
  secure: boolean;
}

/**
 * A `Set-Cookie` value of the panel's: read by no script (HttpOnly), sent with no other site's request
 * (SameSite=Strict), `Secure` over https.
 */
export function setCookieValue(name: string, value: string, options: CookieOptions): string {
  const parts = [`${name}=${value}`, 'HttpOnly', 'SameSite=Strict', `Path=${options.path}`];
  parts.push(`Max-Age=${options.maxAgeSeconds}`);
  if (options.secure) parts.push('Secure');
  return parts.join('; ');
}
