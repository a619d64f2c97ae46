// Fleet mode, for `npm run bench`: N stored profiles (10,000 by default; BENCH_FLEET_SIZES=1000 to shorten) that
// publish their token nowhere (no token file, template or socket: each is shared across the fleet), each with a
// grant the emulator issued, in one config dir written as bench/stored.mjs writes it (the file store, as `setup`
// stores profiles, recording the grants' Dropbox account so that the token checks find it theirs). Against a
// real redis-server (test/helpers/redis-server.mjs), each run from a cold start:
//
// - the floor: one `syncauth daemon` (no fleet, no Redis) over a copy of the dir, run before the fleet's runs and
//   again after them (the wall's floor is the mean of the two: 2 shared cores, whose load moves meanwhile);
// - 1 replica: `syncauth daemon --fleet --redis-url … --listen 127.0.0.1:0 --max-renewals-per-second 1000` over
//   another copy (the fleet's cap lifted, as the floor has none; a replica also waits a heartbeat, 10 s, on joining);
// - 3 replicas: three such processes over one more copy, shared by all three as a shared volume would be,
//   started together (each joins while the others load or join: the race of a cold start), Redis emptied first;
// - 3 replicas at a cap: the same with `--max-renewals-per-second` at BENCH_FLEET_CAP (100): a catch-up of every
//   profile at once, paced by the fleet's cap; the most token requests that reached the emulator within any one
//   second is set against the cap.
//
// A run ends when the emulator has renewed every profile's grant (counted at the emulator from the run's first
// token request on), then a settling pause in which late renewals still count. Per process: spawn → its
// daemon.started line (N profiles loaded, the fleet joined, and how many it served on joining), its peak RSS
// (its own, at its exit, bench/usage.mjs), its RSS and its heap after a collection once settled
// (bench/settled-heap.mjs, on SIGUSR2), its CPU, what it serves at the end (its /readyz) and what it renewed (its
// `renewal.succeeded` lines). Per run: token requests per profile (1.00 is each profile renewed once across the
// fleet; above it, renewals the join race doubled). From the 1 replica against each of the 3, the heap a worker
// costs and what a replica holds whatever its share; with two sizes, that per configured profile. Ratios are
// against the floor measured in the same run. The base, what a process holds whatever the profiles (its code, its
// libraries, the daemon itself), is measured first, over one stored profile (a daemon with none refuses to start),
// as one daemon and as one replica: each replica's heap is given again net of it, against the floor's net of its
// own, since a base held by each of three replicas keeps their gross ratio above a third at any N. Not a test:
// nothing here fails on a number.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { URLSearchParams, fileURLToPath, pathToFileURL } from 'node:url';
import { child, emulatorChild, makeGrants, rssOf } from './daemon.mjs';
import { findRedisServer, startRedisProcess } from '../test/helpers/redis-server.mjs';

const self = fileURLToPath(import.meta.url);
const root = path.resolve(path.dirname(self), '..');
const cli = path.join(root, 'dist/cli/main.js');
const stored = path.join(root, 'bench/stored.mjs');

const SIZES = (process.env.BENCH_FLEET_SIZES ?? '10000').split(',').filter(Boolean).map(Number);
const REPLICAS = 3;
/** As the stored path's rows: sixteen renewals at a time in each process. */
const CONCURRENCY = 16;
/** Longer than the default 900 s renew margin: a profile renewed once is not due again during the run. */
const LIFETIME_S = 1_200;
const STORE_KEY = 'bench-store-key-of-enough-length';
/** After every profile is renewed: how long late renewals (a replica that had not yet seen the others) still count. */
const SETTLE_MS = 5_000;
/**
 * The fleet's cap in the capped run (BENCH_FLEET_CAP): a catch-up of N profiles takes N / cap seconds, so the
 * default 10 a second would make 10,000 last 17 minutes.
 */
const CAP = Number(process.env.BENCH_FLEET_CAP ?? 100);
/** How long a run may take to renew every profile before it is reported as not done. */
const RUN_TIMEOUT_MS = 20 * 60_000;
const MiB = 1024 * 1024;


/**
 * One daemon process over `dir`: its stdout read line by line for the listen address and its renewals, and its
 * resource usage (peak RSS, CPU) at exit.
 */
