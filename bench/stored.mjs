// The stored path, for `npm run bench`: `syncauth daemon --once` over N profiles kept in the encrypted file store,
// as a real process, against the library path measured in the same run (startDaemon in a process of its own,
// its grants in memory, no store) at the same N, concurrency and token lifetime.
//
// The config dirs are written by a generator through the package's own stores (dist/credentials,
// dist/profile), as `setup` writes them, but for the service's API key: without it a renewal is the token step
// alone, as on the library path, and no connector is updated. A check row compares a generated profile with two
// made by a real `setup` (the state's fields and the stored secrets' names).
//
// Per N, two `--once` runs: the first finds every profile due and renews them all; the second, right after,
// finds none due (the tokens live longer than the renew margin), so it is start-up and loading alone. CPU per
// renewal is the difference of the two runs' CPU over N. CPU and peak RSS are the child's own (every thread),
// written at its exit by bench/usage.mjs. Then, with a `syncauth daemon` serving the N profiles, the median wall
// of `status --profile P` and `token --profile P`, against the same beside a daemon serving one profile.
//
// The keychain row (N = BENCH_STORED_KEYCHAIN, default 100): the same `--once` pair over profiles kept in the
// keychain store, on a real Secret Service (gnome-keyring on a private D-Bus session) started for the bench by
// the tests' own helper (test/helpers/secret-service.ts, transpiled here with esbuild), the generator writing
// through the package's keychain store. The keychain's work happens outside the daemon's process, so beside
// the daemon's own CPU the rows give the keychain children it started per renewal (counted in the daemon by a
// preload that watches its spawns; exact, where a difference of CPU would drown in the loading's), the CPU of
// one such child (the bench's CPU of reaped descendants, /proc/self/stat, less the daemon's own, over the
// children of the run with none due), and what gnome-keyring-daemon used per renewal.
// Not a test: nothing here fails on a number.
import { execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { child, emulatorChild, makeGrants, quietLogger } from './daemon.mjs';
import { serveRole } from './roles.mjs';

const self = fileURLToPath(import.meta.url);
const own = path.resolve(path.dirname(self), '..');
// SYNCAUTH_BENCH_ROOT measures another build (e.g. an earlier release's checkout) with this bench.
const root = process.env.SYNCAUTH_BENCH_ROOT ? path.resolve(process.env.SYNCAUTH_BENCH_ROOT) : own;
const dist = (file) => import(pathToFileURL(path.join(root, 'dist', file)).href);
const cli = path.join(root, 'dist/cli/main.js');

const SIZES = (process.env.BENCH_STORED_SIZES ?? '100,1000,10000').split(',').filter(Boolean).map(Number);
/** N of the keychain rows; BENCH_STORED_KEYCHAIN= (empty) leaves them out. */
const KEYCHAIN_SIZES = (process.env.BENCH_STORED_KEYCHAIN ?? '100').split(',').filter(Boolean).map(Number);
const CONCURRENCY = 16;
/** Short-lived tokens, still longer than the default 900 s renew margin: a second run right after finds none due. */
const LIFETIME_S = 1_200;
const STORE_KEY = 'bench-store-key-of-enough-length';
const MiB = 1024 * 1024;
/** Runs of `status` and `token` beside a running daemon, per N; the median is shown. */
const BESIDE_RUNS = 5;

/**
 * What `setup` writes to a profile's state, minus what the stores fill in (version, name, times): due, its token
 * run out a minute ago after a lifetime of `lifetimeS`.
 */
export function stateLike(name, urls, lifetimeS = LIFETIME_S) {
  return {
    baseUrl: urls.url,
    apiKeyHeader: 'service-api-key',
    remoteUrl: 'dropbox://data',
    recursive: false,
    access: 'read',
    connectorId: `00000000-0000-4000-8000-${String(name.length).padStart(4, '0')}${String(Math.abs(hash(name))).padStart(8, '0').slice(0, 8)}`,
    connectorName: 'dropbox-data',
    // The Dropbox account setup records (a re-authorization must come from the same one).
    accountId: `dbid:AAH${String(Math.abs(hash(name))).padStart(10, '0')}`,
    authorizeUrl: urls.authorizeUrl,
    tokenUrl: urls.tokenUrl,
    dropboxApiUrl: urls.apiUrl,
    redirectUri: 'http://127.0.0.1:53682/callback',
    // Due: the token setup got has run out.
    accessTokenExpiresAt: new Date(Date.now() - 60_000).toISOString(),
    lastRenewalAt: new Date(Date.now() - lifetimeS * 1000).toISOString(),
    needsReauthorization: false,
  };
}

function hash(text) {
  let h = 0;
  for (const c of text) h = (h * 31 + c.charCodeAt(0)) | 0;
  return h;
}

const roles = {
  /**
   * Writes `names` into `dir` through the package's stores, sixteen at a time. With `accountId`, the state records
   * that Dropbox account (the grants' own), for a daemon whose token checks compare it with the token's.
   */
  async generate({ dir, names, refreshTokens, app, urls, bus, accountId }) {
    const { openFileSecretStore, openSecretStore } = await dist('credentials/index.js');
    const { openProfileStore } = await dist('profile/index.js');
    const secrets = bus
      ? openSecretStore({ kind: 'keychain', configDir: dir, env: { ...process.env, DBUS_SESSION_BUS_ADDRESS: bus }, timeoutMs: 30_000 })
      : openFileSecretStore({ configDir: dir, storeKey: () => STORE_KEY });
    const state = openProfileStore(dir);
    let next = 0;
    // The keychain store writes one profile at a time under its index lock, each in a child of its own.
    await Promise.all(Array.from({ length: bus ? 1 : CONCURRENCY }, async () => {
      while (next < names.length) {
        const i = next++;
        const name = names[i];
        await secrets.set(name, { app_key: app.appKey, app_secret: app.appSecret, refresh_token: refreshTokens[i] });
        await state.update(name, () => ({ ...stateLike(name, urls), ...(accountId ? { accountId } : {}), secretsVersion: randomUUID() }));
      }
    }));
    return { written: names.length };
  },

  /** The library path: startDaemon over the same grants in memory, one sweep; CPU and peak RSS of this process. */
  async library({ n, refreshTokens, app, tokenUrl }) {
    const { startDaemon } = await dist('daemon/index.js');
    const { openProfileStore } = await dist('profile/index.js');
    const work = mkdtempSync(path.join(tmpdir(), 'syncauth-bench-library-'));
    try {
      const cpu = process.cpuUsage();
      const start = performance.now();
      const daemon = await startDaemon({
        profiles: refreshTokens.slice(0, n).map((refreshToken, i) => ({ name: `p${i}`, tokenUrl, grant: { appKey: app.appKey, appSecret: app.appSecret, refreshToken } })),
        profileStore: openProfileStore(work),
        renewMarginMs: 900_000,
        schedule: false,
        concurrency: CONCURRENCY,
        logger: await quietLogger(),
      });
      const report = await daemon.sweep();
      await daemon.close();
      const used = process.cpuUsage(cpu);
      return {
        ms: performance.now() - start,
        cpuMs: (used.user + used.system) / 1000,
        renewed: report.profiles.filter((p) => p.renewal === 'renewed').length,
        maxRss: process.resourceUsage().maxRSS * 1024,
      };
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  },
};

/** Clock ticks per second, the unit of /proc's CPU times. */
const TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU ms from /proc/<pid>/stat: the process's own (utime + stime), or its reaped descendants' (cutime + cstime). */
function procCpuMs(pid, which) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Field n of proc(5) is fields[n - 3]: utime 14, stime 15, cutime 16, cstime 17.
    const [a, b] = which === 'own' ? [fields[11], fields[12]] : [fields[13], fields[14]];
    return ((Number(a) + Number(b)) * 1000) / TICKS;
  } catch {
    return NaN;
  }
}

