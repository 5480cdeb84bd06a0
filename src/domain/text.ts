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
 * The pattern is meant for a `u` regular expression (Ajv's default), where a surrogate pair is one
 * code point and the class below only matches a lone surrogate. Surrogates are named by their category,
 * `\p{Cs}`, not as the range U+D800-U+DFFF: engines over code points (Rust's, which schemathesis checks
 * patterns with, Python's) cannot compile a surrogate range, and a client of the document would drop it.
 */
const UNSAFE_CLASS = '\\u0000-\\u001F\\u007F-\\u009F\\u2028\\u2029\\u202A-\\u202E\\u2066-\\u2069\\p{Cs}';

/** JSON Schema `pattern` of plain text: none of the characters above. */
export const PLAIN_TEXT_PATTERN = `^[^${UNSAFE_CLASS}]*$`;

const PLAIN_TEXT = new RegExp(PLAIN_TEXT_PATTERN, 'u');

export function isPlainText(text: string): boolean {
  return PLAIN_TEXT.test(text);
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
