// Whether the value redaction stays flat as the daemon ages: every access token the daemon learns is registered
// with the redaction (src/redact.ts) in its profile's slot, in place of the profile's last one, so a week of
// renewals must leave the registry and the heap where the first day left them. The real daemon code and the
// emulator in one child process (run with --expose-gc, so the heap is read after a forced collection), on a
// virtual clock: Dropbox's 4-hour tokens, the default 15-minute margin and jitter, a sweep every virtual minute
// as the default schedule. The minutes in which no token can be due are skipped: the clock jumps to the first
// minute at which one may be (its expiry less the margin and the largest jitter), then moves a minute at a
// time. The token checks are off (they register nothing, and looking for them every second of a week would
// take hours), and no token file is written: the token is registered as it is learnt whatever the sinks, and
// the files' writes would double the run. The emulator's own history (its request log, the access tokens that expired) is dropped as the
// clock moves, so the heap measured is the daemon's. Not a test: nothing fails on a number.
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { setImmediate } from 'node:timers/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import v8 from 'node:v8';
import { makeGrants, quietLogger } from './daemon.mjs';

const self = fileURLToPath(import.meta.url);
const own = path.resolve(path.dirname(self), '..');
// SYNCAUTH_BENCH_ROOT measures another build (one without registeredFormCount prints "—" for the registry).
const root = process.env.SYNCAUTH_BENCH_ROOT ? path.resolve(process.env.SYNCAUTH_BENCH_ROOT) : own;
const dist = (file) => import(pathToFileURL(path.join(root, 'dist', file)).href);

const START = Date.parse('2030-01-01T00:00:00Z');
const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
const LIFETIME_S = 14_400;
const MARGIN_MS = 15 * MINUTE;
const JITTER_MS = 0.2 * MARGIN_MS; // startDaemon's default jitter: up to 20% of the margin
const DAYS = [0, 1, 3, 7];
const PROFILES = Number(process.env.BENCH_REDACTION_PROFILES ?? 1_000);
const MiB = 1024 * 1024;

