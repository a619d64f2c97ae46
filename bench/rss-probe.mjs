// Memory probe for the stored path (not part of `npm run bench`): one emulator, one generated config dir of
// PROBE_N profiles (10,000 by default), then per experiment two `daemon --once` on a fresh copy of it (all due,
// then none due), each with bench/memory-sampler.mjs loaded. PROBE_EXPERIMENTS is a JSON list of
// { name, flags (node's), snap (heap snapshots at exit), dueSnapAt / idleSnapAt ("ms,ms"), stdout (kept, e.g.
// for --trace-gc) }. Prints each run's peaks and the due run's trace (ms, rss, heapTotal, heapUsed, external,
// arrayBuffers in MiB). PROBE_WORK: where it works (/tmp/rssprobe/work).
import { spawn, execFileSync } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { child, emulatorChild, makeGrants } from './daemon.mjs';

const own = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const stored = path.join(own, 'bench/stored.mjs');
const N = Number(process.env.PROBE_N ?? 10000);
const work = process.env.PROBE_WORK ?? '/tmp/rssprobe/work';
const STORE_KEY = 'bench-store-key-of-enough-length';
const experiments = JSON.parse(process.env.PROBE_EXPERIMENTS ?? '[{"name":"base","flags":[]}]');

const { DEFAULT_APP } = await import(pathToFileURL(path.join(own, 'dist/emulator/index.js')).href);
const emulator = await emulatorChild([], { tokenLifetimeSeconds: 1200 });
rmSync(work, { recursive: true, force: true });
mkdirSync(work, { recursive: true });
const refreshTokens = await makeGrants(emulator, DEFAULT_APP, N);
const urls = { url: emulator.url, authorizeUrl: emulator.authorizeUrl, tokenUrl: emulator.tokenUrl, apiUrl: emulator.apiUrl };
const base = path.join(work, '_gen', 'config');
const names = Array.from({ length: N }, (_, i) => `p${String(i).padStart(5, '0')}`);
await child('generate', { dir: base, names, refreshTokens, app: DEFAULT_APP, urls }, { file: stored, timeoutMs: 1_800_000 });

function run(dir, flags, out, snap, snapAt, stdoutFile) {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, [...flags, '--import', path.join(own, 'bench/memory-sampler.mjs'), path.join(own, 'dist/cli/main.js'), 'daemon', '--once', '--concurrency', '16'], {
      env: { PATH: process.env.PATH, HOME: dir, SYNCAUTH_CONFIG_DIR: dir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: STORE_KEY, SYNCAUTH_LOG_LEVEL: 'warn', PROBE_FILE: out, ...(snap ? { PROBE_SNAP: snap } : {}), ...(snapAt ? { PROBE_SNAP_AT: snapAt, PROBE_SNAP_BASE: out.replace(/\.json$/, '') } : {}) },
      stdio: ['ignore', stdoutFile ? 'pipe' : 'ignore', 'pipe'],
    });
    if (stdoutFile) proc.stdout.pipe(createWriteStream(stdoutFile));
    let err = '';
    proc.stderr.on('data', (c) => (err = (err + c).slice(-1000)));
    proc.on('close', (code) => resolve({ code, err, ...JSON.parse(readFileSync(out, 'utf8')) }));
  });
}
const M = (b) => Math.round(b / 1048576);
for (const ex of experiments) {
  const dir = path.join(work, ex.name, 'config');
  rmSync(path.dirname(dir), { recursive: true, force: true });
  mkdirSync(path.dirname(dir), { recursive: true });
  execFileSync('cp', ['-a', base, dir]);
  const due = await run(dir, ex.flags ?? [], path.join(work, `${ex.name}-due.json`), ex.snap ? path.join(work, `${ex.name}-due.heapsnapshot`) : undefined, ex.dueSnapAt, ex.stdout ? path.join(work, `${ex.name}-due.out`) : undefined);
  const idle = await run(dir, ex.flags ?? [], path.join(work, `${ex.name}-idle.json`), ex.snap ? path.join(work, `${ex.name}-idle.heapsnapshot`) : undefined, ex.idleSnapAt, ex.stdout ? path.join(work, `${ex.name}-idle.out`) : undefined);
  for (const [label, r] of [['due', due], ['idle', idle]]) {
    console.log(`${ex.name} ${label}: exit ${r.code} maxRSS ${M(r.maxRSS * 1024)} MiB; sampled max rss ${M(r.max.rss)} heapTotal ${M(r.max.heapTotal)} heapUsed ${M(r.max.heapUsed)} external ${M(r.max.external)} arrayBuffers ${M(r.max.arrayBuffers)}; end heapUsed ${M(r.end.heapUsed)} ${r.code ? r.err : ''}`);
  }
  console.log(`${ex.name} due trace [ms, rss, heapTotal, heapUsed, external, ab]: ${JSON.stringify(due.trace.filter((_, i) => i % 4 === 0))}`);
}
await emulator.close();
