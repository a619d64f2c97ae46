// The options each of the library's methods takes, by name, and their check at run time: TypeScript refuses an
// option a method does not take, but JavaScript would pass `listSources({ type: 'dropbox' })` through and list
// every source. A name a method does not take is refused before anything is sent, naming the ones it does take
// and the one most likely meant. docs/library.md lists the same (a test keeps the two equal).
import { ValidationError } from '../errors.js';

/** The options object of each method that takes one (`new ServiceClient`: its constructor), by method. */
export const CLIENT_OPTIONS: Readonly<Record<string, readonly string[]>> = Object.freeze({
  'new ServiceClient': ['baseUrl', 'apiKey', 'apiKeyHeader', 'dispatcher', 'timeouts', 'retry', 'sleep', 'userAgent'],
  listSources: ['sourceType', 'where'],
  scanSources: ['sourceType'],
  waitForSourceConnectionCheck: ['checkId', 'timeoutMs', 'intervalMs', 'onPoll'],
  runSourceConnectionCheck: ['timeoutMs', 'intervalMs', 'onPoll'],
  listWorkflows: ['name'],
  listJobs: ['workflowId', 'status'],
  listDestinations: ['destinationType'],
});

/** Optimal string alignment distance, case folded. */
function distance(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  const d: number[][] = Array.from({ length: x.length + 1 }, (_, i) => Array.from({ length: y.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= x.length; i++) {
    for (let j = 1; j <= y.length; j++) {
      const cost = x[i - 1] === y[j - 1] ? 0 : 1;
      let best = Math.min((d[i - 1]?.[j] ?? 0) + 1, (d[i]?.[j - 1] ?? 0) + 1, (d[i - 1]?.[j - 1] ?? 0) + cost);
      if (i > 1 && j > 1 && x[i - 1] === y[j - 2] && x[i - 2] === y[j - 1]) best = Math.min(best, (d[i - 2]?.[j - 2] ?? 0) + 1);
      (d[i] as number[])[j] = best;
    }
  }
  return d[x.length]?.[y.length] ?? 0;
}

/** The option `given` most likely meant: one that ends with it (`type` → `sourceType`, the CLI's `--type`), or a near spelling. */
function meant(given: string, known: readonly string[]): string | undefined {
  const suffix = known.find((name) => name.toLowerCase().endsWith(given.toLowerCase()));
  if (suffix) return suffix;
  const near = known.map((name) => ({ name, d: distance(given, name) })).sort((a, b) => a.d - b.d)[0];
  return near && near.d <= Math.max(1, Math.floor(given.length / 3)) ? near.name : undefined;
}

/** Refuses (bad_input, exit 2) any option of `method` that it does not take; an absent or undefined object passes. */
export function checkOptions(method: string, given: unknown, known: readonly string[] = CLIENT_OPTIONS[method] ?? []): void {
  if (given === undefined || given === null) return;
  if (typeof given !== 'object' || Array.isArray(given)) {
    throw new ValidationError([{ field: method, message: `takes an options object (${known.join(', ')}), not ${Array.isArray(given) ? 'an array' : typeof given}` }]);
  }
  const unknown = Object.keys(given).filter((key) => !known.includes(key));
  if (unknown.length === 0) return;
  throw new ValidationError(unknown.map((key) => {
    const suggestion = meant(key, known);
    return { field: `${method}: ${key}`, message: `is not an option of ${method}${suggestion ? `; did you mean ${suggestion}?` : ''} (it takes: ${known.join(', ')})` };
  }));
}
