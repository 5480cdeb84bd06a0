/**
 * docs/configuration.md is complete (issue 25): every environment variable that the code, the scripts or the
 * units in deploy/ read or set is in its tables, and every variable it lists is read somewhere.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** The shell's own, which no page of ours needs to explain. */
const THE_SHELLS = new Set(['BASH_SOURCE', 'HOME', 'PATH']);
const NAME = '([A-Z][A-Z0-9_]+)';
/** How our sources read a variable: config.ts's readers take `(env, 'NAME'`, others `env.NAME` or `env['NAME']`. */
const TS_READS = [
  new RegExp(`\\(env, '${NAME}'`, 'g'),
  new RegExp(`\\benv\\.${NAME}\\b`, 'g'),
  new RegExp(`\\benv\\[['"]${NAME}['"]\\]`, 'g'),
];
/** A shell script's `$NAME` / `${NAME…}`; a systemd unit's `Environment=NAME=`. */
const SHELL_READS = [new RegExp(`\\$\\{?${NAME}`, 'g')];
const UNIT_SETS = [new RegExp(`^Environment=${NAME}=`, 'gm')];

function filesUnder(dir: string, endings: readonly string[]): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return filesUnder(path, endings);
    return endings.some((ending) => entry.name.endsWith(ending)) ? [path] : [];
  });
}

export function variablesIn(text: string, patterns: readonly RegExp[]): string[] {
  return patterns.flatMap((pattern) => [...text.matchAll(pattern)].map((match) => match[1] ?? ''));
}

/** Every variable read, with the first file that reads it. */
function variablesRead(): Map<string, string> {
  const sources: Array<[files: string[], patterns: readonly RegExp[]]> = [
    [[...filesUnder('src', ['.ts']), 'bin/vpn-panel.js'], TS_READS],
    [[...filesUnder('scripts', ['.sh']), 'scripts/start', 'scripts/test', 'deploy/install-node.sh'], SHELL_READS],
    [filesUnder('deploy', ['.service']), UNIT_SETS],
  ];
  const read = new Map<string, string>();
  for (const [files, patterns] of sources) {
    for (const file of files) {
      for (const name of variablesIn(readFileSync(join(ROOT, file), 'utf8'), patterns)) {
        if (!THE_SHELLS.has(name) && !read.has(name)) read.set(name, file);
      }
    }
  }
  return read;
}

/** The variables docs/configuration.md's tables name in their first column. */
export function variablesDocumented(markdown: string): Set<string> {
  const names = markdown
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .flatMap((line) => [...(line.split('|')[1] ?? '').matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1] ?? ''));
  return new Set(names);
}

describe('docs/configuration.md', () => {
  const read = variablesRead();
  const documented = variablesDocumented(readFileSync(join(ROOT, 'docs/configuration.md'), 'utf8'));

  it('names every environment variable the code, the scripts and the units read or set', () => {
    const missing = [...read].filter(([name]) => !documented.has(name)).map(([name, file]) => `${name} (${file})`);
    assert.deepEqual(missing, [], `not in docs/configuration.md:\n  ${missing.join('\n  ')}`);
  });

  it('names no variable that nothing reads', () => {
    const stale = [...documented].filter((name) => !read.has(name));
    assert.deepEqual(stale, [], `documented but read nowhere:\n  ${stale.join('\n  ')}`);
  });

  it('finds a variable however it is read (the check can fail)', () => {
    const code = "port(env, 'AGENT_PORT', 7000); env.TZ; env['PANEL_URL']; value(env, 'NEW_SETTING')";
    assert.deepEqual(variablesIn(code, TS_READS).sort(), ['AGENT_PORT', 'NEW_SETTING', 'PANEL_URL', 'TZ']);
    assert.deepEqual(variablesIn('x="$' + '{VPN_PANEL_TOOLS:-~}" $LOCAL_NODE', SHELL_READS), [
      'VPN_PANEL_TOOLS',
      'LOCAL_NODE',
    ]);
    const table = '| variable | default |\n|---|---|\n| `PORT` / `HOST` | `8080` |\n| `A_B`, `CD` | `D_E` |';
    assert.deepEqual([...variablesDocumented(table)].sort(), ['A_B', 'CD', 'HOST', 'PORT']);
  });
});
