import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';

const FILE = fileURLToPath(new URL('../docs/benchmarks.md', import.meta.url));
const HEADER = '# Benchmarks\n\nEvery figure here comes from a script in `bench/`, run on demand on this 2-core machine; each section names its command.\n';

/** Replaces the section `## title` of docs/benchmarks.md (or appends it), leaving the others alone. */
export function writeSection(title: string, body: string): void {
  const text = existsSync(FILE) ? readFileSync(FILE, 'utf8') : HEADER;
  const heading = `## ${title}`;
  const section = `${heading}\n\n${body.trim()}\n`;
  const start = text.indexOf(`${heading}\n`);
  if (start === -1) {
    writeFileSync(FILE, `${text.trimEnd()}\n\n${section}`);
    return;
  }
  const next = text.indexOf('\n## ', start + heading.length);
  writeFileSync(FILE, text.slice(0, start) + section + (next === -1 ? '' : text.slice(next)));
}

export function machine(): string {
  return `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.versions.node}, ${new Date().toISOString().slice(0, 10)}`;
}
