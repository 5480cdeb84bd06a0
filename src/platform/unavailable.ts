/**
 * Whether an error says a dependency of the panel is out (its database cannot be reached, or its disk is
 * full) rather than that the panel is wrong: a request that failed on one is answered 503 and may be retried.
 * Read from the error's codes only, so neither the HTTP layer nor this file needs the database drivers.
 */
export function dependencyUnavailable(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    const code = 'code' in e && typeof e.code === 'string' ? e.code : '';
    if (UNREACHABLE.has(code)) return true;
    // PostgreSQL's SQLSTATE classes 08 (connection exception) and 57 (operator intervention: shutting down,
    // starting up) and 53 (insufficient resources: disk full, out of memory, too many connections).
    if (/^(08|53|57)[0-9A-Z]{3}$/.test(code)) return true;
    // better-sqlite3's codes: the disk is full, or the file cannot be read or written.
    if (code === 'SQLITE_FULL' || code.startsWith('SQLITE_IOERR')) return true;
    // pg's plain Errors for a connection the server closed under a query, or one that broke before it.
    if (e.message.startsWith('Connection terminated') || e.message.endsWith('is not queryable')) return true;
  }
  return false;
}

const UNREACHABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'ETIMEDOUT', 'EPIPE']);
