/**
 * Short functions and files (issue 25): no function of src/ over 100 lines, no file over 500. A function's
 * lines run from its first token to its closing brace, as the TypeScript parser sees them.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import ts from 'typescript';
import { srcFiles } from '../support/source-files.ts';

const MAX_FILE_LINES = 500;
const MAX_FUNCTION_LINES = 100;

/** Each function of `text` longer than `maxLines`, as `file:line name (N lines)`. */
export function longFunctions(file: string, text: string, maxLines: number): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const lineOf = (pos: number) => source.getLineAndCharacterOfPosition(pos).line + 1;
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
      const first = lineOf(node.getStart(source));
      const lines = lineOf(node.getEnd()) - first + 1;
      const name = node.name?.getText(source) ?? '(anonymous)';
      if (lines > maxLines) found.push(`${file}:${first} ${name} (${lines} lines)`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe('sizes of src/', () => {
  const files = [...srcFiles()].map(([file, text]) => ({ file: `src/${file}`, text }));

  it(`no file over ${MAX_FILE_LINES} lines`, () => {
    const long = files
      .map(({ file, text }) => ({ file, lines: text.split('\n').length }))
      .filter(({ lines }) => lines > MAX_FILE_LINES)
      .map(({ file, lines }) => `${file} (${lines} lines)`);
    assert.deepEqual(long, [], `split these files:\n  ${long.join('\n  ')}`);
  });

  it(`no function over ${MAX_FUNCTION_LINES} lines`, () => {
    const long = files.flatMap(({ file, text }) => longFunctions(file, text, MAX_FUNCTION_LINES));
    assert.deepEqual(long, [], `split these functions:\n  ${long.join('\n  ')}`);
  });

  it('measures a function, a method and an arrow function (the check can fail)', () => {
    const body = (n: number) => Array.from({ length: n }, (_, i) => `  const a${i} = ${i};`).join('\n');
    const text = [
      `function short() {\n${body(3)}\n}`,
      `function long() {\n${body(4)}\n}`,
      `class C {\n  method() {\n${body(4)}\n  }\n}`,
      `const arrow = () => {\n${body(4)}\n};`,
    ].join('\n');
    assert.deepEqual(longFunctions('x.ts', text, 5), [
      'x.ts:6 long (6 lines)',
      'x.ts:13 method (6 lines)',
      'x.ts:20 (anonymous) (6 lines)',
    ]);
  });
});
