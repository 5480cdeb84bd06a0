/**
 * KeptHistogram, the API's duration histogram, kept apart from prom-client (no internal of it overridden): its
 * scrape is prom-client's own histogram's text to the byte for the same observations (the exposition Prometheus
 * and the Grafana dashboard read did not change with it).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Counter, Histogram, Registry } from 'prom-client';
import { KeptHistogram, scrapeText } from '../../src/main/kept-histogram.ts';

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const CONFIG = { name: 'test_duration_seconds', help: 'Time to answer, by method and route.', buckets: BUCKETS };
const LABEL_NAMES = ['method', 'route'] as const;

/** Observations of several series, interleaved: under, on and between bounds, past the last, a quote to escape. */
const OBSERVATIONS: [{ method: string; route: string }, number][] = [
  [{ method: 'GET', route: '/api/v1/servers' }, 0.0003],
  [{ method: 'POST', route: '/api/v1/devices' }, 0.0025],
  [{ method: 'GET', route: '/api/v1/servers' }, 0.001],
  [{ method: 'GET', route: 'unmatched' }, 75],
  [{ method: 'GET', route: '/api/v1/servers' }, 0.0123456789],
  [{ method: 'POST', route: '/api/v1/devices' }, 60],
  [{ method: 'GET', route: '/s/"quoted"\\' }, 0],
  [{ method: 'GET', route: '/api/v1/servers' }, 0.1 + 0.2],
];

describe('KeptHistogram', () => {
  it("scrapes as prom-client's histogram does for the same observations, as text and as JSON", async () => {
    const theirs = new Registry();
    const histogram = new Histogram({ ...CONFIG, labelNames: LABEL_NAMES, registers: [theirs] });
    const kept = new KeptHistogram<(typeof LABEL_NAMES)[number]>(CONFIG);
    const series = new Map<string, ReturnType<typeof kept.series>>();
    for (const [labels, seconds] of OBSERVATIONS) {
      histogram.observe(labels, seconds);
      const key = `${labels.method} ${labels.route}`;
      const one = series.get(key) ?? kept.series(labels);
      series.set(key, one);
      one.observe(seconds);
    }
    const text = await scrapeText(new Registry(), [kept]);
    assert.equal(text, await theirs.metrics());
    assert.match(text, /test_duration_seconds_bucket\{le="\+Inf",method="GET",route="\/api\/v1\/servers"\} 4/);
    assert.deepEqual(kept.get(), await histogram.get());
  });

  it("is written after the registry's own metrics, as one registry holding both writes them", async () => {
    const theirs = new Registry();
    const ours = new Registry();
    for (const registry of [theirs, ours]) {
      new Counter({ name: 'test_answers_total', help: 'Answers.', registers: [registry] }).inc(3);
    }
    const histogram = new Histogram({ ...CONFIG, labelNames: LABEL_NAMES, registers: [theirs] });
    const kept = new KeptHistogram<(typeof LABEL_NAMES)[number]>(CONFIG);
    histogram.observe({ method: 'GET', route: '/x' }, 0.2);
    kept.series({ method: 'GET', route: '/x' }).observe(0.2);
    assert.equal(await scrapeText(ours, [kept]), await theirs.metrics());
  });

  it('scrapes no series before the first observation, as prom-client does', async () => {
    const theirs = new Registry();
    new Histogram({ ...CONFIG, labelNames: LABEL_NAMES, registers: [theirs] });
    const kept = new KeptHistogram<(typeof LABEL_NAMES)[number]>(CONFIG);
    assert.equal(await scrapeText(new Registry(), [kept]), await theirs.metrics());
  });
});
