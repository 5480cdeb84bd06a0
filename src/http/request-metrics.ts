import type { PanelObserver } from '../services/metrics.ts';
import type { Api } from './api.ts';

/** The route of a request that matched none: one label value for all of them, whatever their URL. */
export const UNMATCHED_ROUTE = 'unmatched';

/**
 * Tells the observer of every answer by its route's template, never the URL: ids and share tokens stay out of
 * the metrics, and their labels stay few. Without an observer no hook runs.
 */
export function countAnswers(app: Api, observer: PanelObserver | undefined): void {
  if (observer === undefined) return;
  app.addHook('onResponse', (request, reply, done) => {
    // `routeOptions` builds a new object at each read: the onRequest hook read it once.
    const route = request.routeTemplate ?? request.routeOptions.url ?? UNMATCHED_ROUTE;
    observer.httpRequest(request.method, route, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
}
