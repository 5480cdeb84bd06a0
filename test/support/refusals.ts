import assert from 'node:assert/strict';
import { AppError } from '../../src/domain/errors.ts';

/** Asserts a 422 `validation_failed` whose `fields` names `field` (docs/api.md "Errors": fields names the inputs). */
export function assertRefused(fn: () => unknown, field: string): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof AppError, `expected an AppError, got ${String(error)}`);
    assert.equal(error.code, 'validation_failed');
    assert.ok(Object.hasOwn(error.fields, field), `fields ${JSON.stringify(error.fields)} should name ${field}`);
    return true;
  });
}
