import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The id of the API request whose work is running, so a change records it without every service
 * passing it along. Only requests that may change something set it (src/http/app.ts); reads and
 * the CLI and background work run without one.
 */
const requestIds = new AsyncLocalStorage<string>();

export function withRequestId<T>(requestId: string, work: () => T): T {
  return requestIds.run(requestId, work);
}

/** Runs work that only starts in a request but is not part of it (a worker woken up), so it records no request id. */
export function outsideRequest<T>(work: () => T): T {
  return requestIds.exit(work);
}

export function currentRequestId(): string | null {
  return requestIds.getStore() ?? null;
}
