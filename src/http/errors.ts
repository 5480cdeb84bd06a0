import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { ConnectionError, FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { noSuchResource } from '../domain/error-cases.ts';
import { AppError, type ErrorCode, type ErrorFields } from '../domain/errors.ts';
import { dependencyUnavailable } from '../platform/unavailable.ts';

/** The one table from error code to HTTP status. */
export const ERROR_STATUS: Record<ErrorCode, number> = {
  bad_request: 400,
  unauthorized: 401,
  insufficient_scope: 403,
  csrf_check_failed: 403,
  not_found: 404,
  method_not_allowed: 405,
  server_full: 409,
  no_server_available: 409,
  idempotency_key_in_use: 409,
  name_taken: 409,
  server_has_devices: 409,
  device_limit_reached: 409,
  last_admin: 409,
  request_timeout: 408,
  payload_too_large: 413,
  validation_failed: 422,
  idempotency_key_reused: 422,
  rate_limited: 429,
  apply_failed: 502,
  deploy_failed: 502,
  internal_error: 500,
  service_unavailable: 503,
};

export interface ErrorBody {
  error: { code: ErrorCode; message: string; fields: ErrorFields };
}

export function errorBody(error: AppError): ErrorBody {
  return { error: { code: error.code, message: error.message, fields: error.fields } };
}

/** `/a/b` → `a.b`, so `fields` names inputs the way a client wrote them. */
function fieldName(instancePath: string, child?: string): string {
  const parts = instancePath.split('/').filter((p) => p !== '');
  if (child !== undefined) parts.push(child);
  return parts.join('.');
}

/** The part of an Ajv error the client is told about. */
interface SchemaError {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
  message?: string;
}

export function validationFields(errors: readonly SchemaError[], part: string): ErrorFields {
  const fields: ErrorFields = {};
  for (const e of errors) {
    if (e.keyword === 'additionalProperties') {
      fields[fieldName(e.instancePath, String(e.params.additionalProperty))] = 'unknown field';
    } else if (e.keyword === 'required') {
      fields[fieldName(e.instancePath, String(e.params.missingProperty))] = 'required';
    } else {
      const name = fieldName(e.instancePath) || part;
      fields[name] ??= e.message ?? 'invalid';
    }
  }
  return fields;
}

function describe(fields: ErrorFields): string {
  return Object.entries(fields)
    .map(([name, problem]) => `${name}: ${problem}`)
    .join('; ');
}

function isFastifyError(error: unknown): error is FastifyError {
  return error instanceof Error && 'code' in error && typeof error.code === 'string';
}

/** What a 503 asks a client to wait: a database restart or failover takes seconds. */
const UNAVAILABLE_RETRY_SECONDS = 5;

/** Whatever was thrown, as the AppError a client sees. Unknown errors become a bare 500. */
export function toAppError(error: unknown): AppError {
  if (error instanceof AppError) return error;
  if (isFastifyError(error)) {
    if (error.validation) {
      const context = error.validationContext ?? 'body';
      const fields = validationFields(error.validation, context);
      if (context === 'body')
        return new AppError('validation_failed', `invalid request body: ${describe(fields)}`, fields);
      // A path id that is not an integer >= 1 names no resource.
      if (context === 'params') return noSuchResource(describe(fields), fields);
      return new AppError(
        'bad_request',
        `invalid ${context === 'headers' ? 'header' : 'query parameter'}: ${describe(fields)}`,
        fields,
      );
    }
    switch (error.code) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return new AppError('payload_too_large', 'the request body is too large');
      case 'FST_ERR_MAX_PARAM_LENGTH':
        return noSuchResource('a path parameter is too long');
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        return new AppError('bad_request', 'send the request body as application/json', {
          'content-type': 'must be application/json',
        });
    }
    if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
      return new AppError('bad_request', error.message);
    }
  }
  if (error instanceof SyntaxError)
    return new AppError('bad_request', `the request body is not valid JSON: ${error.message}`);
  if (dependencyUnavailable(error)) {
    return new AppError(
      'service_unavailable',
      'the database cannot be reached or its disk is full; try again shortly with the same Idempotency-Key',
      {},
      UNAVAILABLE_RETRY_SECONDS,
    );
  }
  return new AppError(
    'internal_error',
    'internal error; the request id in the X-Request-Id header finds it in the log',
  );
}

export function sendError(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const appError = toAppError(error);
  const status = ERROR_STATUS[appError.code];
  // Fastify closes the connection after any body it could not read, so Node destroys the socket once the
  // 413 is written, while the client is still sending: the rest arrives at a closed socket, the kernel
  // answers with a reset, and the client often sees EPIPE/ECONNRESET instead of the answer. Kept open,
  // Node reads and discards the rest of the body (bounded by the request timeout), and the connection
  // stays usable.
  if (appError.code === 'payload_too_large') reply.removeHeader('connection');
  if (status >= 500) request.log.error({ err: error }, 'request failed');
  if (appError.retryAfterSeconds !== undefined) reply.header('retry-after', String(appError.retryAfterSeconds));
  return reply.code(status).type('application/json').send(errorBody(appError));
}

/**
 * What Node could not make a request of (a timeout while headers or body trickle in, malformed HTTP),
 * answered on the raw socket with the error body of docs/api.md "Errors", as Node's own handler would, then
 * closed.
 */
export function sendClientError(error: ConnectionError, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const problem = error.code === 'HPE_HEADER_OVERFLOW' ? 'the headers are too large' : 'malformed HTTP request';
  const appError =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? new AppError('request_timeout', 'the request did not arrive in time; send headers and body without pauses')
      : new AppError('bad_request', problem);
  const status = ERROR_STATUS[appError.code];
  const body = JSON.stringify(errorBody(appError));
  const head = `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nconnection: close\r\ncontent-type: application/json`;
  // As Fastify's own handler does. No answer is half-written here: a request that timed out is still
  // waiting for its body, and an early answer (a 401, a 413) went out whole.
  if (socket.writable) {
    socket.write(`${head}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  }
  socket.destroy();
}