/** The gnome-keyring-daemon serving the bus at `address` (its environment names the bus), or undefined. */
function keyringDaemonPid(address) {
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('gnome-keyring-daemon')) continue;
      if (readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`DBUS_SESSION_BUS_ADDRESS=${address}`)) return Number(pid);
    } catch {
      // gone, or not ours to read
    }
  }
  return undefined;
}

/**
 * `syncauth daemon --once` over `dir`: wall ms, CPU ms and peak RSS of the child, and its exit code. With `bus`,
 * over the keychain store on that bus, and also the CPU of the child with its reaped descendants (the keychain
 * helpers) and of the bus's gnome-keyring-daemon over the run.
 */
export function once(dir, bus) {
  const usageFile = path.join(dir, '..', `usage-${process.hrtime.bigint()}.json`);
  const childrenFile = `${usageFile}.children`;
  const counting = bus ? ['--import', pathToFileURL(bus.counter).href] : [];
  const store = bus ? { SYNCAUTH_STORE: 'keychain', DBUS_SESSION_BUS_ADDRESS: bus.address } : { SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: STORE_KEY };
  const treeBefore = procCpuMs('self', 'children');
  const keyringBefore = bus?.keyringPid ? procCpuMs(bus.keyringPid, 'own') : NaN;
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const proc = spawn(process.execPath, ['--import', pathToFileURL(path.join(own, 'bench/usage.mjs')).href, ...counting, cli, 'daemon', '--once', '--concurrency', String(CONCURRENCY)], {
      env: { PATH: process.env.PATH, HOME: dir, SYNCAUTH_CONFIG_DIR: dir, ...store, SYNCAUTH_LOG_LEVEL: 'warn', BENCH_USAGE_FILE: usageFile, BENCH_KEYCHAIN_CHILDREN_FILE: childrenFile },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    proc.stderr.on('data', (chunk) => (stderr = (stderr + chunk).slice(-2000)));
    proc.on('error', reject);
    proc.on('close', (code) => {
      const ms = performance.now() - start;
      try {
        const usage = JSON.parse(readFileSync(usageFile, 'utf8'));
        rmSync(usageFile, { force: true });
        const cpuMs = (usage.userCPUTime + usage.systemCPUTime) / 1000;
        const keychainChildren = bus ? Number(readFileSync(childrenFile, 'utf8')) : NaN;
        rmSync(childrenFile, { force: true });
        resolve({
          keychainChildren,
          code, ms, cpuMs, maxRss: usage.maxRSS * 1024, stderr,
          // The daemon is reaped by now, its own children by it: both are in this process's count.
          treeCpuMs: procCpuMs('self', 'children') - treeBefore,
          keyringCpuMs: bus?.keyringPid ? procCpuMs(bus.keyringPid, 'own') - keyringBefore : NaN,
        });
      } catch {
        reject(new Error(`daemon --once exited ${code} without its usage: ${stderr}`));
      }
    });
  });
}

