/** One sample line of the Prometheus text format: `name{label="value",…} 12`. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** A scrape, parsed: its samples and each metric family's type (`# TYPE name counter`). */
export interface Scrape {
  samples: Sample[];
  types: Map<string, string>;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** Parses the text exposition format; a line that is neither a comment nor a sample fails the test. */
export function parseScrape(text: string): Scrape {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('# HELP ')) continue;
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) {
      types.set(type[1] ?? '', type[2] ?? '');
      continue;
    }
    const match = SAMPLE.exec(line);
    if (!match) throw new Error(`not a line of the exposition format: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, name, value] of (match[2] ?? '').matchAll(LABEL))
      labels[name ?? ''] = (value ?? '').replace(/\\(.)/g, '$1');
    samples.push({ name: match[1] ?? '', labels, value: Number(match[3]) });
  }
  return { samples, types };
}

/** The value of the one sample of `name` whose labels include `labels`; undefined when there is none. */
export function sampleValue(scrape: Scrape, name: string, labels: Record<string, string> = {}): number | undefined {
  const found = scrape.samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
  return found[0]?.value;
}

/**
 * Every series name a query may use: each sample's name, and for each family declared, its name and, for
 * a histogram or summary, its `_bucket`/`_sum`/`_count` series (which exist before any observation).
 */
export function seriesNames(scrape: Scrape): Set<string> {
  const names = new Set(scrape.samples.map((s) => s.name));
  for (const [name, type] of scrape.types) {
    names.add(name);
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix);
    if (type === 'summary') for (const suffix of ['_sum', '_count']) names.add(name + suffix);
  }
  return names;
}
