// `npm run bench`: measures what a user waits for and prints a table. Not a test: nothing here fails on a
// number; targets are printed beside the measurements so a regression is visible.
import { execFile, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { promisify } from 'node:util';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import ts from 'typescript';
import { daemonRows, makeGrants, rssOf } from './daemon.mjs';
import { floorRows } from './floor.mjs';
import { printStored, scalingRow, storedRows } from './stored.mjs';
import { noticeRows, printNotice } from './notice.mjs';
import { printReconcile, reconcileRows } from './reconcile.mjs';
import { printRedaction, redactionRows } from './redaction.mjs';
import { fleetRows, printFleet } from './fleet.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// BENCH_ONLY=reconcile prints the last table alone (the stored path with each profile's connector in one workspace).
if (process.env.BENCH_ONLY === 'reconcile') {
  printReconcile(await reconcileRows());
  process.exit(0);
}
const cli = path.join(root, 'dist/cli/main.js');
const runs = Number(process.env.BENCH_RUNS ?? 15);
// BENCH_ONLY=startup prints the first table alone (start-up times and the idle daemon's resident memory).
const startupOnly = process.env.BENCH_ONLY === 'startup';
// BENCH_ONLY=notice prints the time from a revoked grant to its notice alone (BENCH_NOTICE_SIZES=1,100 to shorten it).
if (process.env.BENCH_ONLY === 'notice') {
  const sizes = (process.env.BENCH_NOTICE_SIZES ?? '1,100,1000').split(',').map(Number);
  printNotice(await noticeRows({ sizes, log: (row) => console.error(`notice bench: ${row.count} profiles done in ${row.realSeconds.toFixed(0)} s`) }));
  process.exit(0);
}
// BENCH_ONLY=redaction prints the value redaction's registry and the heap over a simulated week alone.
if (process.env.BENCH_ONLY === 'redaction') {
  printRedaction(await redactionRows());
  process.exit(0);
}
// BENCH_ONLY=fleet prints fleet mode's table alone (1 and 3 replicas against one daemon; BENCH_FLEET_SIZES=1000 to shorten it).
const fleetLog = (line) => console.error(line);
if (process.env.BENCH_ONLY === 'fleet') {
  printFleet(await fleetRows({ log: fleetLog }));
  process.exit(0);
}
const MiB = 1024 * 1024;
/** Thrown to leave the first table early under BENCH_ONLY=startup. */
class StartupOnly extends Error {}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

const run = promisify(execFile);

// Asynchronous on purpose: the emulator answers from this process, so its event loop must stay free.
async function timeOnce(args, env) {
  const start = performance.now();
  await run(process.execPath, args, { env: { ...process.env, ...env } });
  return performance.now() - start;
}

/**
 * Times several commands in interleaved rounds (a, b, c, a, b, c, …) so that a change in machine load hits
 * all of them alike; the first round warms the file-system cache and is dropped.
 */
async function timeCommands(commands) {
  const samples = commands.map(() => []);
  for (let round = 0; round <= runs; round += 1) {
    for (const [i, { args, env }] of commands.entries()) {
      const elapsed = await timeOnce(args, env ?? {});
      if (round > 0) samples[i].push(elapsed);
    }
  }
  return samples.map(median);
}

const { startEmulator, DEFAULT_EMULATOR_API_KEY, DEFAULT_APP } = await import(path.join(root, 'dist/emulator/index.js'));
const redirectPort = await new Promise((resolve) => {
  const probe = createServer().listen(0, '127.0.0.1', () => {
    const { port } = probe.address();
    probe.close(() => resolve(port));
  });
});
const redirectUri = `http://127.0.0.1:${redirectPort}/callback`;
const emulator = await startEmulator({ apps: [{ ...DEFAULT_APP, redirectUris: [redirectUri] }], autoApprove: true });
const configDir = mkdtempSync(path.join(tmpdir(), 'syncauth-bench-'));
const serviceEnv = {
  SYNCAUTH_BASE_URL: emulator.url,
  SYNCAUTH_API_KEY: DEFAULT_EMULATOR_API_KEY,
  SYNCAUTH_CONFIG_DIR: configDir,
  SYNCAUTH_STORE: 'env',
};