const childEnv = (dir, extra = {}) => ({ PATH: process.env.PATH, HOME: dir, SYNCAUTH_CONFIG_DIR: dir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: STORE_KEY, ...extra });

/** One CLI command over `dir`: wall ms and exit code. */
function command(dir, args) {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const proc = spawn(process.execPath, [cli, ...args], { env: childEnv(dir, { SYNCAUTH_LOG_LEVEL: 'warn' }), stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    proc.stderr.on('data', (chunk) => (stderr = (stderr + chunk).slice(-2000)));
    proc.on('error', reject);
    proc.on('close', (code) => resolve({ code, ms: performance.now() - start, stderr }));
  });
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/**
 * `status --profile P` and `token --profile P` while a `syncauth daemon` serves every profile of `dir` (its
 * tokens fresh, so `token` takes the kept one): the median wall of BESIDE_RUNS runs of each.
 */
async function besideDaemon(dir, profile) {
  const daemon = spawn(process.execPath, [cli, 'daemon', '--concurrency', String(CONCURRENCY)], { env: childEnv(dir, { SYNCAUTH_LOG_LEVEL: 'info' }), stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => daemon.once('close', resolve));
  try {
    await new Promise((resolve, reject) => {
      let seen = '';
      const timer = setTimeout(() => reject(new Error('the daemon did not start within 600 s')), 600_000);
      daemon.stdout.on('data', (chunk) => {
        // The started line names every profile: with 10,000 it spans many chunks, so the tail kept is short.
        const text = seen + chunk;
        seen = text.slice(-100);
        if (text.includes('"event":"daemon.started"')) {
          clearTimeout(timer);
          resolve();
        }
      });
      daemon.once('close', (code) => reject(new Error(`the daemon exited ${code} before it started`)));
    });
    const result = {};
    for (const what of ['status', 'token']) {
      const runs = [];
      for (let i = 0; i < BESIDE_RUNS; i++) {
        const run = await command(dir, [what, '--profile', profile]);
        if (run.code !== 0) throw new Error(`${what} exited ${run.code}: ${run.stderr.trim().split('\n').at(-1)}`);
        runs.push(run.ms);
      }
      result[what] = median(runs);
    }
    return result;
  } finally {
    daemon.kill('SIGTERM');
    await exited;
  }
}

/** Profiles of `dir` renewed since `since` (ms), from their state as the package reads it (renewal records laid over). */
export async function renewedSince(dir, since) {
  const { openProfileStore } = await dist('profile/index.js');
  const states = await openProfileStore(dir).list();
  return states.filter((state) => Date.parse(state.lastRenewalAt ?? '') >= since).length;
}

/** Runs `setup --yes` for `profile` into `dir` against the emulator, approving as a browser would. */
function realSetup(dir, profile, emulator, app) {
  const env = {
    PATH: process.env.PATH, HOME: path.dirname(dir), SYNCAUTH_CONFIG_DIR: dir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: STORE_KEY,
    SYNCAUTH_BASE_URL: emulator.url, SYNCAUTH_API_KEY: emulator.apiKey, SYNCAUTH_APP_KEY: app.appKey, SYNCAUTH_APP_SECRET: app.appSecret,
    SYNCAUTH_AUTHORIZE_URL: emulator.authorizeUrl, SYNCAUTH_TOKEN_URL: emulator.tokenUrl, SYNCAUTH_DROPBOX_API_URL: emulator.apiUrl,
    SYNCAUTH_REMOTE_URL: 'dropbox://data', SYNCAUTH_REDIRECT_URI: app.redirectUris[0],
  };
  mkdirSync(path.dirname(dir), { recursive: true });
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [cli, 'setup', '--yes', '--no-open', '--no-workflow', '--profile', profile], { cwd: path.dirname(dir), env, stdio: ['ignore', 'ignore', 'pipe'] });
    let seen = '';
    let approving;
    proc.stderr.on('data', (chunk) => {
      seen += chunk;
      const url = /\s(http:\/\/127\.0\.0\.1:\d+\/oauth2\/authorize\?\S+)/.exec(seen)?.[1];
      if (url && !approving) approving = fetch(url, { redirect: 'manual' }).then((page) => fetch(page.headers.get('location'))).then((r) => r.text());
    });
    proc.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`setup exited ${code}: ${seen.slice(-500)}`))));
  });
}