function startProcess(dir, args, env, label, start) {
  const usageFile = path.join(path.dirname(dir), `usage-${label}-${process.hrtime.bigint()}.json`);
  const heapFile = `${usageFile}.heap`;
  const preload = (file) => ['--import', pathToFileURL(path.join(root, 'bench', file)).href];
  const proc = spawn(process.execPath, ['--expose-gc', ...preload('usage.mjs'), ...preload('settled-heap.mjs'), cli, 'daemon', '--concurrency', String(CONCURRENCY), ...args], {
    env: { PATH: process.env.PATH, HOME: dir, SYNCAUTH_CONFIG_DIR: dir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: STORE_KEY, SYNCAUTH_LOG_LEVEL: 'info', BENCH_USAGE_FILE: usageFile, BENCH_HEAP_FILE: heapFile, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  /** From its log: renewals, the listen address, when (ms after `start`) it said it started, what it served on joining. */
  const seen = { renewed: 0, failed: 0, listen: undefined, startedMs: NaN, joinedServing: undefined };
  let partial = '';
  proc.stdout.setEncoding('utf8').on('data', (chunk) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      if (line.includes('"event":"renewal.succeeded"')) seen.renewed += 1;
      else if (line.includes('"event":"renewal.failed"')) seen.failed += 1;
      else if (line.includes('"event":"daemon.started"')) {
        seen.startedMs = performance.now() - start;
        seen.listen = /"listen":"(http:[^"]+)"/.exec(line)?.[1];
      } else if (line.includes('"event":"fleet.joined"')) {
        seen.joinedServing = Number(/"served":(\d+)/.exec(line)?.[1]);
      }
    }
  });
  let stderr = '';
  proc.stderr.setEncoding('utf8').on('data', (chunk) => (stderr = (stderr + chunk).slice(-2000)));
  const exited = new Promise((resolve) => proc.once('close', (code, signal) => resolve({ code, signal })));
  return {
    proc,
    seen,
    exited,
    get stderr() {
      return stderr;
    },
    /** The profiles it serves now, from its /readyz (undefined when it does not answer). */
    async served() {
      if (!seen.listen) return undefined;
      try {
        const body = await (await fetch(`${seen.listen}/readyz`)).json();
        const notReady = Object.entries(body.profiles ?? {}).filter(([, p]) => !p.ready);
        const why = notReady.length ? `${notReady.length} not ready, e.g. ${notReady[0][0]}: ${String(notReady[0][1].reason).slice(0, 80)}` : undefined;
        return { count: Object.keys(body.profiles ?? {}).length, ready: body.ready === true, why };
      } catch {
        return undefined;
      }
    },
    /** Its heap used after a collection (bench/settled-heap.mjs), bytes, or NaN if it does not write it in 10 s. */
    async heapUsed() {
      rmSync(heapFile, { force: true });
      proc.kill('SIGUSR2');
      for (let waited = 0; waited < 10_000; waited += 50) {
        try {
          const used = JSON.parse(readFileSync(heapFile, 'utf8')).heapUsed;
          rmSync(heapFile, { force: true });
          return used;
        } catch {
          await sleep(50);
        }
      }
      return NaN;
    },
    /** SIGTERM, then its usage as written at exit. */
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      const { code } = await exited;
      try {
        const usage = JSON.parse(readFileSync(usageFile, 'utf8'));
        rmSync(usageFile, { force: true });
        return { code, maxRss: usage.maxRSS * 1024, cpuMs: (usage.userCPUTime + usage.systemCPUTime) / 1000 };
      } catch {
        return { code, maxRss: NaN, cpuMs: NaN };
      }
    },
  };
}

/**
 * `count` daemons started together over `dir` (with `args`): the wall from their spawn to the emulator having
 * renewed all `n` grants, then, after SETTLE_MS, the token requests of the whole run, what each serves and
 * renewed, its RSS settled, and its peak RSS and CPU at exit.
 */