/** One `setup --yes` against the emulator, approving the printed authorize URL as a browser would. */
async function timeSetup(baseEnv, redirectUri) {
  const home = mkdtempSync(path.join(tmpdir(), 'syncauth-bench-setup-'));
  const env = { ...process.env, ...baseEnv, SYNCAUTH_CONFIG_DIR: path.join(home, 'config'), SYNCAUTH_REDIRECT_URI: redirectUri };
  const start = performance.now();
  await new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, 'setup', '--yes', '--no-open'], { cwd: home, env, stdio: ['ignore', 'ignore', 'pipe'] });
    let seen = '';
    let approving;
    child.stderr.on('data', (chunk) => {
      seen += chunk;
      const url = /\s(http:\/\/127\.0\.0\.1:\d+\/oauth2\/authorize\?\S+)/.exec(seen)?.[1];
      if (url && !approving) {
        approving = fetch(url, { redirect: 'manual' }).then((page) => fetch(page.headers.get('location'))).then((r) => r.text());
      }
    });
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`setup exited ${code}: ${seen}`))));
  });
  const elapsed = performance.now() - start;
  rmSync(home, { recursive: true, force: true });
  return elapsed;
}


/**
 * Resident memory of `args` run as a child once it is idle: after `ready` resolves (the daemon answers
 * /readyz), a settling pause, then the median of a few samples a little apart. With `settledMs`, a second
 * median that long after readiness: V8 gives back the heap start-up grew (its memory reducer, on a timer of its
 * own, typically 9-20 s after start) only once the process has been idle for a while.
 */
