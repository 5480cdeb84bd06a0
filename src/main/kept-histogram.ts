import { Histogram, type HistogramConfiguration, type LabelValues } from 'prom-client';

/**
 * One series of a KeptHistogram. Its observe is a bucket search and three additions, where prom-client's
 * hashes the labels, validates them and looks the series up on every call (a fixed cost of every API answer).
 */
export class KeptSeries<T extends string> {
  /** Shared by every sample of the series in each scrape, as prom-client's own series share theirs. */
  readonly labels: LabelValues<T>;
  readonly #upperBounds: readonly number[];
  /** Observations per bucket, not cumulative; the last one counts those beyond every bound. */
  readonly #counts: number[];
  #sum = 0;
  #count = 0;

  constructor(labels: LabelValues<T>, upperBounds: readonly number[]) {
    this.labels = labels;
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

  /** The samples prom-client's histogram writes for a series, in its order: each `le`, `+Inf`, sum, count. */
  samples(name: string): HistogramSample<T>[] {
    const samples: HistogramSample<T>[] = [];
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
    labels: Record<string, string | number>,
    value: number,
    exemplar: null | undefined,
  ): HistogramSample<T> {
    return { metricName, labels, sharedLabels: this.labels, value, exemplar };
  }
}

/**
 * A sample as prom-client's histogram hands it to its registry: the series' labels apart from `le`, and no
 * exemplar (null on a bucket, undefined on the sum and count, as its own).
 */
interface HistogramSample<T extends string> {
  metricName: string;
  labels: Record<string, string | number>;
  sharedLabels: LabelValues<T>;
  value: number;
  exemplar: null | undefined;
}

/**
 * A prom-client histogram whose series are kept here (KeptSeries) and observed through `series`, for one
 * observed on every request. Its scrape is prom-client's text to the byte: the registry writes a histogram
 * from `getForPromString` (and its `get` reads it too), which this gives the samples prom-client's own would,
 * series in the order of their first observation. The base's own `observe` and `labels` are not used.
 */
export class KeptHistogram<T extends string> extends Histogram<T> {
  readonly #name: string;
  readonly #help: string;
  readonly #upperBounds: readonly number[];
  /** In the order of their first observation, as prom-client lists its series. */
  readonly #series: KeptSeries<T>[] = [];

  constructor(configuration: HistogramConfiguration<T> & { buckets: readonly number[] }) {
    super(configuration);
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

  async getForPromString() {
    return {
      name: this.#name,
      help: this.#help,
      type: 'histogram',
      values: this.#series.flatMap((series) => series.samples(this.#name)),
      aggregator: 'sum',
    };
  }
}
