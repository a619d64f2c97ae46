// The renewal path against its floor, for `npm run bench`: in one process, against one local token endpoint
// (the emulator, in a child of its own so its work never shows in these numbers), the same N renewals at the
// same concurrency are made three ways:
//   - the floor: a bare undici keep-alive POST of the refresh form, its JSON read, nothing else;
//   - syncauth's renew function (`renewAccessToken`), the OAuth step alone: over the same undici agent, and
//     without one, over the pool on Node's own http that the daemon uses;
//   - the daemon's sweep of N due profiles, with everything it does per renewal: the cross-process lock, the
//     state re-read and the renewal recorded, the held token, its log line (its secrets registered with the
//     redaction step, as `syncauth daemon` registers every profile's). Twice: the first sweep in a fresh
//     config dir (every profile's first renewal there, which creates its files), then the next one, a token
//     lifetime later on the daemon's clock, as every later sweep that renews is.
// The floor is warmed up first. CPU is this process's user + system time (libuv's threads included), per renewal.
// Not a test: nothing here fails on a number.
//
// `node bench/floor.mjs` prints this table alone. BENCH_FLOOR_SIZES=1000 picks the sizes; BENCH_FLOOR_PROFILE=dir
// writes a CPU profile of the floor's run and of each daemon sweep to dir, for Chrome's DevTools or a script.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { URLSearchParams, fileURLToPath, pathToFileURL } from 'node:url';
import { child, emulatorChild, makeGrants, quietLogger } from './daemon.mjs';

const self = fileURLToPath(import.meta.url);
const root = path.resolve(path.dirname(self), '..');
const dist = (file) => import(pathToFileURL(path.join(root, 'dist', file)).href);

const SIZES = (process.env.BENCH_FLOOR_SIZES ?? '250,1000,4000').split(',').map(Number);
const CONCURRENCY = 16;
const WARMUP = 500;
const MARGIN_MS = 900_000;
const LIFETIME_MS = 14_400_000; // the emulator's default
const PROFILE_DIR = process.env.BENCH_FLOOR_PROFILE;

/** Runs `work` under the V8 CPU profiler when BENCH_FLOOR_PROFILE names a directory, writing `name`.cpuprofile. */
async function profiled(name, work) {
  if (!PROFILE_DIR) return work();
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
  try {
    return await work();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    mkdirSync(PROFILE_DIR, { recursive: true });
    writeFileSync(path.join(PROFILE_DIR, `${name}.cpuprofile`), JSON.stringify(profile));
    session.disconnect();
  }
}

/** Runs `count` jobs, `concurrency` at a time; returns wall ms and this process's CPU ms over them. */
async function measure(count, concurrency, job) {
  const cpu = process.cpuUsage();
  const start = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < count) await job(next++);
  }));
  const ms = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { ms, cpuMs: (used.user + used.system) / 1000 };
}

