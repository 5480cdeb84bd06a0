import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/** Whether `tool` is in a directory of PATH (the usual system ones when PATH is unset). */
export function onPath(tool: string): boolean {
  const path = (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin').split(':');
  return path.some((dir) => dir !== '' && existsSync(`${dir}/${tool}`));
}

/** A test's `skip` for a tool of a Debian package: false when it is there, else what to install. */
export function needsTool(tool: string, pkg: string): string | false {
  return onPath(tool) ? false : `needs ${tool} (apt-get install ${pkg})`;
}

/** The text of the QR code in a PNG file, as zbarimg reads it: each symbol ends with a newline of its own. */
export function decodeQr(path: string): string {
  // stderr piped: zbarimg reports a missing D-Bus there, which is noise here.
  return execFileSync('zbarimg', ['--raw', '-q', path], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}
