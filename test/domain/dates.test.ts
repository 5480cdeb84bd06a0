import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { instantMs, normaliseInstant } from '../../src/domain/clock.ts';
import { AppError } from '../../src/domain/errors.ts';

describe('date-times that name a real instant', () => {
  const real: Array<[text: string, iso: string]> = [
    ['2026-06-30T23:59:59Z', '2026-06-30T23:59:59.000Z'],
    ['2026-06-30t23:59:59z', '2026-06-30T23:59:59.000Z'],
    ['2026-01-01T01:00:00+01:00', '2026-01-01T00:00:00.000Z'],
    ['2025-12-31T23:30:00-00:30', '2026-01-01T00:00:00.000Z'],
    ['2026-03-01T00:00:00.1234567Z', '2026-03-01T00:00:00.123Z'],
    ['2028-02-29T12:00:00Z', '2028-02-29T12:00:00.000Z'],
    ['2000-02-29T00:00:00Z', '2000-02-29T00:00:00.000Z'],
    ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000Z'],
    ['0050-06-01T00:00:00Z', '0050-06-01T00:00:00.000Z'],
    ['9999-12-31T23:59:59.999Z', '9999-12-31T23:59:59.999Z'],
    ['2026-05-05T10:00:00+23:59', '2026-05-04T10:01:00.000Z'],
  ];
  for (const [text, iso] of real) {
    test(`${text} is ${iso}`, () => {
      assert.equal(normaliseInstant(text, 'expires_at'), iso);
      assert.equal(instantMs(text), Date.parse(iso));
    });
  }

  const unreal: Array<[intent: string, text: string]> = [
    ['a leap second', '2026-06-30T23:59:60Z'],
    ['a leap second in an offset', '2026-07-01T01:59:60+02:00'],
    ['year 0000', '0000-01-01T00:00:00Z'],
    ['year 1 that is year 0 in UTC', '0001-01-01T00:30:00+01:00'],
    ['year 9999 that is year 10000 in UTC', '9999-12-31T23:59:59-01:00'],
    ['month 13', '2026-13-01T00:00:00Z'],
    ['month 00', '2026-00-10T00:00:00Z'],
    ['day 00', '2026-01-00T00:00:00Z'],
    ['day 31 in a 30-day month', '2026-04-31T00:00:00Z'],
    ['Feb 29 in a non-leap year', '2026-02-29T00:00:00Z'],
    ['Feb 29 in 1900 (not leap)', '1900-02-29T00:00:00Z'],
    ['Feb 30', '2028-02-30T00:00:00Z'],
    ['hour 24', '2026-01-01T24:00:00Z'],
    ['minute 60', '2026-01-01T10:60:00Z'],
    ['offset +24:00', '2026-01-01T00:00:00+24:00'],
    ['offset +23:60', '2026-01-01T00:00:00+23:60'],
    ['no offset', '2026-01-01T00:00:00'],
    ['an offset without colon', '2026-01-01T00:00:00+0100'],
    ['a space for T', '2026-01-01 00:00:00Z'],
    ['a date alone', '2026-01-01'],
    ['a five-digit year', '20260-01-01T00:00:00Z'],
    ['an extended year', '+002026-01-01T00:00:00Z'],
    ['a fraction without digits', '2026-01-01T00:00:00.Z'],
    ['a trailing newline', '2026-01-01T00:00:00Z\n'],
    ['non-ASCII digits', '２０２６-01-01T00:00:00Z'],
    ['empty', ''],
  ];
  for (const [intent, text] of unreal) {
    test(`refuses ${intent}: ${JSON.stringify(text)}`, () => {
      assert.equal(instantMs(text), undefined);
      assert.throws(
        () => normaliseInstant(text, 'expires_at'),
        (error: unknown) =>
          error instanceof AppError && error.code === 'validation_failed' && Object.hasOwn(error.fields, 'expires_at'),
      );
    });
  }

  test('null stays null (never expires)', () => assert.equal(normaliseInstant(null, 'expires_at'), null));
});
