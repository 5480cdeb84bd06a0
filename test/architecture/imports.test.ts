/**
 * Imports run one way (issue 12): domain <- platform <- store/agent <- services <- http/workers <- main <- cli,
 * with no cycle between files, and the node agent (`vpn-panel node`) loads no module of the panel. In the
 * console, no page imports another page and no files import each other in a cycle.
 *
 * Every `import`, `export … from` and `import()` of src counts, type-only ones too: a type import is a
 * dependency of the source a reader follows, and a cycle through types is still a cycle to untangle.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SRC = join(ROOT, 'src');

/**
 * What each folder of src may import besides itself: a straight line, where store and agent are one layer
 * that never imports itself across (what both need is in platform). http reaches the store only through
 * services.
 */
const MAY_IMPORT: Record<string, readonly string[]> = {
  domain: [],
  platform: ['domain'],
  agent: ['domain', 'platform'],
  store: ['domain', 'platform'],
  services: ['domain', 'platform', 'store', 'agent'],
  http: ['domain', 'platform', 'services'],
  workers: ['domain', 'platform', 'store', 'agent', 'services'],
  main: ['domain', 'platform', 'store', 'agent', 'services', 'http', 'workers'],
  cli: ['domain', 'platform', 'store', 'agent', 'services', 'http', 'workers', 'main'],
};

/** What the panel is made of: the node agent loads none of it. */
const PANEL_FOLDERS = ['store', 'services', 'http', 'workers'];
const PANEL_FILES = ['main/panel.ts'];
const PANEL_PACKAGES = ['pg', 'better-sqlite3', 'kysely', 'ioredis', 'nodemailer', 'maxmind'];

interface Import {
  /** What the file imports, as written. */
  specifier: string;
  /** The imported file relative to src (`store/db.ts`), or undefined for a package or a file outside src. */
  target: string | undefined;
  line: number;
  /** `import()`, loaded only when that code runs. */
  lazy: boolean;
}

/** The source files under `root` (relative to it) whose names end with one of `extensions`. */
function sourceFiles(root: string, extensions: readonly string[], dir = root): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(root, extensions, path);
    return extensions.some((extension) => entry.name.endsWith(extension)) ? [relative(root, path)] : [];
  });
}

function importsOf(root: string, file: string): Import[] {
  const text = readFileSync(join(root, file), 'utf8');
  const lineOf = (pos: number) => text.slice(0, pos).split('\n').length;
  return ts.preProcessFile(text, true, true).importedFiles.map(({ fileName, pos }) => {
    const inside = fileName.startsWith('.') ? relative(root, resolve(root, dirname(file), fileName)) : undefined;
    const target = inside !== undefined && !inside.startsWith('..') ? inside : undefined;
    const lazy = /import\s*\(\s*['"`]?$/.test(text.slice(Math.max(0, pos - 30), pos));
    return { specifier: fileName, target, line: lineOf(pos), lazy };
  });
}

/** Each file under `root` with what it imports. */
function importGraph(root: string, extensions: readonly string[]): Map<string, Import[]> {
  return new Map(
    sourceFiles(root, extensions)
      .sort()
      .map((file) => [file, importsOf(root, file)]),
  );
}

function folderOf(file: string): string {
  return file.split('/')[0] ?? '';
}

const IMPORTS = importGraph(SRC, ['.ts']);
const FILES = [...IMPORTS.keys()];
const CONSOLE_SRC = join(ROOT, 'console/src');

/** Every import that runs the wrong way, as `file:line imports 'specifier' (folder may not import folder)`. */
export function wrongWayImports(imports: ReadonlyMap<string, readonly Import[]>): string[] {
  const wrong: string[] = [];
  for (const [file, list] of imports) {
    const from = folderOf(file);
    const allowed = MAY_IMPORT[from];
    for (const i of list) {
      if (i.target === undefined) continue;
      const to = folderOf(i.target);
      if (allowed === undefined || (to !== from && !allowed.includes(to))) {
        wrong.push(`src/${file}:${i.line} imports '${i.specifier}' (${from} may not import ${to})`);
      }
    }
  }
  return wrong;
}

/** Every import of a console page from another page, as `pages/a.tsx:3 imports './b.tsx'`. */
export function pageToPageImports(imports: ReadonlyMap<string, readonly Import[]>): string[] {
  const isPage = (file: string) => file.startsWith('pages/');
  return [...imports].flatMap(([file, list]) =>
    isPage(file)
      ? list
          .filter((i) => i.target !== undefined && isPage(i.target))
          .map((i) => `${file}:${i.line} imports '${i.specifier}'`)
      : [],
  );
}

/** Each cycle between files, once, as `a.ts -> b.ts -> a.ts`. */
export function cycles(imports: ReadonlyMap<string, readonly Import[]>): string[] {
  const found: string[] = [];
  const done = new Set<string>();
  const path: string[] = [];
  const onPath = new Set<string>();
  const visit = (file: string) => {
    path.push(file);
    onPath.add(file);
    for (const i of imports.get(file) ?? []) {
      if (i.target === undefined || !imports.has(i.target)) continue;
      if (onPath.has(i.target)) found.push([...path.slice(path.indexOf(i.target)), i.target].join(' -> '));
      else if (!done.has(i.target)) visit(i.target);
    }
    path.pop();
    onPath.delete(file);
    done.add(file);
  };
  for (const file of imports.keys()) if (!done.has(file)) visit(file);
  return found;
}

function isPanelFile(file: string): boolean {
  return PANEL_FOLDERS.includes(folderOf(file)) || PANEL_FILES.includes(file);
}

function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? '');
}

