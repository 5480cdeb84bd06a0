import { chmodSync, closeSync, fstatSync, fchmodSync, mkdirSync, openSync, statSync } from 'node:fs';

/**
 * DATA_DIR holds the database, the panel secret, a node's journal and TLS key: every process that
 * makes it or a file in it (`serve`, `node`, and every CLI command) goes through these, so the
 * modes do not depend on which one came first or on the umask.
 */
const DIR_MODE = 0o700;
const FILE_MODE = 0o600;

const warned = new Set<string>();

function isErrno(error: unknown, code: string): boolean {
  return error instanceof Error && 'code' in error && error.code === code;
}

function octal(mode: number): string {
  return `0${(mode & 0o777).toString(8)}`;
}

/**
 * Makes the directory owner-only (0700) when it is not there yet. One that exists with wider bits
 * is left as it is, with one warning a process: it may be a directory other programs use too (a
 * DATA_DIR of /tmp or a home directory), which a chmod would break; the files made in it are 0600.
 */
export function preparePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: DIR_MODE });
  const mode = statSync(dir).mode;
  if ((mode & 0o077) !== 0 && !warned.has(dir)) {
    warned.add(dir);
    process.emitWarning(
      `DATA_DIR ${dir} is mode ${octal(mode)}: other users can look into it; ` +
        `make it owner-only with \`chmod 700 ${dir}\``,
      { code: 'VPN_PANEL_DATA_DIR_MODE' },
    );
  }
}

/** Takes the group and other bits off one of the panel's own files; a file of another user is left with a warning. */
function tighten(path: string, mode: number, change: (mode: number) => void): void {
  if ((mode & 0o077) === 0) return;
  try {
    change(mode & 0o700);
  } catch (error) {
    if (!isErrno(error, 'EPERM')) throw error;
    process.emitWarning(
      `${path} is mode ${octal(mode)} and not this user's to change: make it owner-only with \`chmod 600 ${path}\``,
      { code: 'VPN_PANEL_FILE_MODE' },
    );
  }
}

/**
 * Makes the file (mode 0600) when it is missing, so what creates it next (SQLite) finds it private,
 * or makes an existing one owner-only (an earlier version left its files 0644).
 */
export function preparePrivateFile(path: string): void {
  const fd = openSync(path, 'a', FILE_MODE);
  try {
    tighten(path, fstatSync(fd).mode, (mode) => fchmodSync(fd, mode));
  } finally {
    closeSync(fd);
  }
}

/** Makes the file owner-only if it is there; a missing one is left missing. */
export function tightenIfPresent(path: string): void {
  let mode: number;
  try {
    mode = statSync(path).mode;
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return;
    throw error;
  }
  tighten(path, mode, (tightened) => chmodSync(path, tightened));
}