/** The shape of a profile: its state's fields and its stored secrets' names. */
async function shapeOf(dir, name) {
  const { openFileSecretStore } = await dist('credentials/index.js');
  const state = JSON.parse(readFileSync(path.join(dir, 'profiles', `${name}.json`), 'utf8'));
  const secrets = await openFileSecretStore({ configDir: dir, storeKey: () => STORE_KEY }).get(name);
  return { state: Object.keys(state).sort().join(','), secrets: Object.keys(secrets).sort().join(',') };
}

/** Rows of [measurement, value, unit, ratio, target]. */
export async function storedRows() {
  const { DEFAULT_APP, DEFAULT_EMULATOR_API_KEY } = await dist('emulator/index.js');
  const app = DEFAULT_APP;
  const emulator = { ...(await emulatorChild([], { tokenLifetimeSeconds: LIFETIME_S })), apiKey: DEFAULT_EMULATOR_API_KEY };
  const work = mkdtempSync(path.join(tmpdir(), 'syncauth-bench-stored-'));
  const rows = [];
  try {
    const refreshTokens = await makeGrants(emulator, app, Math.max(...SIZES, ...KEYCHAIN_SIZES) + 1);
    const urls = { url: emulator.url, authorizeUrl: emulator.authorizeUrl, tokenUrl: emulator.tokenUrl, apiUrl: emulator.apiUrl };

    // The generator against real setup: the same state fields and secret names (but the service's API key).
    try {
      const real = path.join(work, 'setup', 'config');
      for (const name of ['real-1', 'real-2']) await realSetup(real, name, emulator, app);
      const made = path.join(work, 'made', 'config');
      await child('generate', { dir: made, names: ['made-1'], refreshTokens: refreshTokens.slice(0, 1), app, urls }, { file: self });
      const [a, b, g] = [await shapeOf(real, 'real-1'), await shapeOf(real, 'real-2'), await shapeOf(made, 'made-1')];
      const withoutApiKey = (shape) => ({ ...shape, secrets: shape.secrets.split(',').filter((n) => n !== 'api_key').join(',') });
      const differences = [a, b].flatMap((shape) => {
        const real = withoutApiKey(shape);
        return ['state', 'secrets'].flatMap((part) => {
          const mine = new Set(g[part].split(','));
          const theirs = new Set(real[part].split(','));
          return [...[...theirs].filter((k) => !mine.has(k)).map((k) => `${part}: setup has ${k}`), ...[...mine].filter((k) => !theirs.has(k)).map((k) => `${part}: generator has ${k}`)];
        });
      });
      const same = differences.length === 0;
      rows.push([`generated profile has the state fields and secret names of 2 made by real setup (but api_key)${same ? '' : `: NO (${[...new Set(differences)].join('; ')})`}`, same ? 1 : 0, same ? 'yes' : 'no', NaN, '']);
    } catch (error) {
      rows.push([`generator check against real setup: FAILED (${error.message.split('\n')[0]})`, NaN, '', NaN, '']);
    }

    // `status` and `token` beside a daemon serving one profile: what the rows of each N are compared with.
    let single;
    try {
      const dir = path.join(work, 'single', 'config');
      await child('generate', { dir, names: ['p00000'], refreshTokens: refreshTokens.slice(-1), app, urls }, { file: self });
      await once(dir);
      single = await besideDaemon(dir, 'p00000');
      rows.push(['status --profile P beside a daemon serving 1 profile, wall (median)', single.status, 'ms', NaN, '']);
      rows.push(['token --profile P beside a daemon serving 1 profile, wall (median)', single.token, 'ms', NaN, '']);
    } catch (error) {
      rows.push([`status / token beside a daemon serving 1 profile: FAILED (${error.message.split('\n')[0]})`, NaN, '', NaN, '']);
    }

    /** The library path's sweep per N, for the keychain rows of the same N. */
    const libraries = new Map();
    for (const n of SIZES) {
      const label = `N = ${n.toLocaleString('en-US')}, concurrency ${CONCURRENCY}, tokens of ${LIFETIME_S} s`;
      const dir = path.join(work, `n${n}`, 'config');
      const names = Array.from({ length: n }, (_, i) => `p${String(i).padStart(5, '0')}`);
      const genStart = performance.now();
      await child('generate', { dir, names, refreshTokens: refreshTokens.slice(0, n), app, urls }, { file: self, timeoutMs: 1_800_000 });
      const genMs = performance.now() - genStart;
      const since = Date.now();
      const due = await once(dir);
      const renewed = await renewedSince(dir, since);
      const idle = await once(dir);
      let beside;
      try {
        beside = await besideDaemon(dir, names[0]);
      } catch (error) {
        beside = { error: error.message.split('\n')[0] };
      }
      const library = await child('library', { n, refreshTokens, app, tokenUrl: emulator.tokenUrl }, { file: self, timeoutMs: 1_800_000 });
      const perStored = Math.max(0, due.cpuMs - idle.cpuMs) / Math.max(1, renewed);
      const perLibrary = library.cpuMs / Math.max(1, library.renewed);
      const note = renewed === n && due.code === 0 ? '' : ` [exit ${due.code}, ${renewed} of ${n} renewed${due.code === 0 ? '' : `: ${due.stderr.trim().split('\n').at(-1)}`}]`;
      rows.push([`${label}: library path (startDaemon, grants in memory), CPU / renewal`, perLibrary, 'ms', 1, '']);
      rows.push([`  stored path (daemon --once, file store), CPU / renewal${note}`, perStored, 'ms', perStored / perLibrary, '≤ 3x library; ≤ 1.5x N=100']);
      rows.push(['  stored path, daemon --once over N due profiles, wall', due.ms, 'ms', due.ms / library.ms, n === 1000 ? '≤ 10,000 ms' : '']);
      rows.push(['  stored path, daemon --once, CPU (start-up, loading, renewals)', due.cpuMs, 'ms', due.cpuMs / library.cpuMs, '']);
      rows.push(['  stored path, daemon --once with none due (start-up and loading), wall', idle.ms, 'ms', NaN, '']);
      rows.push(['  stored path, daemon --once, peak RSS', due.maxRss / MiB, 'MiB', due.maxRss / library.maxRss, n >= 10_000 ? '≤ 300 MiB' : '']);
      rows.push(['  library path, sweep wall / peak RSS', library.ms, 'ms', library.maxRss / MiB, '(ratio column: MiB)']);
      rows.push(['  generator, writing N profiles through the stores, wall', genMs, 'ms', NaN, '']);
      if (beside.error) rows.push([`  status / token beside a daemon serving N profiles: FAILED (${beside.error})`, NaN, '', NaN, '']);
      else {
        rows.push(['  status --profile P beside a daemon serving N profiles, wall (median; ratio: against 1 profile)', beside.status, 'ms', single ? beside.status / single.status : NaN, '≤ 2x']);
        rows.push(['  token --profile P beside a daemon serving N profiles, wall (median; ratio: against 1 profile)', beside.token, 'ms', single ? beside.token / single.token : NaN, '≤ 2x']);
      }
      rmSync(path.dirname(dir), { recursive: true, force: true });
      libraries.set(n, library);
    }

    for (const n of KEYCHAIN_SIZES) rows.push(...(await keychainRows(n, { work, refreshTokens, app, urls, emulator, libraries })));
  } finally {
    await emulator.close();
    rmSync(work, { recursive: true, force: true });
  }
  return rows;
}