/**
 * What loading `entry` loads before any of its code runs (static imports, followed through src), and the
 * chain that reaches each panel file or package it should not: `cli/node.ts -> main/panel.ts`.
 */
function panelReachedFrom(entry: string): string[] {
  const reached: string[] = [];
  const chainTo = new Map<string, string[]>([[entry, [entry]]]);
  const queue = [entry];
  for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
    const chain = chainTo.get(file) ?? [file];
    for (const i of IMPORTS.get(file) ?? []) {
      if (i.lazy) continue;
      if (i.target === undefined) {
        if (!i.specifier.startsWith('.') && PANEL_PACKAGES.includes(packageOf(i.specifier))) {
          reached.push([...chain, i.specifier].join(' -> '));
        }
        continue;
      }
      if (chainTo.has(i.target)) continue;
      chainTo.set(i.target, [...chain, i.target]);
      if (isPanelFile(i.target)) reached.push([...chain, i.target].join(' -> '));
      else queue.push(i.target);
    }
  }
  return reached;
}

describe('imports run one way (domain <- platform <- store/agent <- services <- http/workers <- main <- cli)', () => {
  it('every folder of src is a known layer', () => {
    assert.deepEqual(
      [...new Set(FILES.map(folderOf))].filter((folder) => MAY_IMPORT[folder] === undefined),
      [],
      'a new folder of src needs its place in MAY_IMPORT',
    );
  });

  it('no file imports a layer above its own, and http reaches the store only through services', () => {
    const wrong = wrongWayImports(IMPORTS);
    assert.deepEqual(wrong, [], `imports that run the wrong way:\n  ${wrong.join('\n  ')}`);
  });

  it('no cycle between files', () => {
    const found = cycles(IMPORTS);
    assert.deepEqual(found, [], `import cycles:\n  ${found.join('\n  ')}`);
  });

  it('finds a wrong-way import and a cycle when there is one (the check can fail)', () => {
    const upward: Import = { specifier: '../http/app.ts', target: 'http/app.ts', line: 3, lazy: false };
    const lazyUpward: Import = { specifier: '../cli/main.ts', target: 'cli/main.ts', line: 9, lazy: true };
    const wrong = wrongWayImports(
      new Map([
        ['domain/errors.ts', [upward, lazyUpward]],
        ['http/app.ts', []],
      ]),
    );
    assert.deepEqual(wrong, [
      "src/domain/errors.ts:3 imports '../http/app.ts' (domain may not import http)",
      "src/domain/errors.ts:9 imports '../cli/main.ts' (domain may not import cli)",
    ]);
    const cycle = new Map<string, Import[]>([
      ['domain/clock.ts', [{ specifier: './errors.ts', target: 'domain/errors.ts', line: 1, lazy: false }]],
      ['domain/errors.ts', [{ specifier: './clock.ts', target: 'domain/clock.ts', line: 1, lazy: false }]],
    ]);
    assert.deepEqual(cycles(cycle), ['domain/clock.ts -> domain/errors.ts -> domain/clock.ts']);
  });
});

