/** The text both databases put the violated columns or index in, for telling constraints apart. */
export function violationText(error: unknown): string {
  if (typeof error !== 'object' || error === null) return '';
  const parts = ['message', 'detail', 'constraint'].map((k) => (k in error ? String(Reflect.get(error, k)) : ''));
  return parts.join(' ');
}

/** True for a unique-constraint violation on either database. */
export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null || !('code' in error)) return false;
  const code = error.code;
  return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === '23505';
}
