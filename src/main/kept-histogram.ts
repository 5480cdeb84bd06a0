import { AggregatorRegistry, type LabelValues, type PrometheusContentType, Registry } from 'prom-client';

/**
 * A sample as prom-client's histogram gives it in its JSON form (`get()`, what `getMetricsAsJSON` lists): the
 * series' labels after `le`, and no exemplar (null on a bucket, undefined on the sum and count, as its own).
 */
interface HistogramSample {
  labels: Record<string, string | number>;
  value: number;
  metricName: string;
  exemplar: null | undefined;
}

/** A metric in prom-client's JSON form: what its `get()` answers and its registries write as text. */
export interface MetricJson {
  name: string;
  help: string;
  type: 'histogram';
  values: HistogramSample[];
  aggregator: 'sum';
}

/** A metric that gives its own samples at each scrape, written by prom-client beside a registry's (scrapeText). */
export interface SampledMetric {
  get(): MetricJson;
}

/**
 * What a scrape answers: `registry`'s metrics, then `sampled`, each in prom-client's text format. prom-client
 * writes a metric only from a registry; `AggregatorRegistry.aggregate` (public API, made for metrics in JSON form
 * from cluster workers) makes one of the sampled metrics, given as one process's, so nothing is summed.
 */
export async function scrapeText(registry: Registry, sampled: readonly SampledMetric[]): Promise<string> {
  if (sampled.length === 0) return registry.metrics();
  const own = AggregatorRegistry.aggregate<PrometheusContentType>([sampled.map((metric) => metric.get())]);
  return Registry.merge([registry, own]).metrics();
}

/**
 * One series of a KeptHistogram. Its observe is a bucket search and three additions, where prom-client's
 * hashes the labels, validates them and looks the series up on every call (a fixed cost of every API answer).
 */
export class KeptSeries<T extends string> {
  readonly #labels: LabelValues<T>;
  readonly #upperBounds: readonly number[];
  /** Observations per bucket, not cumulative; the last one counts those beyond every bound. */
  readonly #counts: number[];
  #sum = 0;
  #count = 0;

  constructor(labels: LabelValues<T>, upperBounds: readonly number[]) {
    this.#labels = labels;
    this.#upperBounds = upperBounds;
    this.#counts = new Array<number>(upperBounds.length + 1).fill(0);
  }

  /** `value` is finite (a duration). */
  observe(value: number): void {
    const bounds = this.#upperBounds;
    let bucket = 0;
    // A value on a bound counts in that bound's bucket (`le`), as with prom-client.
    while (bucket < bounds.length && value > (bounds[bucket] ?? value)) bucket++;
    this.#counts[bucket] = (this.#counts[bucket] ?? 0) + 1;
    this.#sum += value;
    this.#count++;
  }

  /** The samples prom-client's histogram gives for a series, in its order: each `le`, `+Inf`, sum, count. */
  samples(name: string): HistogramSample[] {
    const samples: HistogramSample[] = [];
    let cumulative = 0;
    for (const [i, upperBound] of this.#upperBounds.entries()) {
      cumulative += this.#counts[i] ?? 0;
      samples.push(this.#sample(`${name}_bucket`, { le: upperBound }, cumulative, null));
    }
    samples.push(this.#sample(`${name}_bucket`, { le: '+Inf' }, this.#count, null));
    samples.push(this.#sample(`${name}_sum`, {}, this.#sum, undefined));
    samples.push(this.#sample(`${name}_count`, {}, this.#count, undefined));
    return samples;
  }

  #sample(
    metricName: string,
    le: Record<string, string | number>,
    value: number,
    exemplar: null | undefined,
  ): HistogramSample {
    return { labels: { ...le, ...this.#labels }, value, metricName, exemplar };
  }
}

/**
 * A histogram whose series are kept here (KeptSeries) and observed through `series`, for one observed on every
 * request. It is no prom-client metric: at a scrape it gives the samples prom-client's own histogram would for
 * the same observations (scrapeText writes them), series in the order of their first observation.
 */
export class KeptHistogram<T extends string> implements SampledMetric {
  readonly #name: string;
  readonly #help: string;
  readonly #upperBounds: readonly number[];
  /** In the order of their first observation, as prom-client lists its series. */
  readonly #series: KeptSeries<T>[] = [];

  constructor(configuration: { name: string; help: string; buckets: readonly number[] }) {
    this.#name = configuration.name;
    this.#help = configuration.help;
    this.#upperBounds = [...configuration.buckets];
  }

  /** A new series of `labels`; listed from its first observation, so made only just before one. */
  series(labels: LabelValues<T>): KeptSeries<T> {
    const series = new KeptSeries(labels, this.#upperBounds);
    this.#series.push(series);
    return series;
  }

  get(): MetricJson {
    return {
      name: this.#name,
      help: this.#help,
      type: 'histogram',
      values: this.#series.flatMap((series) => series.samples(this.#name)),
      aggregator: 'sum',
    };
  }
}
