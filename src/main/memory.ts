import { setFlagsFromString } from 'node:v8';

/**
 * Applies `HEAP_GROWING_PERCENT` to V8 (docs/operating.md "Memory"): a flag NODE_OPTIONS refuses, so the
 * process sets it itself, before the work that grows the heap. V8 reads it at every full collection. A
 * `--heap-growing-percent` given to `node` itself wins.
 */
export function limitHeapGrowth(percent: number): void {
  if (percent === 0 || process.execArgv.some((arg) => arg.startsWith('--heap-growing-percent'))) return;
  setFlagsFromString(`--heap-growing-percent=${percent}`);
}