async function timedRun({ emulator, dir, n, count, args, env }) {
  const before = await emulator.tokenCalls(0);
  const load = loadavg()[0];
  const start = performance.now();
  const procs = Array.from({ length: count }, (_, i) => startProcess(dir, args, env, `r${i}`, start));
  let wallMs;
  let calls;
  try {
    const deadline = Date.now() + RUN_TIMEOUT_MS;
    for (;;) {
      calls = await emulator.tokenCalls(before.next);
      if (calls.grants >= n) {
        wallMs = performance.now() - start;
        break;
      }
      const gone = procs.find((p) => p.proc.exitCode !== null || p.proc.signalCode !== null);
      if (gone) throw new Error(`a daemon exited before every profile was renewed (${calls.grants} of ${n}): ${gone.stderr.trim().split('\n').at(-1)}`);
      if (Date.now() > deadline) throw new Error(`${calls.grants} of ${n} profiles renewed after ${RUN_TIMEOUT_MS / 60_000} min`);
      await sleep(200);
    }
    await sleep(SETTLE_MS);
    calls = await emulator.tokenCalls(before.next);
    const replicas = [];
    for (const p of procs) replicas.push({ served: await p.served(), rss: rssOf(p.proc.pid), heapUsed: await p.heapUsed(), renewed: p.seen.renewed, failed: p.seen.failed, startedMs: p.seen.startedMs, joinedServing: p.seen.joinedServing });
    const stopped = [];
    for (const p of procs) stopped.push(await p.stop());
    return { wallMs, calls, load, loadAfter: loadavg()[0], replicas: replicas.map((r, i) => ({ ...r, ...stopped[i] })) };
  } finally {
    for (const p of procs) if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGKILL');
    await Promise.all(procs.map((p) => p.exited));
  }
}

const fmt = (n) => n.toLocaleString('en-US');

/**
 * The Dropbox account of a grant, as the daemon's token checks read it (users/get_current_account): the generated
 * profiles record it, as `setup` does, else every check finds the token another account's.
 */
async function accountOf(emulator, app, refreshToken) {
  const token = await fetch(emulator.tokenUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: app.appKey, client_secret: app.appSecret }).toString(),
  }).then((r) => r.json());
  const account = await fetch(new URL('/2/users/get_current_account', emulator.apiUrl), {
    method: 'POST',
    headers: { authorization: `Bearer ${token.access_token}`, 'content-type': 'application/json' },
    body: 'null',
  }).then((r) => r.json());
  if (typeof account.account_id !== 'string') throw new Error(`no account from the emulator: ${JSON.stringify(account).slice(0, 200)}`);
  return account.account_id;
}