async function idleRss(args, env, ready, settledMs) {
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk) => (out += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk) => (out += chunk));
  const exited = new Promise((resolve) => child.once('close', resolve));
  try {
    await Promise.race([ready(() => out), exited.then((code) => Promise.reject(new Error(`exited ${code}: ${out}`)))]);
    const readyAt = performance.now();
    const sample = async () => {
      const samples = [];
      for (let i = 0; i < 5; i += 1) {
        samples.push(rssOf(child.pid));
        await sleep(200);
      }
      return median(samples);
    };
    await sleep(2_000);
    const early = await sample();
    if (settledMs === undefined) return early;
    await sleep(Math.max(0, settledMs - (performance.now() - readyAt)));
    return [early, await sample()];
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

/** Polls `check` until it returns something, for at most 30 s. */
async function until(what, check) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/**
 * The CLI as it was before it was bundled, for the comparison rows: tsc's src/cli/main.ts (the build replaces
 * dist/cli/main.js by the bundle, scripts/bundle-cli.mjs) written beside it, so that it loads dist/'s modules
 * one by one as the unbundled package did. Removed at the end of the run.
 */
function unbundledCli() {
  const file = path.join(root, 'dist/cli/.bench-unbundled.js');
  const { outputText } = ts.transpileModule(readFileSync(path.join(root, 'src/cli/main.ts'), 'utf8'), {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  });
  writeFileSync(file, outputText);
  return file;
}

const rows = [];
try {
  const unbundled = unbundledCli();
  const [bare, help, list, listUnbundled] = await timeCommands([
    { args: ['-e', '0'] },
    { args: [cli, '--help'] },
    { args: [cli, 'source', 'list'], env: serviceEnv },
    { args: [unbundled, 'source', 'list'], env: serviceEnv },
  ]);
  rows.push(['node -e 0 (baseline)', bare, 1, '']);
  rows.push(['syncauth --help', help, help / bare, '≤ 1.3x']);
  rows.push(['syncauth source list (emulator)', list, list / bare, '≤ 2x']);
  rows.push(['  the same, unbundled (tsc\'s dist/ alone, as before)', listUnbundled, listUnbundled / bare, '']);

  // The daemon as a container runs it (one profile from the environment, health on loopback), idle after its
  // first renewal, against an idle node holding its event loop open.
  const [grant] = await makeGrants(emulator, { ...DEFAULT_APP, redirectUris: [redirectUri] }, 1);
  const daemonHome = mkdtempSync(path.join(tmpdir(), 'syncauth-bench-idle-'));
  const daemonEnv = {
    SYNCAUTH_CONFIG_DIR: path.join(daemonHome, 'config'), SYNCAUTH_STORE: 'env', SYNCAUTH_PROFILE: 'bench',
    SYNCAUTH_APP_KEY: DEFAULT_APP.appKey, SYNCAUTH_APP_SECRET: DEFAULT_APP.appSecret, SYNCAUTH_REFRESH_TOKEN: grant,
    SYNCAUTH_API_KEY: DEFAULT_EMULATOR_API_KEY, SYNCAUTH_BASE_URL: emulator.url, SYNCAUTH_REMOTE_URL: 'dropbox://data',
    SYNCAUTH_TOKEN_URL: emulator.tokenUrl, SYNCAUTH_DROPBOX_API_URL: emulator.apiUrl, SYNCAUTH_LISTEN: '127.0.0.1:0',
    SYNCAUTH_TOKEN_FILE: path.join(daemonHome, 'token'),
  };
  try {
    const idleNode = await idleRss(['-e', 'setInterval(() => {}, 1 << 30)'], {}, async () => {});
    const ready = (seen) =>
      until('the daemon to be ready', async () => {
        const listen = /"listen":"(http:[^"]+)"/.exec(seen())?.[1];
        return listen && (await fetch(`${listen}/readyz`)).status === 200 ? true : undefined;
      });
    const [idleDaemon, settledDaemon] = await idleRss([cli, 'daemon'], daemonEnv, ready, 30_000);
    rows.push(['idle node (baseline): rss, MiB', idleNode / MiB, 1, '']);
    rows.push(['syncauth daemon idle, one profile: rss, MiB', idleDaemon / MiB, idleDaemon / idleNode, '≤ 1.5x']);
    rows.push(['  the same, 30 s after ready (start-up heap returned)', settledDaemon / MiB, settledDaemon / idleNode, '']);
    const idleUnbundled = await idleRss([unbundled, 'daemon'], { ...daemonEnv, SYNCAUTH_TOKEN_FILE: path.join(daemonHome, 'token-b') }, ready);
    rows.push(['  the same, unbundled (as before)', idleUnbundled / MiB, idleUnbundled / idleNode, '']);
  } finally {
    rmSync(daemonHome, { recursive: true, force: true });
  }
  if (startupOnly) throw new StartupOnly();

  // status reads one saved profile: make it with one setup, then time status alone.
  const setupEnv = {
    SYNCAUTH_BASE_URL: emulator.url, SYNCAUTH_API_KEY: DEFAULT_EMULATOR_API_KEY, SYNCAUTH_STORE: 'file',
    SYNCAUTH_STORE_KEY: 'bench-store-key-of-enough-length', SYNCAUTH_APP_KEY: DEFAULT_APP.appKey, SYNCAUTH_APP_SECRET: DEFAULT_APP.appSecret,
    SYNCAUTH_AUTHORIZE_URL: emulator.authorizeUrl, SYNCAUTH_TOKEN_URL: emulator.tokenUrl, SYNCAUTH_DROPBOX_API_URL: emulator.apiUrl,
    SYNCAUTH_REMOTE_URL: 'dropbox://data',
  };
  const setups = [];
  for (let i = 0; i < Math.max(3, Math.ceil(runs / 3)); i += 1) setups.push(await timeSetup(setupEnv, redirectUri));
  rows.push(['syncauth setup end to end (emulator, approval automated)', median(setups), median(setups) / bare, '']);
  await run(process.execPath, [cli, 'refresh'], { env: { ...process.env, ...setupEnv, SYNCAUTH_CONFIG_DIR: configDir, SYNCAUTH_STORE: 'env', SYNCAUTH_REFRESH_TOKEN: [...emulator.state.grants.values()][0].refreshToken } });
  const [bare2, status] = await timeCommands([
    { args: ['-e', '0'] },
    { args: [cli, 'status'], env: { SYNCAUTH_CONFIG_DIR: configDir } },
  ]);
  rows.push(['syncauth status (one profile)', status, status / bare2, '']);
} catch (error) {
  if (!(error instanceof StartupOnly)) throw error;
} finally {
  await emulator.close();
  rmSync(configDir, { recursive: true, force: true });
  rmSync(path.join(root, 'dist/cli/.bench-unbundled.js'), { force: true });
}

