/** The rules of a new console password (domain/passwords.ts, common-passwords.ts), for the CLI and the API alike. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isCommonPassword } from '../../src/domain/common-passwords.ts';
import { AppError } from '../../src/domain/errors.ts';
import { newPassword } from '../../src/domain/passwords.ts';

function problemOf(password: string): string | undefined {
  try {
    newPassword(password);
    return undefined;
  } catch (error) {
    assert.ok(error instanceof AppError && error.code === 'validation_failed', String(error));
    return error.fields.password;
  }
}

describe('a new console password', () => {
  it('has 12 to 1024 characters, not only whitespace', () => {
    assert.equal(problemOf('elevenchars'), '12 to 1024 characters');
    assert.equal(problemOf('x'.repeat(1025)), '12 to 1024 characters');
    for (const blank of [' '.repeat(12), '\t'.repeat(12), ' \n\u00a0\u2003'.repeat(3), '\u3000'.repeat(20)])
      assert.equal(problemOf(blank), 'not only spaces', JSON.stringify(blank));
  });

  it('is none of the most common, whatever its case, spaces, and the digits and signs around it', () => {
    for (const common of [
      'password1234',
      'PASSWORD1234',
      'Pass Word 1234',
      'P@ssw0rd2024!',
      '!!password!!',
      '2024password',
      'qwerty123456',
      'Qwertyuiop12',
      'asdfghjkl;',
      '123456789012',
      '098765432109',
      '1qaz2wsx3edc',
      'q1w2e3r4t5y6',
      'abcdefghijkl',
      'aaaaaaaaaaaa',
      '123123123123',
      'qwertyqwerty',
      'passwordpassword1',
      'iloveyou2024',
      'Correct Horse Battery Staple',
      'admin12345678',
      'wireguard1234',
      '1qaz2wsx1234',
      'Trustno1trustno1',
    ]) {
      assert.equal(isCommonPassword(common), true, common);
      if ([...common].length >= 12) assert.equal(problemOf(common), 'too common', common);
    }
  });

  it('takes a password that is not on the list, also one built from its words', () => {
    for (const fine of [
      'correct horse battery',
      'bob password 123',
      'purple monkey dishwasher',
      'dragon monkey tiger',
      'Tr0ub4dor&3 extended',
      'qwertyuiop 7 xylophone',
      'zq8!Lm#2vR0p',
      'contraseña segura del día',
      '8372!9@1#0$5',
      '😀😁😂🤣😃😄😅😆😉😊😋😎',
    ]) {
      assert.equal(isCommonPassword(fine), false, fine);
      assert.equal(problemOf(fine), undefined, fine);
    }
  });
});
