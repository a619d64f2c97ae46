// Loaded with `--import` into a process bench/rss-probe.mjs measures: samples process.memoryUsage() every 250 ms
// and writes the peaks, a trace and V8's heap statistics to PROBE_FILE at exit. PROBE_SNAP: a heap snapshot at
// exit; PROBE_SNAP_AT (ms, comma-separated) with PROBE_SNAP_BASE: heap snapshots during the run.
import { writeFileSync } from 'node:fs';
import v8 from 'node:v8';
const file = process.env.PROBE_FILE;
const max = { rss: 0, heapTotal: 0, heapUsed: 0, external: 0, arrayBuffers: 0 };
const trace = [];
const t0 = Date.now();
const tick = () => {
  const m = process.memoryUsage();
  for (const k of Object.keys(max)) max[k] = Math.max(max[k], m[k]);
  trace.push([Date.now() - t0, ...Object.keys(max).map((k) => Math.round(m[k] / 1048576))]);
};
setInterval(tick, 250).unref();
for (const at of (process.env.PROBE_SNAP_AT ?? '').split(',').filter(Boolean)) {
  setTimeout(() => { tick(); const f = `${process.env.PROBE_SNAP_BASE}-${at}.heapsnapshot`; v8.writeHeapSnapshot(f); }, Number(at)).unref();
}
process.on('exit', () => {
  tick();
  const end = process.memoryUsage();
  let snap;
  if (process.env.PROBE_SNAP) snap = v8.writeHeapSnapshot(process.env.PROBE_SNAP);
  writeFileSync(file, JSON.stringify({ max, end, trace, snap, maxRSS: process.resourceUsage().maxRSS, heap: v8.getHeapStatistics(), spaces: v8.getHeapSpaceStatistics() }));
});
