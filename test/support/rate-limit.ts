/** What a rate-limit test reads of one answer of `GET /api/v1/nodes`. */
export interface RateAnswer {
  status: number;
  retryAfter: string | null;
  rateLimit: string | null;
  policy: string | null;
  code: string | undefined;
}

export async function getNodes(url: string, key: string): Promise<RateAnswer> {
  const response = await fetch(`${url}/api/v1/nodes`, { headers: { authorization: `Bearer ${key}` } });
  const body = await response.json();
  return {
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    rateLimit: response.headers.get('ratelimit'),
    policy: response.headers.get('ratelimit-policy'),
    code: body.error?.code,
  };
}

/** Sends `count` requests at once, spread over the given panels; returns the answers and the seconds it took. */
export async function burst(
  urls: string[],
  key: string,
  count: number,
): Promise<{ answers: RateAnswer[]; seconds: number }> {
  const started = performance.now();
  const answers = await Promise.all(
    Array.from({ length: count }, (_, i) => getNodes(urls[i % urls.length] ?? '', key)),
  );
  return { answers, seconds: (performance.now() - started) / 1000 };
}

/**
 * docs/api.md "Rate limits": bursts up to 60, then 10 a second; what a GCRA lets through in `seconds` after a
 * full bucket.
 */
export function allowedWithin(seconds: number): number {
  return 60 + Math.ceil(seconds * 10);
}