/** A preload for the daemon: counts the keychain helpers it starts and writes the count at exit. */
const KEYCHAIN_COUNTER = `import childProcess from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
let started = 0;
const spawn = childProcess.spawn;
childProcess.spawn = function (command, args, ...rest) {
  if (Array.isArray(args) && args.some((arg) => typeof arg === 'string' && arg.endsWith('keychain-child.cjs'))) started += 1;
  return spawn.call(this, command, args, ...rest);
};
syncBuiltinESMExports();
process.on('exit', () => writeFileSync(process.env.BENCH_KEYCHAIN_CHILDREN_FILE, String(started)));
`;

/** The transpiled tests' helper that starts a private bus with an unlocked gnome-keyring on it. */
async function secretServiceHelper(work) {
  const { transform } = await import('esbuild');
  const source = readFileSync(path.join(own, 'test/helpers/secret-service.ts'), 'utf8');
  const { code } = await transform(source, { loader: 'ts', format: 'esm', platform: 'node', target: 'node20' });
  const file = path.join(work, 'secret-service.mjs');
  writeFileSync(file, code);
  return import(pathToFileURL(file).href);
}

/**
 * The keychain rows at `n`: the `--once` pair over `n` profiles in the keychain store of a Secret Service of
 * their own, against the library path at the same N (measured for the file rows when they had this N).
 */