/** Rows of [measurement, value, unit, ratio, target]. */
export async function fleetRows({ sizes = SIZES, log = () => {} } = {}) {
  const rows = [];
  const executable = findRedisServer();
  if (!executable) return [['fleet: FAILED, no redis-server on PATH or at /usr/bin/redis-server', NaN, '', NaN, '']];
  const { DEFAULT_APP } = await import(pathToFileURL(path.join(root, 'dist/emulator/index.js')).href);
  const emulator = await emulatorChild([], { tokenLifetimeSeconds: LIFETIME_S });
  const redis = await startRedisProcess(executable);
  const work = mkdtempSync(path.join(tmpdir(), 'syncauth-bench-fleet-'));
  try {
    const refreshTokens = await makeGrants(emulator, DEFAULT_APP, Math.max(...sizes));
    const urls = { url: emulator.url, authorizeUrl: emulator.authorizeUrl, tokenUrl: emulator.tokenUrl, apiUrl: emulator.apiUrl };
    // Every grant the emulator approves names its one account.
    const accountId = await accountOf(emulator, DEFAULT_APP, refreshTokens[0]);
    const grantKey = randomBytes(32).toString('base64');
    const held = [];
    const fleetArgs = ['--fleet', '--redis-url', redis.url, '--listen', '127.0.0.1:0', '--max-renewals-per-second', '1000'];
    const fleetEnv = { SYNCAUTH_GRANT_KEY: grantKey };
    // The base, in this run: one daemon and one replica, each over one stored profile of its own dir.
    const base = {};
    try {
      const pristine = path.join(work, 'base', 'pristine', 'config');
      await child('generate', { dir: pristine, names: ['b00000'], refreshTokens: refreshTokens.slice(0, 1), app: DEFAULT_APP, urls, accountId }, { file: stored });
      const copy = (name) => {
        const dir = path.join(work, 'base', name, 'config');
        mkdirSync(path.dirname(dir), { recursive: true });
        execFileSync('cp', ['-a', pristine, dir]);
        return dir;
      };
      base.floor = (await timedRun({ emulator, dir: copy('floor'), n: 1, count: 1, args: ['--listen', '127.0.0.1:0'], env: {} })).replicas[0].heapUsed;
      await redis.restart();
      base.replica = (await timedRun({ emulator, dir: copy('one'), n: 1, count: 1, args: fleetArgs, env: fleetEnv })).replicas[0].heapUsed;
      log(`fleet bench: base done (${(base.floor / MiB).toFixed(1)} MiB one daemon, ${(base.replica / MiB).toFixed(1)} MiB one replica)`);
      rows.push(['base: one daemon (no fleet, no Redis) over 1 stored profile (none refuses to start), heap used after a collection, settled', base.floor / MiB, 'MiB', 1, '']);
      rows.push(['base: 1 replica (--fleet, Redis) over 1 stored profile, heap used after a collection, settled', base.replica / MiB, 'MiB', base.replica / base.floor, '']);
    } catch (error) {
      rows.push([`base: FAILED (${error.message.split('\n')[0]})`, NaN, '', NaN, '']);
    } finally {
      rmSync(path.join(work, 'base'), { recursive: true, force: true });
    }
    for (const n of sizes) {
      const label = `N = ${fmt(n)} shared profiles (file store, no token file), concurrency ${CONCURRENCY} per process, tokens of ${LIFETIME_S} s`;
      try {
        const pristine = path.join(work, `n${n}`, 'pristine', 'config');
        const names = Array.from({ length: n }, (_, i) => `f${String(i).padStart(5, '0')}`);
        await child('generate', { dir: pristine, names, refreshTokens: refreshTokens.slice(0, n), app: DEFAULT_APP, urls, accountId }, { file: stored, timeoutMs: 1_800_000 });
        /** A fresh copy of the generated dir: every profile due again. */
        const copy = (name) => {
          const dir = path.join(work, `n${n}`, name, 'config');
          mkdirSync(path.dirname(dir), { recursive: true });
          execFileSync('cp', ['-a', pristine, dir]);
          return dir;
        };
        // The fleet's cap on token requests (10 a second unless set) would make the cold start N / 10 seconds: set
        // far above what the machine reaches, as the floor has none, so that the rows compare the work itself.

        const floor = await timedRun({ emulator, dir: copy('floor'), n, count: 1, args: ['--listen', '127.0.0.1:0'], env: {} });
        log(`fleet bench: N=${n} floor done in ${(floor.wallMs / 1000).toFixed(1)} s`);
        await redis.restart();
        const one = await timedRun({ emulator, dir: copy('one'), n, count: 1, args: fleetArgs, env: fleetEnv });
        log(`fleet bench: N=${n} 1 replica done in ${(one.wallMs / 1000).toFixed(1)} s`);
        await redis.restart();
        const three = await timedRun({ emulator, dir: copy('three'), n, count: REPLICAS, args: fleetArgs, env: fleetEnv });
        log(`fleet bench: N=${n} ${REPLICAS} replicas done in ${(three.wallMs / 1000).toFixed(1)} s`);
        // A catch-up at the fleet's cap: every profile due at once on three replicas (a cold start, which makes
        // due more profiles than a one-hour outage of the token endpoint does), the cap set to CAP a second.
        await redis.restart();
        const capped = await timedRun({ emulator, dir: copy('capped'), n, count: REPLICAS, args: [...fleetArgs.slice(0, -1), String(CAP)], env: fleetEnv });
        log(`fleet bench: N=${n} ${REPLICAS} replicas at a cap of ${CAP}/s done in ${(capped.wallMs / 1000).toFixed(1)} s`);
        // The floor once more: how far the shared machine drifted over the runs.
        const again = await timedRun({ emulator, dir: copy('again'), n, count: 1, args: ['--listen', '127.0.0.1:0'], env: {} });
        log(`fleet bench: N=${n} floor again done in ${(again.wallMs / 1000).toFixed(1)} s`);

        const [f] = floor.replicas;
        const [o] = one.replicas;
        const loads = [floor, one, three, again].map((r) => `${r.load.toFixed(2)}→${r.loadAfter.toFixed(2)}`).join(', ');
        const readiness = (r) => (r.served ? (r.served.ready ? '' : `; ${r.served.why ?? 'not ready'}`) : '; did not answer /readyz');
        const requests = (run) => `${fmt(run.calls.count)} for ${fmt(n)} profiles, most for one: ${run.calls.most}`;
        rows.push([`${label}; load average (1 min) at start→end of each run (floor, 1, ${REPLICAS}, floor again): ${loads}`, NaN, '', NaN, '']);
        // The wall's floor is the mean of the runs before and after the fleet's: the machine's load moves meanwhile.
        const floorWall = (floor.wallMs + again.wallMs) / 2;
        rows.push([`  floor: one daemon (no fleet, no Redis), cold start → every profile renewed, wall (mean of ${fmt(Math.round(floor.wallMs))} before and ${fmt(Math.round(again.wallMs))} after the fleet runs)`, floorWall, 'ms', 1, '']);
        rows.push(['  floor: spawn → daemon.started (profiles loaded), wall', f.startedMs, 'ms', 1, '']);
        rows.push([`  floor: peak RSS / RSS settled${readiness(f)}`, f.maxRss / MiB, 'MiB', f.rss / MiB, '(ratio column: MiB)']);
        rows.push(['  floor: heap used after a collection, settled', f.heapUsed / MiB, 'MiB', 1, '']);
        rows.push(['  floor: CPU', f.cpuMs, 'ms', 1, '']);
        rows.push([`  floor: token requests / profile (${requests(floor)})`, floor.calls.count / n, 'requests', NaN, '1.00']);
        rows.push(['  1 replica (--fleet, Redis), cold start → every profile renewed, wall', one.wallMs, 'ms', one.wallMs / floorWall, '']);
        rows.push([`  1 replica: spawn → daemon.started (profiles loaded, joined serving ${fmt(o.joinedServing ?? NaN)}), wall`, o.startedMs, 'ms', o.startedMs / f.startedMs, '']);
        rows.push([`  1 replica: peak RSS${readiness(o)}`, o.maxRss / MiB, 'MiB', o.maxRss / f.maxRss, '']);
        rows.push(['  1 replica: RSS settled', o.rss / MiB, 'MiB', o.rss / f.rss, '']);
        rows.push(['  1 replica: heap used after a collection, settled', o.heapUsed / MiB, 'MiB', o.heapUsed / f.heapUsed, '']);
        rows.push(['  1 replica: CPU', o.cpuMs, 'ms', o.cpuMs / f.cpuMs, '']);
        rows.push([`  1 replica: token requests / profile (${requests(one)})`, one.calls.count / n, 'requests', NaN, '1.00']);
        rows.push([`  ${REPLICAS} replicas started together over one config dir, cold start → every profile renewed, wall`, three.wallMs, 'ms', three.wallMs / floorWall, '']);
        rows.push([`  ${REPLICAS} replicas: token requests / profile over the run, the join race included (${requests(three)})`, three.calls.count / n, 'requests', NaN, '≈ 1.00']);
        const cpu = three.replicas.reduce((sum, r) => sum + r.cpuMs, 0);
        rows.push([`  ${REPLICAS} replicas: CPU, all together`, cpu, 'ms', cpu / f.cpuMs, '']);
        for (const [i, r] of three.replicas.entries()) {
          const served = r.served ? `serves ${fmt(r.served.count)}${r.served.ready ? '' : ` (${r.served.why ?? 'not ready'})`}` : 'did not answer /readyz';
          rows.push([`  replica ${i + 1}: spawn → daemon.started (profiles loaded, joined serving ${fmt(r.joinedServing ?? NaN)}), wall`, r.startedMs, 'ms', r.startedMs / f.startedMs, '']);
          rows.push([`  replica ${i + 1}: peak RSS (${served}, renewed ${fmt(r.renewed)}${r.failed ? `, ${r.failed} renewals failed` : ''}; exit ${r.code})`, r.maxRss / MiB, 'MiB', r.maxRss / f.maxRss, '≈ 1/3 of the floor']);
          rows.push([`  replica ${i + 1}: RSS settled`, r.rss / MiB, 'MiB', r.rss / f.rss, '']);
          rows.push([`  replica ${i + 1}: heap used after a collection, settled`, r.heapUsed / MiB, 'MiB', r.heapUsed / f.heapUsed, '≈ 1/3 of the floor']);
          rows.push([`  replica ${i + 1}: heap NET OF THE BASE, (heap − base of 1 replica) against (floor − base of one daemon)`, (r.heapUsed - base.replica) / MiB, 'MiB', (r.heapUsed - base.replica) / (f.heapUsed - base.floor), '≈ 1/3 of the floor']);
          rows.push([`  replica ${i + 1}: CPU`, r.cpuMs, 'ms', r.cpuMs / f.cpuMs, '']);
        }
        rows.push([`  ${REPLICAS} replicas at a cap of ${CAP}/s (--max-renewals-per-second), cold start → every profile renewed, wall (the cap alone takes N / cap: ${fmt(Math.round((n / CAP) * 1000))} ms)`, capped.wallMs, 'ms', capped.wallMs / floorWall, '']);
        // A catch-up longer than a minute meets a later sweep, at which a profile renewed early in it may be due again:
        // spreading draws its next renewal over its whole window, which tokens of LIFETIME_S make 300 s long.
        rows.push([`  ${REPLICAS} replicas at a cap of ${CAP}/s: the most token requests within one second, against the cap (${requests(capped)}; spreading's draws over ${LIFETIME_S - 900} s included)`, capped.calls.peakPerSecond, 'requests', capped.calls.peakPerSecond / CAP, `≤ cap + ${REPLICAS} (1 per replica at a second's edges)`]);
        const renewed = three.replicas.map((r) => r.renewed);
        rows.push([`  ${REPLICAS} replicas: renewals per replica, most / fewest (${renewed.map(fmt).join(' / ')})`, Math.max(...renewed) / Math.max(1, Math.min(...renewed)), 'x', NaN, '']);
        // What a replica's heap holds per profile it serves (a worker), from the 1 replica serving all N against
        // each of the 3 serving its share; the rest (the daemon, and what it keeps of every configured profile)
        // is what the 1 replica holds less N workers.
        const perWorker = three.replicas
          .filter((r) => r.served && r.served.count < n)
          .map((r) => (o.heapUsed - r.heapUsed) / (n - r.served.count));
        const worker = perWorker.reduce((a, b) => a + b, 0) / Math.max(1, perWorker.length);
        const rest = o.heapUsed - n * worker;
        rows.push(['  heap per profile served (a worker): 1 replica against each of the 3, mean', worker / 1024, 'KiB', NaN, '']);
        rows.push(['  heap held whatever the share (the daemon, and every configured profile): 1 replica less N workers', rest / MiB, 'MiB', NaN, '']);
        rows.push(['  heap per configured profile whatever the share: (1 replica less N workers, less the base of 1 replica) / N', (rest - base.replica) / n / 1024, 'KiB', NaN, '']);
        held.push({ n, rest, worker });
      } catch (error) {
        rows.push([`${label}: FAILED (${error.message.split('\n')[0]})`, NaN, '', NaN, '']);
      } finally {
        rmSync(path.join(work, `n${n}`), { recursive: true, force: true });
      }
    }
    if (held.length >= 2) {
      const [a, b] = [held[0], held.at(-1)];
      rows.push([`fleet: heap every replica holds per configured profile, served or not (N = ${fmt(a.n)} → ${fmt(b.n)})`, (b.rest - a.rest) / (b.n - a.n) / 1024, 'KiB', NaN, '']);
      rows.push([`fleet: heap per profile served, a worker (N = ${fmt(b.n)})`, b.worker / 1024, 'KiB', NaN, '']);
    }
  } finally {
    await redis.stop();
    await emulator.close();
    rmSync(work, { recursive: true, force: true });
  }
  return rows;
}

export function printFleet(rows) {
  const figure = (v) => (Number.isNaN(v) ? '—' : Math.abs(v) >= 1000 ? Math.round(v).toLocaleString('en-US') : v.toFixed(Math.abs(v) >= 10 ? 1 : 2));
  const header = ['fleet mode against one daemon (the floor)', 'value', 'unit', 'x floor', 'target'];
  const table = [header, ...rows.map(([name, value, unit, ratio, target]) => [name, figure(value), unit, figure(ratio), target])];
  const widths = header.map((_, i) => Math.max(...table.map((r) => r[i].length)));
  console.log('\nsyncauth fleet bench — `daemon --fleet` as real processes over one generated config dir, a real redis-server, emulator in a child of its own');
  for (const row of table) console.log(row.map((c, i) => (i === 0 || i === 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ').trimEnd());
}

if (process.argv[1] === self) printFleet(await fleetRows({ log: (line) => console.error(line) }));
