import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ERROR_STATUS, toAppError } from '../../src/http/errors.ts';

/** An error as the database drivers throw them: a message and a `code`. */
function driverError(message: string, code: string): Error {
  return Object.assign(new Error(message), { code });
}

const outages: [string, unknown][] = [
  ['PostgreSQL shutting down (57P01)', driverError('terminating connection due to administrator command', '57P01')],
  ['PostgreSQL starting up (57P03)', driverError('the database system is starting up', '57P03')],
  ['PostgreSQL disk full (53100)', driverError('could not extend file: No space left on device', '53100')],
  ['a refused connection', driverError('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
  ['a connection lost mid-query', new Error('Connection terminated unexpectedly')],
  ['a pooled connection that broke', new Error('Client has encountered a connection error and is not queryable')],
  ['SQLite disk full', driverError('database or disk is full', 'SQLITE_FULL')],
  ['SQLite write error', driverError('disk I/O error', 'SQLITE_IOERR_WRITE')],
  ['an outage under a wrapping error', new Error('query failed', { cause: driverError('refused', 'ECONNREFUSED') })],
];

for (const [what, error] of outages) {
  test(`${what}: 503 service_unavailable with Retry-After`, () => {
    const appError = toAppError(error);
    assert.equal(appError.code, 'service_unavailable');
    assert.equal(ERROR_STATUS[appError.code], 503);
    assert.equal(appError.retryAfterSeconds, 5);
    assert.doesNotMatch(appError.message, /5432|ECONNREFUSED|SQLITE/, 'no driver detail in the answer');
  });
}

test('a fault of the panel itself stays 500 internal_error', () => {
  for (const error of [
    new TypeError('x is undefined'),
    driverError('duplicate key', '23505'),
    driverError('constraint', 'SQLITE_CONSTRAINT'),
  ]) {
    assert.equal(toAppError(error).code, 'internal_error', String(error));
  }
});
