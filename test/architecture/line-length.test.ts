/**
 * Every line of the tracked sources stays within 120 characters: Biome formats to that width but leaves string
 * literals and comments as written, so this test holds the rest.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAX_LINE = 120;
/** Generated from the OpenAPI document, not written by hand. */
const GENERATED = new Set(['sdk/typescript/src/schema.ts']);

function trackedSources(): string[] {
  const out = execFileSync('git', ['ls-files', '-z', '*.ts', '*.tsx', '*.js'], { cwd: ROOT, encoding: 'utf8' });
  return out.split('\0').filter((file) => file !== '' && !GENERATED.has(file));
}

describe('line length', () => {
  it(`keeps every line of the tracked .ts, .tsx and .js files within ${MAX_LINE} characters`, () => {
    const files = trackedSources();
    assert.ok(files.length > 0, 'git ls-files found no sources');
    const long = files.flatMap((file) =>
      readFileSync(join(ROOT, file), 'utf8')
        .split('\n')
        .flatMap((line, i) => (line.length > MAX_LINE ? [`${file}:${i + 1} (${line.length} characters)`] : [])),
    );
    assert.deepEqual(long, []);
  });
});