async function floorChild({ tokenUrl, grantsFile }) {
  const { Agent, request } = await import('undici');
  const { renewAccessToken } = await dist('oauth/index.js');
  const { startDaemon } = await dist('daemon/index.js');
  const { openProfileStore } = await dist('profile/index.js');
  const { registerAppCredentials, registerSecrets } = await dist('redact.js');
  const grants = JSON.parse(readFileSync(grantsFile, 'utf8'));
  const app = { appKey: grants.appKey, appSecret: grants.appSecret };
  const agent = new Agent({ connections: CONCURRENCY });
  const bare = async (i) => {
    const response = await request(tokenUrl, {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: grants.refreshTokens[i % grants.refreshTokens.length], client_id: app.appKey, client_secret: app.appSecret }).toString(),
    });
    const body = await response.body.json();
    if (response.statusCode !== 200 || typeof body.access_token !== 'string') throw new Error(`the token endpoint answered ${response.statusCode}`);
  };
  const renew = (i) => renewAccessToken({ tokenUrl, app, refreshToken: grants.refreshTokens[i % grants.refreshTokens.length], dispatcher: agent });
  // The same without a dispatcher: over the pool on Node's own http (src/net/direct.ts), as the daemon renews.
  const renewDirect = (i) => renewAccessToken({ tokenUrl, app, refreshToken: grants.refreshTokens[i % grants.refreshTokens.length] });
  // Warm both paths (JIT, connections) before anything is counted.
  await measure(WARMUP, CONCURRENCY, bare);
  await measure(WARMUP, CONCURRENCY, renew);
  await measure(WARMUP, CONCURRENCY, renewDirect);
  const results = [];
  for (const n of SIZES) {
    const floor = await profiled(`floor-${n}`, () => measure(n, CONCURRENCY, bare));
    const fn = await measure(n, CONCURRENCY, renew);
    const direct = await profiled(`direct-${n}`, () => measure(n, CONCURRENCY, renewDirect));
    const work = mkdtempSync(path.join(tmpdir(), 'syncauth-bench-floor-'));
    // As `syncauth daemon` does for each profile it loads: its secrets are cut out of every log line.
    registerAppCredentials(app.appKey, app.appSecret);
    registerSecrets(...grants.refreshTokens.slice(0, n));
    try {
      let offset = 0;
      const daemon = await startDaemon({
        now: () => Date.now() + offset,
        profiles: grants.refreshTokens.slice(0, n).map((refreshToken, i) => ({ name: `p${i}`, tokenUrl, grant: { ...app, refreshToken } })),
        profileStore: openProfileStore(work),
        renewMarginMs: MARGIN_MS,
        schedule: false,
        concurrency: CONCURRENCY,
        logger: await quietLogger(),
      });
      const timedSweep = async (name) => {
        let report;
        const sweep = await profiled(`sweep-${name}-${n}`, () => measure(1, 1, async () => {
          report = await daemon.sweep();
        }));
        return { ...sweep, renewed: report.profiles.filter((p) => p.renewal === 'renewed').length };
      };
      const sweep = await timedSweep('first');
      // Inside the margin of the tokens just renewed: every profile is due again.
      offset = LIFETIME_MS - MARGIN_MS / 2;
      const next = await timedSweep('next');
      await daemon.close();
      results.push({ n, floor, fn, direct, sweep, next });
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
  await agent.close();
  return results;
}

/** Rows of [measurement, value, unit, ratio to floor, target]. */
export async function floorRows() {
  const { DEFAULT_APP } = await dist('emulator/index.js');
  const emulator = await emulatorChild([]);
  const work = mkdtempSync(path.join(tmpdir(), 'syncauth-bench-floor-grants-'));
  const rows = [];
  try {
    const refreshTokens = await makeGrants(emulator, DEFAULT_APP, Math.max(...SIZES));
    const grantsFile = path.join(work, 'grants.json');
    writeFileSync(grantsFile, JSON.stringify({ appKey: DEFAULT_APP.appKey, appSecret: DEFAULT_APP.appSecret, refreshTokens }));
    const { results } = await child('floor', { tokenUrl: emulator.tokenUrl, grantsFile }, { file: self, timeoutMs: 600_000 });
    for (const { n, floor, fn, direct, sweep, next } of results) {
      const per = (m) => m.cpuMs / n;
      const note = (m) => (m.renewed === n ? '' : ` [only ${m.renewed} renewed]`);
      rows.push([`N = ${n.toLocaleString('en-US')}, concurrency ${CONCURRENCY}: bare undici POST (floor), CPU / renewal`, per(floor), 'ms', 1, '']);
      rows.push(['  renew function (renewAccessToken), CPU / renewal', per(fn), 'ms', per(fn) / per(floor), '≤ 1.2x']);
      rows.push(['  renew function over Node\'s http (no dispatcher, as the daemon), CPU / renewal', per(direct), 'ms', per(direct) / per(floor), '']);
      rows.push([`  daemon sweep, first in a fresh config dir, CPU / renewal${note(sweep)}`, per(sweep), 'ms', per(sweep) / per(floor), '≤ 2x (1.5x)']);
      rows.push([`  daemon sweep, next (a token lifetime later), CPU / renewal${note(next)}`, per(next), 'ms', per(next) / per(floor), '≤ 2x (1.5x)']);
      rows.push(['  bare undici POST (floor), wall', floor.ms, 'ms', 1, '']);
      rows.push(['  renew function, wall', fn.ms, 'ms', fn.ms / floor.ms, '']);
      rows.push(['  renew function over Node\'s http, wall', direct.ms, 'ms', direct.ms / floor.ms, '']);
      rows.push([`  daemon sweep, first in a fresh config dir, wall${note(sweep)}`, sweep.ms, 'ms', sweep.ms / floor.ms, '≤ 2x (1.5x)']);
      rows.push([`  daemon sweep, next (a token lifetime later), wall${note(next)}`, next.ms, 'ms', next.ms / floor.ms, '≤ 2x (1.5x)']);
    }
  } finally {
    await emulator.close();
    rmSync(work, { recursive: true, force: true });
  }
  return rows;
}

if (process.argv[1] === self && process.argv[2] === 'floor') {
  process.once('message', (job) => {
    floorChild(job).then(
      (results) => process.send({ results }, () => process.exit(0)),
      (error) => process.send({ error: error instanceof Error ? error.stack ?? error.message : String(error) }, () => process.exit(1)),
    );
  });
} else if (process.argv[1] === self) {
  // `node bench/floor.mjs`: this table alone.
  const rows = await floorRows();
  for (const [name, value, unit, ratio, target] of rows) console.log(`${name.padEnd(90)} ${value.toFixed(3).padStart(10)} ${unit.padEnd(3)} ${ratio.toFixed(2).padStart(6)}x  ${target}`);
}
