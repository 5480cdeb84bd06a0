/** docs/api.md "Idempotency": a key is remembered 24 hours, per owner (an API key or a console user). */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
