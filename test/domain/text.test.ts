import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { METADATA_MAX_BYTES, METADATA_MAX_DEPTH, metadataText } from '../../src/domain/devices.ts';
import { AppError } from '../../src/domain/errors.ts';
import { pathBeyondDepth } from '../../src/domain/json-depth.ts';
import { isPlainText, requirePlainText } from '../../src/domain/text.ts';

function refusedNaming(field: string) {
  return (error: unknown) =>
    error instanceof AppError && error.code === 'validation_failed' && Object.hasOwn(error.fields, field);
}

describe('names and identifiers: plain text', () => {
  const plain = ['laptop', 'Jörg’s Phone', '東京-1', 'ноутбук', 'family 👨‍👩‍👧', 'a\u200Eb', '', 'x'.repeat(1000)];
  for (const text of plain) {
    test(`accepts ${JSON.stringify(text.slice(0, 40))}`, () => assert.equal(isPlainText(text), true));
  }

  const unsafe: Array<[intent: string, char: string]> = [
    ['NUL', '\u0000'],
    ['ESC (terminal escapes)', '\u001B'],
    ['a newline', '\n'],
    ['a carriage return', '\r'],
    ['a tab', '\t'],
    ['the last C0 control', '\u001F'],
    ['DEL', '\u007F'],
    ['the first C1 control', '\u0080'],
    ['CSI in C1', '\u009B'],
    ['the last C1 control', '\u009F'],
    ['the line separator', '\u2028'],
    ['the paragraph separator', '\u2029'],
    ['a right-to-left override', '\u202E'],
    ['a left-to-right embedding', '\u202A'],
    ['a first-strong isolate', '\u2068'],
    ['a pop directional isolate', '\u2069'],
    ['a lone high surrogate', '\uD800'],
    ['a lone low surrogate', '\uDFFF'],
  ];
  for (const [intent, char] of unsafe) {
    test(`refuses ${intent} anywhere in the text`, () => {
      for (const text of [char, `a${char}`, `${char}b`, `name${char}name`]) {
        assert.equal(isPlainText(text), false, JSON.stringify(text));
      }
      assert.throws(() => requirePlainText('name', `x${char}y`), refusedNaming('name'));
    });
  }
  test('the characters right beside the refused ranges pass', () => {
    for (const char of [' ', '~', '\u00A0', '\u2027', '\u202F', '\u2065', '\u206A']) {
      assert.equal(isPlainText(char), true, JSON.stringify(char));
    }
  });
});

/** `{"a":{"a":…}}` `depth` levels deep; made without recursion. */
function nested(depth: number, array = false): unknown {
  let value: unknown = array ? [] : {};
  for (let i = 1; i < depth; i++) value = array ? [value] : { a: value };
  return value;
}

describe('nesting, measured without recursion', () => {
  test('scalars and empty containers', () => {
    assert.equal(pathBeyondDepth(7, 0), undefined);
    assert.equal(pathBeyondDepth(null, 0), undefined);
    assert.deepEqual(pathBeyondDepth({}, 0), []);
    assert.equal(pathBeyondDepth({}, 1), undefined);
  });
  test('names the path to the first container too deep', () => {
    assert.deepEqual(pathBeyondDepth({ ok: 1, metadata: { x: [[{}]] } }, 3), ['metadata', 'x', '0']);
  });
  test('objects and arrays 1,000,000 deep: no stack overflow', () => {
    assert.deepEqual(pathBeyondDepth(nested(1_000_000), 64)?.length, 64);
    assert.deepEqual(pathBeyondDepth(nested(1_000_000, true), 64)?.length, 64);
  });
});

describe('metadata limits', () => {
  test(`accepts metadata ${METADATA_MAX_DEPTH} levels deep`, () => {
    assert.equal(typeof metadataText(nested(METADATA_MAX_DEPTH) as object), 'string');
  });
  for (const depth of [METADATA_MAX_DEPTH + 1, 5_000, 200_000]) {
    test(`refuses metadata ${depth} levels deep naming metadata`, () => {
      assert.throws(() => metadataText(nested(depth) as object), refusedNaming('metadata'));
    });
  }
  test('refuses an array 5,000 deep inside metadata', () => {
    assert.throws(() => metadataText({ list: nested(5_000, true) }), refusedNaming('metadata'));
  });
  test(`accepts ${METADATA_MAX_BYTES} bytes and refuses one more`, () => {
    const fits = { k: 'x'.repeat(METADATA_MAX_BYTES - '{"k":""}'.length) };
    assert.equal(metadataText(fits)?.length, METADATA_MAX_BYTES);
    assert.throws(() => metadataText({ k: `${fits.k}x` }), refusedNaming('metadata'));
  });
});