describe('the console: pages stand alone', () => {
  const consoleImports = importGraph(CONSOLE_SRC, ['.ts', '.tsx']);

  it('no page imports another page (what pages share lives beside them in console/src)', () => {
    const found = pageToPageImports(consoleImports);
    assert.deepEqual(found, [], `pages importing pages:\n  ${found.join('\n  ')}`);
  });

  it('no cycle between files', () => {
    const found = cycles(consoleImports);
    assert.deepEqual(found, [], `import cycles:\n  ${found.join('\n  ')}`);
  });

  it('finds a page that imports another page (the check can fail)', () => {
    const imports = new Map<string, Import[]>([
      ['pages/device.tsx', [{ specifier: './devices.tsx', target: 'pages/devices.tsx', line: 30, lazy: false }]],
      ['pages/devices.tsx', [{ specifier: '../ui.tsx', target: 'ui.tsx', line: 2, lazy: false }]],
    ]);
    assert.deepEqual(pageToPageImports(imports), ["pages/device.tsx:30 imports './devices.tsx'"]);
  });
});

describe('the node agent loads no panel module', () => {
  it(
    'src/cli/node.ts and what it imports reach no store, ' + 'service, http, worker or panel file, no database driver',
    () => {
      const reached = panelReachedFrom('cli/node.ts');
      assert.deepEqual(reached, [], `the node agent loads the panel:\n  ${reached.join('\n  ')}`);
    },
  );

  it('the CLI entry loads each command when it runs, so `vpn-panel node` loads nothing of the others', () => {
    const reached = panelReachedFrom('cli/main.ts');
    assert.deepEqual(reached, [], `bin/vpn-panel.js loads the panel before dispatching:\n  ${reached.join('\n  ')}`);
  });

  it('a `vpn-panel node` process loads no panel module or database driver', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vpn-panel-loads-'));
    try {
      const record = join(dir, 'loaded.txt');
      const hook = fileURLToPath(new URL('../support/record-loads.ts', import.meta.url));
      const cli = join(ROOT, 'bin', 'vpn-panel.js');
      // An unknown option stops the command once its modules are loaded, before it configures anything.
      const stderr = await new Promise<string>((done) => {
        const env = { ...process.env, RECORD_LOADS_FILE: record };
        const args = ['--import', hook, cli, 'node', '--no-such-option'];
        execFile(process.execPath, args, { env, cwd: ROOT }, (_error, _stdout, stderr) => done(stderr));
      });
      assert.match(stderr, /no-such-option/, 'the node command ran and refused the option');
      const loaded = readFileSync(record, 'utf8')
        .split('\n')
        .filter((url) => url.startsWith('file:'));
      const files = loaded.map((url) => relative(ROOT, fileURLToPath(url)));
      assert.ok(files.includes('src/cli/node.ts'), 'the node command was loaded');
      const panel = files.filter((file) => {
        const inSrc = file.startsWith('src/') ? file.slice('src/'.length) : undefined;
        if (inSrc !== undefined) return isPanelFile(inSrc);
        return PANEL_PACKAGES.some((name) => file.startsWith(`node_modules/${name}/`));
      });
      assert.deepEqual(panel, [], `vpn-panel node loaded:\n  ${panel.join('\n  ')}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