async function keychainRows(n, { work, refreshTokens, app, urls, emulator, libraries }) {
  const label = `N = ${n.toLocaleString('en-US')} keychain, concurrency ${CONCURRENCY}, tokens of ${LIFETIME_S} s`;
  const { startSecretService } = await secretServiceHelper(work);
  const started = await startSecretService();
  if (!started.ok) return [[`${label}: FAILED, no Secret Service (${started.reason})`, NaN, '', NaN, '']];
  const counter = path.join(work, 'count-keychain-children.mjs');
  writeFileSync(counter, KEYCHAIN_COUNTER);
  const bus = { address: started.bus.address, keyringPid: keyringDaemonPid(started.bus.address), counter };
  const dir = path.join(work, `keychain-n${n}`, 'config');
  try {
    const names = Array.from({ length: n }, (_, i) => `k${String(i).padStart(5, '0')}`);
    const genStart = performance.now();
    await child('generate', { dir, names, refreshTokens: refreshTokens.slice(0, n), app, urls, bus: bus.address }, { file: self, timeoutMs: 1_800_000 });
    const genMs = performance.now() - genStart;
    const since = Date.now();
    const due = await once(dir, bus);
    const renewed = await renewedSince(dir, since);
    const idle = await once(dir, bus);
    const library = libraries.get(n) ?? (await child('library', { n, refreshTokens, app, tokenUrl: emulator.tokenUrl }, { file: self, timeoutMs: 1_800_000 }));
    const per = (a, b) => Math.max(0, a - b) / Math.max(1, renewed);
    const perLibrary = library.cpuMs / Math.max(1, library.renewed);
    const perOwn = per(due.cpuMs, idle.cpuMs);
    const childrenPer = per(due.keychainChildren, idle.keychainChildren);
    const perChild = (idle.treeCpuMs - idle.cpuMs) / Math.max(1, idle.keychainChildren);
    const perWithChildren = perOwn + childrenPer * perChild;
    const perKeyring = per(due.keyringCpuMs, idle.keyringCpuMs);
    const note = renewed === n && due.code === 0 ? '' : ` [exit ${due.code}, ${renewed} of ${n} renewed${due.code === 0 ? '' : `: ${due.stderr.trim().split('\n').at(-1)}`}]`;
    return [
      [`${label}: library path (startDaemon, grants in memory), CPU / renewal`, perLibrary, 'ms', 1, ''],
      [`  stored path (daemon --once, keychain store), CPU / renewal${note}`, perOwn, 'ms', perOwn / perLibrary, '≤ 3x library'],
      ['  stored path, keychain store, keychain children started / renewal (counted in the daemon)', childrenPer, '', NaN, ''],
      [`  stored path, keychain store, CPU of one keychain child (${idle.keychainChildren} in the run with none due)`, perChild, 'ms', NaN, ''],
      ['  stored path, keychain store, CPU / renewal with its keychain children (own + children x CPU of one)', perWithChildren, 'ms', perWithChildren / perLibrary, ''],
      ['  stored path, keychain store, gnome-keyring-daemon CPU / renewal', perKeyring, 'ms', NaN, ''],
      ['  stored path, keychain store, daemon --once over N due profiles, wall', due.ms, 'ms', due.ms / library.ms, ''],
      ['  stored path, keychain store, daemon --once with none due (start-up and loading), wall', idle.ms, 'ms', NaN, ''],
      ['  stored path, keychain store, daemon --once with none due, CPU with its keychain children / gnome-keyring-daemon', idle.treeCpuMs, 'ms', idle.keyringCpuMs, '(ratio column: ms)'],
      ['  stored path, keychain store, daemon --once, peak RSS', due.maxRss / MiB, 'MiB', due.maxRss / library.maxRss, ''],
      ['  generator, writing N profiles through the keychain store, wall', genMs, 'ms', NaN, ''],
    ];
  } catch (error) {
    return [[`${label}: FAILED (${error.message.split('\n')[0]})`, NaN, '', NaN, '']];
  } finally {
    await started.bus.stop();
    rmSync(path.dirname(dir), { recursive: true, force: true });
  }
}

