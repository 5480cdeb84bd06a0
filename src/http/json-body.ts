import { AppError } from '../domain/errors.ts';
import { pathBeyondDepth } from '../domain/json-depth.ts';
import { pathOfLoneSurrogate } from '../domain/text.ts';
import type { Api } from './api.ts';

/** Room for metadata's own limit (METADATA_MAX_DEPTH) inside a body, far from a stack's limit. */
const BODY_MAX_DEPTH = 64;

/** Only JSON bodies; an empty body counts as none, since POSTs such as usage reset carry nothing. */
export function acceptJsonBodies(app: Api): void {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text === '') return done(null, undefined);
    parseJson(request, text, (error, parsed) => {
      if (error !== null) return done(error, undefined);
      // Whatever runs next (validation, the idempotency fingerprint, a route without a body schema)
      // may walk the body recursively: a deeper one is refused here, naming its top-level field.
      const deep = pathBeyondDepth(parsed, BODY_MAX_DEPTH);
      if (deep !== undefined) {
        const field = deep[0] ?? 'body';
        const fields = { [field]: 'nested too deep' };
        return done(new AppError('validation_failed', `${field} nests deeper than ${BODY_MAX_DEPTH} levels`, fields));
      }
      // A lone surrogate is no character (stored, it comes back as U+FFFD; PostgreSQL's jsonb refuses it).
      const lone = pathOfLoneSurrogate(parsed);
      if (lone === undefined) return done(null, parsed);
      const field = lone.join('.') || 'body';
      done(new AppError('validation_failed', `${field} holds a lone UTF-16 surrogate`, { [field]: 'lone surrogate' }));
    });
  });
}