/** Deterministic numbers in [0, 1), so a run can be repeated. */
function seeded(seed) {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

/** Heap in use after a full collection (twice: what the first frees may hold more). */
async function heapUsed() {
  for (let i = 0; i < 2; i += 1) {
    globalThis.gc();
    await setImmediate();
  }
  return v8.getHeapStatistics().used_heap_size;
}

/** The week itself, in this process (which must have global.gc): one measurement per day of DAYS. */
async function measure(count) {
  const [{ startEmulator, DEFAULT_APP }, { startDaemon }, { openProfileStore }, redaction] = await Promise.all([
    dist('emulator/index.js'), dist('daemon/index.js'), dist('profile/index.js'), dist('redact.js'),
  ]);
  const formCount = typeof redaction.registeredFormCount === 'function' ? () => redaction.registeredFormCount() : () => NaN;
  let t = START;
  const now = () => t;
  const emu = await startEmulator({ autoApprove: true, now, tokenLifetimeSeconds: LIFETIME_S });
  const work = mkdtempSync(path.join(tmpdir(), 'syncauth-bench-redaction-'));
  const started = performance.now();
  try {
    const tokens = await makeGrants(emu, DEFAULT_APP, count);
    const daemon = await startDaemon({
      profiles: async () => tokens.map((refreshToken, i) => {
        const grant = { appKey: DEFAULT_APP.appKey, appSecret: DEFAULT_APP.appSecret, refreshToken };
        return { name: `p${String(i).padStart(4, '0')}`, tokenUrl: emu.tokenUrl, dropboxApiUrl: emu.apiUrl, grant, readGrant: async () => grant };
      }),
      profileStore: openProfileStore(path.join(work, 'config')),
      renewMarginMs: MARGIN_MS,
      schedule: false,
      checkIntervalMs: 0,
      checkTickMs: false,
      concurrency: 16,
      logger: await quietLogger(),
      now,
      random: seeded(7),
    });
    let renewals = 0;
    let sweeps = 0;
    const sweep = async () => {
      const report = await daemon.sweep();
      sweeps += 1;
      renewals += report.profiles.filter((p) => p.renewal === 'renewed').length;
      // The emulator's history is not the daemon's: its request log, and the tokens expired by now.
      emu.state.requests.length = 0;
      for (const [token, issued] of emu.state.accessTokens) if (issued.expiresAt <= t) emu.state.accessTokens.delete(token);
    };
    /** The first minute from now (on the sweeps' grid) at which some profile's token may be due. */
    const nextSweep = () => {
      let due = Infinity;
      for (const p of daemon.status().profiles) {
        if (p.terminal) continue; // parked: renewed no more until its secrets change
        const expiry = p.expiresAt === undefined ? t : Date.parse(p.expiresAt) - MARGIN_MS - JITTER_MS;
        due = Math.min(due, expiry, p.backoffUntil === undefined ? Infinity : Date.parse(p.backoffUntil));
      }
      const at = START + Math.ceil((due - START) / MINUTE) * MINUTE;
      return Math.max(t + MINUTE, at);
    };
    const rows = [];
    const record = async (day) => {
      rows.push({ day, renewals, forms: formCount(), heap: await heapUsed(), sweeps, realSeconds: (performance.now() - started) / 1000 });
      console.error(`redaction bench: day ${day} measured (${renewals} renewals, ${sweeps} sweeps, ${rows.at(-1).realSeconds.toFixed(0)} s)`);
    };
    await sweep();
    await record(0);
    for (const day of DAYS.slice(1)) {
      for (let next = nextSweep(); next <= START + day * DAY; next = nextSweep()) {
        t = next;
        await sweep();
      }
      await record(day);
    }
    const parked = daemon.status().profiles.filter((p) => p.terminal).length;
    await daemon.close();
    return { count, rows, parked };
  } finally {
    await emu.close();
    rmSync(work, { recursive: true, force: true });
  }
}

/** Rows of the week, measured in a child of its own with --expose-gc (its heap is the daemon's alone). */
export function redactionRows({ count = PROFILES, timeoutMs = 600_000 } = {}) {
  return new Promise((resolve, reject) => {
    const proc = fork(self, ['week'], { execArgv: ['--expose-gc'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced' });
    let answered = false;
    const timer = setTimeout(() => {
      proc.kill();
      reject(new Error(`the redaction bench's child took longer than ${timeoutMs / 1000} s`));
    }, timeoutMs);
    proc.once('message', (message) => {
      answered = true;
      clearTimeout(timer);
      if (message.error) reject(new Error(`redaction bench: ${message.error}`));
      else resolve(message);
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      if (!answered) reject(new Error(`the redaction bench's child exited with ${code} before answering`));
    });
    proc.send({ count });
  });
}

export function printRedaction({ count, rows }) {
  const day1 = rows.find((r) => r.day === 1);
  const figure = (v) => (Number.isNaN(v) ? '—' : Math.round(v).toLocaleString('en-US'));
  const ratio = (v, base) => (Number.isFinite(v / base) ? `${(v / base).toFixed(2)}x` : '—');
  const last = (r) => r === rows.at(-1);
  const header = ['at', 'renewals so far', 'registered forms', 'x day 1', 'target', 'heap used MiB', 'x day 1', 'target'];
  const table = [header, ...rows.map((r) => [
    `day ${r.day}${r.day === 0 ? ' (first renewals)' : ''}`, figure(r.renewals),
    figure(r.forms), ratio(r.forms, day1.forms), last(r) ? '≤ 1.05x' : '',
    (r.heap / MiB).toFixed(1), ratio(r.heap, day1.heap), last(r) ? '≤ 1.2x' : '',
  ])];
  const widths = header.map((_, i) => Math.max(...table.map((row) => row[i].length)));
  const lastRow = rows.at(-1);
  console.log(`\nsyncauth redaction bench — ${count.toLocaleString('en-US')} profiles over a simulated week, 4-hour tokens, 15-min margin, a sweep every virtual minute (checks off, no token file), heap after a forced GC; ${lastRow.sweeps} sweeps in ${lastRow.realSeconds.toFixed(0)} s`);
  for (const row of table) console.log(row.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ').trimEnd());
}

if (process.argv[1] === self && process.argv[2] === 'week') {
  process.once('message', ({ count }) => {
    measure(count).then(
      (result) => process.send(result, () => process.exit(0)),
      (error) => process.send({ error: error instanceof Error ? error.stack ?? error.message : String(error) }, () => process.exit(1)),
    );
  });
}
