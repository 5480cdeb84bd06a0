/**
 * The docs hold together for a reader of the repository alone (issue 25 item 4): README.md stays a page or two,
 * every relative link of a tracked .md file reaches a file (and its heading, when the link names one), and no .md
 * cites a paper outside the repository (`../shared`, "DESIGN §3", "spec §4.2"): docs/decisions.md and docs/api.md
 * hold what those papers decided. Nor does any other tracked file (code, scripts, units, JSON): its comments cite
 * those docs by heading instead.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const README_MAX_LINES = 220;
/** Citations of papers a reader of the repository does not have. */
const OUTSIDE_PAPERS = /\.\.\/shared\/|\/work\/shared\/|\bDESIGN ?§|\bspec ?§/i;
/** The same in code, where `../shared/` may be a module path; a bare "(§4.3)" is the spec's too, unlike an RFC's. */
const OUTSIDE_PAPERS_IN_CODE = /\/work\/shared\/|\bDESIGN ?§|\bspec ?§|(?<!\bRFC \d+ )§ ?\d/i;
/** Holds the citations above as its test data. */
const THIS_FILE = 'test/architecture/docs.test.ts';
const LINK = /!?\[[^\]]*\]\(([^()\s]+)(?:\s+"[^"]*")?\)/g;
const FENCE = /^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm;

function tracked(): string[] {
  const out = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' });
  return out.split('\0').filter((file) => file !== '');
}

/** The text where a link is a link: without fenced blocks and code spans. */
function prose(markdown: string): string {
  return markdown.replace(FENCE, '').replace(/(`+)[\s\S]*?\1/g, '');
}

/** The anchors GitHub gives a file's headings: lower case, punctuation dropped, spaces as `-`, repeats numbered. */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const [, text] of markdown.replace(FENCE, '').matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const slug = (text ?? '')
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N} _-]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** Each relative link of `file` (a path from the root) that reaches no file, or no heading of it. */
export function brokenLinks(file: string, markdown: string, read: (path: string) => string | undefined): string[] {
  return [...prose(markdown).matchAll(LINK)].flatMap(([, target = '']) => {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return [];
    const [path = '', anchor] = target.split('#');
    const resolved = path === '' ? file : join(dirname(file), decodeURIComponent(path));
    const text = path === '' ? markdown : read(resolved);
    if (text === undefined) return [`${file}: ${target} (no such file)`];
    if (anchor === undefined || anchor === '' || !resolved.endsWith('.md')) return [];
    return anchorsOf(text).has(anchor) ? [] : [`${file}: ${target} (no such heading)`];
  });
}

/** The lines of a file that cite a paper outside the repository (of a .md; of code with OUTSIDE_PAPERS_IN_CODE). */
export function outsideCitations(file: string, text: string, papers = OUTSIDE_PAPERS): string[] {
  return text.split('\n').flatMap((line, i) => (papers.test(line) ? [`${file}:${i + 1}: ${line}`] : []));
}

function readFromRoot(path: string): string | undefined {
  const full = join(ROOT, path);
  if (!existsSync(full)) return undefined;
  return path.endsWith('.md') ? readFileSync(full, 'utf8') : '';
}

describe('the docs', () => {
  const all = tracked();
  const files = all.filter((file) => file.endsWith('.md'));

  it(`keep README.md within ${README_MAX_LINES} lines`, () => {
    const lines = readFileSync(join(ROOT, 'README.md'), 'utf8').trimEnd().split('\n').length;
    assert.ok(lines <= README_MAX_LINES, `README.md has ${lines} lines; move the detail into docs/`);
  });

  it('link only to files and headings that exist', () => {
    assert.ok(files.includes('README.md'), 'git ls-files found no README.md');
    const broken = files.flatMap((file) => brokenLinks(file, readFileSync(join(ROOT, file), 'utf8'), readFromRoot));
    assert.deepEqual(broken, []);
  });

  it('cite no paper outside the repository', () => {
    const cited = files.flatMap((file) => outsideCitations(file, readFileSync(join(ROOT, file), 'utf8')));
    assert.deepEqual(cited, [], 'cite docs/decisions.md or docs/api.md by heading instead');
  });

  it('are what code, scripts and settings cite too, not a paper outside the repository', () => {
    const texts = all
      .filter((file) => !file.endsWith('.md') && file !== THIS_FILE && lstatSync(join(ROOT, file)).isFile())
      .map((file) => ({ file, text: readFileSync(join(ROOT, file), 'utf8') }))
      .filter(({ text }) => !text.includes('\0'));
    assert.ok(
      texts.some(({ file }) => file === 'src/domain/devices.ts'),
      'git ls-files found no src/domain/devices.ts',
    );
    const cited = texts.flatMap(({ file, text }) => outsideCitations(file, text, OUTSIDE_PAPERS_IN_CODE));
    assert.deepEqual(cited, [], 'cite docs/decisions.md or docs/api.md by heading, e.g. docs/api.md "Paging"');
  });

  it('find a broken link or an outside citation where there is one (the checks can fail)', () => {
    const docs: Record<string, string> = {
      'docs/a.md': '# A page\n\n## Keys and `all` scopes\n\n## Keys and `all` scopes\n',
    };
    const page = [
      'See [a](a.md#keys-and-all-scopes), [again](a.md#keys-and-all-scopes-1), [top](#the-page),',
      'and [web](https://x.test).',
      'Broken: [gone](gone.md), [heading](a.md#nothing), [here](#nowhere).',
      'Not links: `[code](gone.md)` and',
      '```',
      '[fenced](gone.md)',
      '```',
    ].join('\n');
    const broken = brokenLinks('docs/b.md', `# The page\n\n${page}\n`, (path) => docs[path]);
    assert.deepEqual(broken, [
      'docs/b.md: gone.md (no such file)',
      'docs/b.md: a.md#nothing (no such heading)',
      'docs/b.md: #nowhere (no such heading)',
    ]);
    const cited = outsideCitations('x.md', 'as spec §4.2 says\nDESIGN §3\nsee ../shared/DESIGN.md\nspecial §');
    assert.equal(cited.length, 3);
    const code = [
      '/** Paging of spec §4.1. */',
      "it('has every field of Spec §2.1')",
      '# defaults of DESIGN §3',
      '// all-or-nothing (§4.3)',
      '// the anycast address of RFC 4291 §2.6.1, and docs/api.md "Paging"',
      "import { x } from '../shared/x.ts';",
    ].join('\n');
    assert.deepEqual(
      outsideCitations('x.ts', code, OUTSIDE_PAPERS_IN_CODE).map((line) => line.slice(0, 6)),
      ['x.ts:1', 'x.ts:2', 'x.ts:3', 'x.ts:4'],
    );
  });
});