const header = ['measurement', 'median ms', 'x node', 'target'];
const table = [header, ...rows.map(([name, ms, ratio, target]) => [name, ms.toFixed(1), ratio.toFixed(2), target])];
const widths = header.map((_, i) => Math.max(...table.map((r) => r[i].length)));
console.log(`syncauth bench — Node ${process.version}, ${runs} runs each, median`);
for (const row of table) console.log(row.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  '));
if (startupOnly) process.exit(0);

// The renewal path against its floor: one process, one token endpoint, the same N and concurrency.
const floor = await floorRows();
const floorHeader = ['renewal path against the floor', 'value', 'unit', 'x floor', 'target'];
const floorTable = [floorHeader, ...floor.map(([name, value, unit, ratio, target]) => [name, value.toFixed(3), unit, ratio.toFixed(2), target])];
const floorWidths = floorHeader.map((_, i) => Math.max(...floorTable.map((r) => r[i].length)));
console.log(`\nsyncauth renewal bench — in one process against the emulator's token endpoint (a child of its own); the floor warmed up first`);
for (const row of floorTable) console.log(row.map((c, i) => (i === 0 || i === 2 ? c.padEnd(floorWidths[i]) : c.padStart(floorWidths[i]))).join('  ').trimEnd());

// The daemon's table, measured after the commands above so that neither disturbs the other.
const daemon = await daemonRows();
const figure = (v) => (Number.isNaN(v) ? '—' : Math.abs(v) >= 1000 ? Math.round(v).toLocaleString('en-US') : v.toFixed(Math.abs(v) >= 10 ? 1 : 2));
const daemonHeader = ['daemon measurement', 'value', 'unit', 'target'];
const daemonTable = [daemonHeader, ...daemon.map(([name, value, unit, target]) => [name, figure(value), unit, target])];
const daemonWidths = daemonHeader.map((_, i) => Math.max(...daemonTable.map((r) => r[i].length)));
console.log(`\nsyncauth daemon bench — one child process per measurement, emulator in a child of its own`);
for (const row of daemonTable) console.log(row.map((c, i) => (i === 0 || i === 2 ? c.padEnd(daemonWidths[i]) : c.padStart(daemonWidths[i]))).join('  ').trimEnd());

// The stored path: `daemon --once` over N profiles in the encrypted file store, against the library path.
const stored = await storedRows();
const scaling = scalingRow(stored);
if (scaling) stored.push(scaling);
printStored(stored);

// The stored path again, each profile with its connector in one workspace, as operators make them.
printReconcile(await reconcileRows());

// The time from a revoked grant to its notice, on a virtual clock: last, being the longest.
printNotice(await noticeRows());

// The value redaction's registry and the daemon's heap across a simulated week of renewals.
printRedaction(await redactionRows());

// Fleet mode: N shared profiles renewed from a cold start by 1 and by 3 replicas over one Redis, against one daemon.
printFleet(await fleetRows({ log: fleetLog }));
