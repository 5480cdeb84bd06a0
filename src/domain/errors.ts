/**
 * The one error type of the service. Every failure a client may see is an AppError with a code of
 * docs/decisions.md "Error codes"; src/http/errors.ts maps each code to its HTTP status and the error
 * body of docs/api.md "Errors".
 */
export type ErrorCode =
  | 'bad_request'
  | 'unauthorized'
  | 'insufficient_scope'
  | 'csrf_check_failed'
  | 'not_found'
  | 'method_not_allowed'
  | 'server_full'
  | 'no_server_available'
  | 'idempotency_key_in_use'
  | 'name_taken'
  | 'server_has_devices'
  | 'device_limit_reached'
  | 'last_admin'
  | 'request_timeout'
  | 'payload_too_large'
  | 'validation_failed'
  | 'idempotency_key_reused'
  | 'rate_limited'
  | 'apply_failed'
  | 'deploy_failed'
  | 'internal_error'
  | 'service_unavailable';

/** Input names mapped to what is wrong with each. */
export type ErrorFields = Record<string, string>;

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly fields: ErrorFields;
  /** Seconds a client should wait before trying again (429, and 409 for a running idempotent request). */
  readonly retryAfterSeconds: number | undefined;

  /** `cause`: what went wrong underneath, for the log only (it may name internal URLs); never in the body. */
  constructor(code: ErrorCode, message: string, fields: ErrorFields = {}, retryAfterSeconds?: number, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'AppError';
    this.code = code;
    this.fields = fields;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** Several steps that failed at once (a node driver's): `failures` lists each, without the action around them. */
export class FailureListError extends Error {
  readonly failures: readonly string[];

  constructor(message: string, failures: readonly string[]) {
    super(message);
    this.failures = failures;
  }
}

/** What went wrong, as one line for a message or the log: the failures of a list, else the error's message. */
export function messageOf(error: unknown): string {
  if (error instanceof FailureListError) return error.failures.join('; ');
  return error instanceof Error ? error.message : String(error);
}
