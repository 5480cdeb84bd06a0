import { AppError } from './errors.ts';

/**
 * Characters no name or identifier may hold. They reach terminals (`vpn-panel activity`, `keys list`),
 * log lines, mail subjects and bodies and client configs raw, where they could move the cursor, recolour
 * or clear a screen (ESC), forge a line (CR, LF, U+2028/2029), cut a C string (NUL), or show text in
 * another order than it is stored (bidirectional overrides and isolates, "Trojan Source"):
 * - C0 controls U+0000-U+001F (tab included), DEL U+007F, C1 controls U+0080-U+009F;
 * - the line and paragraph separators U+2028 and U+2029;
 * - bidi embeddings and overrides U+202A-U+202E and isolates U+2066-U+2069;
 * - lone UTF-16 surrogates, which are no character at all (stored, they would come back as U+FFFD).
 * Everything else passes, so names in any script and with emoji stay possible (ZWJ, LRM and RLM too:
 * they join or mark a single character and cannot reorder a run).
 * The JSON Schema pattern leaves lone surrogates out: engines over code points (Rust's, which schemathesis checks
 * patterns with, Python's) can neither compile a surrogate range nor draw text for `\p{Cs}`, so a client of the
 * document would drop the pattern. Only a JSON `\uD800` escape can make one (percent-decoding never does), and
 * the body parser refuses those anywhere in a body (`pathOfLoneSurrogate`); `isPlainText` refuses them too.
 */
const UNSAFE_CLASS = '\\u0000-\\u001F\\u007F-\\u009F\\u2028\\u2029\\u202A-\\u202E\\u2066-\\u2069';

/** JSON Schema `pattern` of plain text: none of the characters above but lone surrogates. */
export const PLAIN_TEXT_PATTERN = `^[^${UNSAFE_CLASS}]*$`;

const PLAIN_TEXT = new RegExp(PLAIN_TEXT_PATTERN, 'u');
/** With the `u` flag, a surrogate pair is one code point: this finds only a lone surrogate. */
const LONE_SURROGATE = /\p{Cs}/u;

export function isPlainText(text: string): boolean {
  return PLAIN_TEXT.test(text) && !LONE_SURROGATE.test(text);
}

/**
 * The path (keys and indexes) to the first key or string of a parsed JSON value that holds a lone surrogate,
 * or undefined when none does. Iterative, like `pathBeyondDepth`.
 */
export function pathOfLoneSurrogate(value: unknown): string[] | undefined {
  const stack: { value: unknown; path: string[] }[] = [{ value, path: [] }];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    if (typeof item.value === 'string' && LONE_SURROGATE.test(item.value)) return item.path;
    if (typeof item.value !== 'object' || item.value === null) continue;
    for (const [key, child] of Object.entries(item.value)) {
      const path = [...item.path, key];
      if (LONE_SURROGATE.test(key)) return path;
      stack.push({ value: child, path });
    }
  }
  return undefined;
}

/** Refuses text with a character of UNSAFE_CLASS, naming `field`: for input that no schema checked (the CLI). */
export function requirePlainText(field: string, text: string): void {
  if (!isPlainText(text)) {
    const what = 'control, line-separator or bidirectional-override characters';
    throw new AppError('validation_failed', `${field} must not contain ${what}`, {
      [field]: 'control characters are not allowed',
    });
  }
}