/** The per-renewal CPU of the largest N against the smallest, from the rows above. */
export function scalingRow(rows) {
  const per = rows.filter(([name]) => name.startsWith('  stored path (daemon --once, file store), CPU / renewal')).map(([, value]) => value);
  if (per.length < 2) return undefined;
  return [`stored path CPU / renewal, N = ${SIZES.at(-1).toLocaleString('en-US')} against N = ${SIZES[0].toLocaleString('en-US')}`, per.at(-1), 'ms', per.at(-1) / per[0], '≤ 1.5x'];
}

if (process.argv[1] === self && process.argv[2] in roles) {
  serveRole(roles, process.argv[2]);
} else if (process.argv[1] === self) {
  // `node bench/stored.mjs`: this table alone.
  const rows = await storedRows();
  const scaling = scalingRow(rows);
  if (scaling) rows.push(scaling);
  printStored(rows);
}

export function printStored(rows) {
  const figure = (v) => (Number.isNaN(v) ? '—' : Math.abs(v) >= 1000 ? Math.round(v).toLocaleString('en-US') : v.toFixed(Math.abs(v) >= 10 ? 1 : 3));
  const header = ['stored path (file and keychain stores) against the library path', 'value', 'unit', 'x library', 'target'];
  const table = [header, ...rows.map(([name, value, unit, ratio, target]) => [name, figure(value), unit, figure(ratio), target])];
  const widths = header.map((_, i) => Math.max(...table.map((r) => r[i].length)));
  console.log('\nsyncauth stored-path bench — `daemon --once` as a real process over a generated config dir, emulator in a child of its own');
  for (const row of table) console.log(row.map((c, i) => (i === 0 || i === 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ').trimEnd());
}
