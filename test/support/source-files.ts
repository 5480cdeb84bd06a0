import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = fileURLToPath(new URL('../../src', import.meta.url));

function tsFilesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return tsFilesUnder(path);
    return entry.name.endsWith('.ts') ? [relative(SRC, path)] : [];
  });
}

/** Every .ts file of src by its path relative to src (`services/devices.ts`), with its text: what scans of src read. */
export function srcFiles(): Map<string, string> {
  return new Map(tsFilesUnder(SRC).map((file) => [file, readFileSync(join(SRC, file), 'utf8')]));
}
