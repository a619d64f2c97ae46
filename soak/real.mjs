// The real-process soak: two `syncauth daemon` processes (the built CLI) serving three stored profiles each,
// sharing a real redis-server, against the emulator in this process with token lifetimes of seconds and the
// margin scaled to match, under a seeded fault schedule. Every ~250 ms the soak reads what the replicas
// published and what the connectors hold, and judges both against the emulator's own record of every token.
// Simulated time is wall time × 14400 / lifetime: one lifetime here stands for Dropbox's 4 hours.
//
//   node soak/real.mjs [--seed N] [--duration SECONDS] [--json]      (needs `npx tsc -p tsconfig.build.json`)
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { URLSearchParams, fileURLToPath, pathToFileURL } from 'node:url';
import { Buffer } from 'node:buffer';
import { clearTimeout, setTimeout } from 'node:timers';
import { findRedisServer, freePort, startRedisProcess } from '../test/helpers/redis-server.mjs';
import { DAY, SECOND, Windows, checkTargets, drawSchedule, emptyResult, formatResult, formatSchedule, seededRandom } from './common.mjs';

const { fetch, AbortSignal } = globalThis;

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const CLI = path.join(ROOT, 'dist', 'cli', 'main.js');
const DROPBOX_LIFETIME_S = 14_400;
const SAMPLE_MS = 250;
const SWEEP_MS = 1_000;
/** How long a daemon runs before its RSS is a baseline to measure growth against. */
const WARM_MS = 20_000;
/**
 * The daemon's reconcile lease in Redis (src/daemon/redis.ts): 30 s, fixed. Against Dropbox's 4 h lifetime and
 * 15 min margin it is nothing; here a lifetime is 10 s, so a replica that dies holding a lease keeps the others
 * from reconciling that profile for three lifetimes. Those stretches are listed apart, not hidden.
 */
const LEASE_MS = 30_000;
/** After a replica is continued or restarted, one sweep (1 s) and a renewal may pass before its file is fresh. */
const DOWN_GRACE_MS = 3_000;
/** After a long outage ends, the next retry (the backoff is capped at margin / 4) and a renewal. */
const OUTAGE_GRACE_MS = 2_000;
/** A sweep's file write or removal, once it starts: a few milliseconds, given time for a loaded machine. */
const FILE_GRACE_MS = 300;
const PROFILES = ['p1', 'p2', 'p3'];
/** Token endpoint faults that refuse every renewal while they last (slow and trickling ones answer, late). */
const REFUSING = new Set(['token-outage-short', 'token-outage-long', 'token-5xx-burst', 'token-429-burst']);
const REPLICAS = ['a', 'b'];

const LIBFAKETIME_CANDIDATES = [
  '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1',
  '/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1',
  '/usr/lib/faketime/libfaketime.so.1',
];

export { findRedisServer };

export function findLibfaketime() {
  return LIBFAKETIME_CANDIDATES.find((file) => existsSync(file)) ?? null;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function tempDir(prefix) {
  return mkdtempSync(path.join(tmpdir(), prefix));
}

/**
 * A pass-through in front of the emulator's token endpoint, one per replica: the emulator cannot tell the
 * replicas apart, this can. It streams the answer as it comes (a trickling answer stays one) and keeps, per
 * refresh token, the time and status of every request.
 */
async function tokenProxy(upstream) {
  const seen = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const refreshToken = new URLSearchParams(body.toString('utf8')).get('refresh_token');
      const entry = { at: Date.now(), refreshToken, status: 0 };
      seen.push(entry);
      const up = httpRequest({ host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
        entry.status = answer.statusCode ?? 0;
        answer.on('end', () => (entry.answeredAt = Date.now()));
        res.on('close', () => (entry.closedAt = Date.now()));
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      up.on('error', () => res.destroy());
      res.on('close', () => up.destroy());
      up.end(body);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/oauth2/token`,
    seen,
    close: () => new Promise((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}

/** One `syncauth daemon` process (started again after a kill with the same home), its log lines timed on arrival. */
class Replica {
  constructor(name, { env, home, tokenDir }) {
    this.name = name;
    this.env = env;
    this.home = home;
    this.tokenDir = tokenDir;
    this.lines = [];
    this.stderr = '';
    this.instances = [];
    this.listen = undefined;
  }

  start() {
    const child = spawn(process.execPath, [CLI, 'daemon', ...this.args], { cwd: this.home, env: this.env, stdio: ['ignore', 'pipe', 'pipe'] });
    const instance = { child, pid: child.pid, startedAt: Date.now(), rssWeek: undefined, rssLast: undefined };
    this.instances.push(instance);
    this.child = child;
    this.listen = undefined;
    let partial = '';
    child.stdout.setEncoding('utf8').on('data', (d) => {
      partial += d;
      const parts = partial.split('\n');
      partial = parts.pop() ?? '';
      for (const line of parts) {
        if (!line.startsWith('{')) continue;
        let record;
        try {
          record = JSON.parse(line);
        } catch {
          continue;
        }
        this.lines.push({ at: Date.now(), record });
        if (typeof record.listen === 'string' && typeof record.msg === 'string' && record.msg.includes('daemon started')) this.listen = record.listen;
      }
    });
    child.stderr.setEncoding('utf8').on('data', (d) => (this.stderr = (this.stderr + d).slice(-20_000)));
    this.exited = new Promise((resolve) => child.once('close', (code, signal) => resolve(code ?? signal)));
    return instance;
  }

  get running() {
    return this.child && this.child.exitCode === null && this.child.signalCode === null;
  }

  tokenFile(profile) {
    return path.join(this.tokenDir, `${profile}.token`);
  }

  /** What the replica's token file for `profile` holds now; undefined when it cannot be read. */
  published(profile) {
    try {
      return readFileSync(this.tokenFile(profile), 'utf8').trim();
    } catch {
      return undefined;
    }
  }

  async readyz(timeoutMs = 700) {
    if (!this.listen) return undefined;
    try {
      const res = await fetch(`${this.listen}/readyz`, { signal: AbortSignal.timeout(timeoutMs) });
      return { status: res.status, body: await res.json() };
    } catch {
      return undefined;
    }
  }

  async kill(signal = 'SIGKILL') {
    if (!this.running) return;
    const exited = this.exited;
    this.child.kill(signal);
    await exited;
  }
}

async function waitFor(what, check, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

function runCli(args, env, cwd) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end('');
  });
}

function rssMiB(pid) {
  try {
    const kb = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb ? Number(kb) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** The faults of a run of `durationMs` (wall), drawn from `random`: counts grow with the run's length. */
export function drawRealSchedule(random, { durationMs, lifetimeMs, marginMs, tokenFileReplica }) {
  const scale = Math.max(1, durationMs / 90_000);
  const n = (count) => Math.max(1, Math.round(count * scale));
  const skipMs = 2 * lifetimeMs;
  const specs = [
    { kind: 'token-outage-short', channel: 'token', count: n(2), durationMs: [1_000, marginMs - 1_000] },
    { kind: 'token-outage-long', channel: 'token', count: n(1), durationMs: [marginMs + 1_500, marginMs + 3_000] },
    { kind: 'token-5xx-burst', channel: 'token', count: n(1), durationMs: [1_000, 2_000], status: 500 },
    { kind: 'token-429-burst', channel: 'token', count: n(1), durationMs: [1_000, 2_500], retryAfterSeconds: 1 + Math.floor(random() * 2) },
    { kind: 'token-slow', channel: 'token', count: n(1), durationMs: [2_000, 4_000], latencyMs: 1_500 },
    { kind: 'token-trickle', channel: 'token', count: n(1), durationMs: [2_000, 4_000], trickleMs: 1_500 },
    // Shorter than the margin, as a service outage of minutes is against Dropbox's 15 min: one longer than the
    // margin leaves the connector with an expired token whatever the daemon does. There is no flag for the
    // reconcile deadline (45 s), so a hang is a latency under the margin, not one past the deadline.
    { kind: 'service-5xx', channel: 'service', count: n(1), durationMs: [500, 1_500], status: 500 },
    { kind: 'service-hang', channel: 'service', count: n(1), durationMs: [1_000, 2_000], latencyMs: 1_500 },
    { kind: 'connector-deleted', channel: 'connector', count: n(1), durationMs: [0, 0], profile: PROFILES[Math.floor(random() * 2)] },
    { kind: 'replica-sigstop', channel: 'replica-a', count: n(1), durationMs: [lifetimeMs + 1_000, lifetimeMs + 3_000], replica: 'a' },
    { kind: 'replica-kill-9', channel: 'replica-b', count: n(1), durationMs: [500, 3_000], replica: 'b' },
    { kind: 'token-file-unwritable', channel: `replica-${tokenFileReplica}`, count: n(1), durationMs: [2_000, 4_000], replica: tokenFileReplica },
    { kind: 'redis-restart', channel: 'redis', count: n(1), durationMs: [300, 1_500] },
    { kind: 'clock-step-back', channel: 'clock', count: n(1), durationMs: [3_000, 8_000], replica: 'a', stepSeconds: -3600 },
    { kind: 'clock-step-ahead', channel: 'clock', count: n(1), durationMs: [3_000, 8_000], replica: 'a', stepSeconds: 3600 },
  ];
  // A quiet last lifetime and a half: what the last fault did is undone (a deleted connector recreated at the
  // next renewal, a restarted replica fresh again) before the run judges how it ended.
  const events = drawSchedule(random, { durationMs: durationMs - 1.5 * lifetimeMs, skipMs, gapMs: 1_500, specs });
  // The revocation leaves at least two lifetimes after it, to see the grant flagged and not asked again.
  const revoke = drawSchedule(random, {
    durationMs: durationMs - 2 * lifetimeMs, skipMs, specs: [{ kind: 'grant-revoked', channel: 'grant', count: 1, durationMs: [0, 0], profile: 'p3' }],
  });
  return [...events, ...revoke].sort((a, b) => a.at - b.at || a.kind.localeCompare(b.kind));
}

/** Every kind of fault the real run makes: a run (or its test) checks its schedule held each one. */
export const FAULT_KINDS = [
  'token-outage-short', 'token-outage-long', 'token-5xx-burst', 'token-429-burst', 'token-slow', 'token-trickle', 'service-5xx', 'service-hang',
  'connector-deleted', 'replica-sigstop', 'replica-kill-9', 'token-file-unwritable', 'redis-restart', 'clock-step-back', 'clock-step-ahead', 'grant-revoked',
];

/**
 * Runs the real-process soak for `durationMs` of wall time (after the replicas are first ready) and returns
 * its result (see `emptyResult` in common.mjs), judged by `checkTargets`. Extra fields: `executed` (the faults
 * made, with wall times), `staleConnector.duringLongOutages`, `connectorsMissingAtEnd`.
 */
export async function runRealSoak({ seed, durationMs = 90_000, log = () => {}, lifetimeSeconds = 10, marginSeconds = 3, logDir, logLevel } = {}) {
  const wallStart = Date.now();
  const result = emptyResult('real', seed);
  const lifetimeMs = lifetimeSeconds * SECOND;
  const marginMs = marginSeconds * SECOND;
  const factor = DROPBOX_LIFETIME_S / lifetimeSeconds;
  const random = seededRandom(seed);
  const tokenFileReplica = random() < 0.5 ? 'a' : 'b';
  const schedule = drawRealSchedule(random, { durationMs, lifetimeMs, marginMs, tokenFileReplica });
  result.schedule = schedule.map((e) => ({ ...e, at: e.at * factor, durationMs: e.durationMs * factor }));
  result.lifetimeMs = DROPBOX_LIFETIME_S * SECOND;
  result.marginMs = marginMs * factor;
  result.profiles = PROFILES.length;
  result.replicas = REPLICAS.length;
  // Mean jitter is a tenth of the margin (the daemon draws up to a fifth), and renewals start on the sweep (every
  // second here), half a sweep after they are due on average: a renewal every L − 1.1 M + S / 2. With Dropbox's
  // numbers and the default one-minute sweep that last term is 30 s in 4 h; scaled, it is 0.5 s in 10 s.
  result.idealPerDay = DAY / ((lifetimeMs - 1.1 * marginMs + SWEEP_MS / 2) * factor);
  result.executed = [];
  result.staleConnector.duringLongOutages = [];
  result.connectorsMissingAtEnd = [];

  const redisServer = findRedisServer();
  const libfaketime = findLibfaketime();
  if (!redisServer) result.notRun.push({ kind: 'redis (shared coordinator, redis-restart)', reason: 'redis-server not found; apt-get install -y redis-server' });
  if (!libfaketime) result.notRun.push({ kind: 'clock-step-back, clock-step-ahead', reason: 'libfaketime not found; apt-get install -y faketime' });

  const { startEmulator, DEFAULT_APP, DEFAULT_EMULATOR_API_KEY, connectionSettings } = await import(pathToFileURL(path.join(ROOT, 'dist', 'emulator', 'index.js')).href);
  const { createAuthorizationRequest, exchangeCode } = await import(pathToFileURL(path.join(ROOT, 'dist', 'oauth', 'index.js')).href);
  const { openSecretStore } = await import(pathToFileURL(path.join(ROOT, 'dist', 'credentials', 'index.js')).href);

  const cleanups = [];
  const replicas = new Map();
  try {
    const redirectUri = `http://127.0.0.1:${await freePort()}/callback`;
    const app = { ...DEFAULT_APP, redirectUris: [redirectUri] };
    const emu = await startEmulator({
      apps: [app], workspaces: [{ name: 'default', apiKeys: [DEFAULT_EMULATOR_API_KEY] }], autoApprove: true, tokenLifetimeSeconds: lifetimeSeconds,
    });
    cleanups.push(() => emu.close());
    const redis = redisServer ? await startRedisProcess(redisServer) : undefined;
    if (redis) cleanups.push(() => redis.stop());

    // Three grants, each set up as a stored profile (encrypted file store) with its connector conn-<profile>.
    const refreshTokens = new Map();
    const storeKey = randomBytes(24).toString('base64url');
    const setupHome = tempDir('syncauth-soak-setup-');
    cleanups.push(() => rmSync(setupHome, { recursive: true, force: true }));
    const configDir = path.join(setupHome, 'config');
    for (const profile of PROFILES) {
      const request = createAuthorizationRequest({ authorizeUrl: emu.authorizeUrl, appKey: app.appKey, redirectUri });
      const page = await fetch(request.url, { redirect: 'manual' });
      const code = new URL(page.headers.get('location') ?? 'http://x/').searchParams.get('code');
      if (!code) throw new Error(`the emulator gave no code (${page.status})`);
      const tokens = await exchangeCode({ tokenUrl: emu.tokenUrl, app: { appKey: app.appKey, appSecret: app.appSecret }, code, redirectUri, codeVerifier: request.codeVerifier });
      refreshTokens.set(profile, tokens.refreshToken);
      const env = {
        PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: setupHome,
        SYNCAUTH_CONFIG_DIR: configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: storeKey,
        ...connectionSettings(emu, { app, apiKey: DEFAULT_EMULATOR_API_KEY }),
        SYNCAUTH_REDIRECT_URI: redirectUri, SYNCAUTH_REMOTE_URL: 'dropbox://data', SYNCAUTH_REFRESH_TOKEN: tokens.refreshToken,
      };
      const setup = await runCli(['setup', '--yes', '--json', '--profile', profile, '--connector-name', `conn-${profile}`], env, setupHome);
      if (setup.code !== 0) throw new Error(`setup of ${profile} failed (${setup.code}):\n${setup.stderr}`);
    }
    const grantOf = (profile) => [...emu.state.grants.values()].find((g) => g.refreshToken === refreshTokens.get(profile));

    // Two replicas, each with its own home (a copy of the config dir: the same stored profiles) and token files.
    const proxies = new Map();
    for (const name of REPLICAS) {
      const home = tempDir(`syncauth-soak-${name}-`);
      cleanups.push(() => rmSync(home, { recursive: true, force: true }));
      cpSync(configDir, path.join(home, 'config'), { recursive: true });
      const tokenDir = path.join(home, 'tokens');
      mkdirSync(tokenDir);
      const proxy = await tokenProxy(new URL(emu.tokenUrl));
      cleanups.push(() => proxy.close());
      proxies.set(name, proxy);
      const env = {
        PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home,
        SYNCAUTH_CONFIG_DIR: path.join(home, 'config'), SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: storeKey,
        SYNCAUTH_TOKEN_FILE: path.join(tokenDir, '{profile}.token'), SYNCAUTH_LISTEN: '127.0.0.1:0',
        // The token endpoint is reached through this replica's pass-through: a run-only move of the endpoint.
        SYNCAUTH_TOKEN_URL: proxy.url, SYNCAUTH_ENDPOINT_OVERRIDE: '1',
        ...(redis ? { SYNCAUTH_REDIS_URL: redis.url } : {}),
        ...(logLevel ? { SYNCAUTH_LOG_LEVEL: logLevel } : {}),
      };
      const replica = new Replica(name, { env, home, tokenDir });
      replica.args = ['--sweep', '* * * * * *', '--renew-margin', String(marginSeconds)];
      if (name === 'a' && libfaketime) {
        replica.offsetFile = path.join(home, 'faketime');
        writeFileSync(replica.offsetFile, '+0\n');
        Object.assign(env, { LD_PRELOAD: libfaketime, FAKETIME_TIMESTAMP_FILE: replica.offsetFile, FAKETIME_NO_CACHE: '1', FAKETIME_DONT_FAKE_MONOTONIC: '1' });
      }
      replicas.set(name, replica);
      replica.start();
      cleanups.push(() => replica.kill());
    }
    for (const replica of replicas.values()) {
      await waitFor(`replica ${replica.name} ready`, async () => {
        if (!replica.running) throw new Error(`replica ${replica.name} exited: ${replica.stderr}`);
        return (await replica.readyz())?.status === 200;
      }, 30_000);
    }
    const t0 = Date.now();
    log(`replicas ready; running ${durationMs / 1000} s (seed ${seed}, ${schedule.length} faults)`);

    // ---- faults ----
    const activeRules = new Map();
    const applyRules = () => emu.setFaults([...activeRules.values()].flat());
    const down = new Map(REPLICAS.map((r) => [r, []]));
    const longOutages = [];
    /** Every stretch in which the token endpoint was faulty (down, failing, limiting, slow or trickling). */
    const tokenFaults = [];
    /** Every stretch in which the service refused or hung, or Redis was down. */
    const reconcileFaults = [];
    const jumps = new Map(REPLICAS.map((r) => [r, []]));
    let revokedAt;
    const runFault = async (event) => {
      const started = Date.now();
      const record = { kind: event.kind, at: started - t0, durationMs: event.durationMs, ...(event.replica ? { replica: event.replica } : {}), ...(event.profile ? { profile: event.profile } : {}) };
      result.executed.push(record);
      log(`+${((started - t0) / 1000).toFixed(1)} s ${event.kind} ${event.durationMs ? `for ${(event.durationMs / 1000).toFixed(1)} s` : ''}`);
      const faultEnds = [];
      if (event.channel === 'service' || event.kind === 'redis-restart') {
        // The connector cannot be given a token while the service refuses or hangs, nor while Redis is down
        // (reconciles wait for the coordinator): until the last slow answer, and the retry after it.
        const window = { from: started, to: Infinity };
        reconcileFaults.push(window);
        faultEnds.push(() => (window.to = Date.now() + (event.latencyMs ?? 0)));
      }
      if (event.channel === 'token') {
        const window = { from: started, to: Infinity };
        tokenFaults.push(window);
        // Until the last answer the fault gave can have been acted on: one still trickling, or a Retry-After.
        const after = (event.latencyMs ?? 0) + (event.trickleMs ?? 0) + (event.retryAfterSeconds ?? 0) * SECOND;
        faultEnds.push(() => (window.to = Date.now() + after));
        // A fault that keeps every renewal from succeeding for longer than the margin (its length, what it told
        // the daemon to wait, and the sweep that tries next) is an outage longer than the margin, as the long
        // outages are: an expired or missing token during it is listed, not counted.
        if (event.kind === 'token-outage-long' || (REFUSING.has(event.kind) && event.durationMs + after + SWEEP_MS > marginMs)) longOutages.push(window);
      }
      const hold = () => sleep(event.durationMs);
      /** The emulator answers by `rules` for the fault's whole duration. */
      const during = async (rules) => {
        const key = Symbol(event.kind);
        activeRules.set(key, rules);
        applyRules();
        await hold();
        activeRules.delete(key);
        applyRules();
      };
      switch (event.kind) {
        case 'token-outage-short':
        case 'token-outage-long': {
          await during([{ route: 'token', status: 503 }]);
          break;
        }
        case 'token-5xx-burst':
        case 'token-429-burst': {
          await during([{ route: 'token', status: event.status ?? 429, ...(event.retryAfterSeconds ? { retryAfterSeconds: event.retryAfterSeconds } : {}) }]);
          break;
        }
        case 'token-slow':
        case 'token-trickle': {
          await during([{ route: 'token', ...(event.latencyMs ? { latencyMs: event.latencyMs } : {}), ...(event.trickleMs ? { trickleMs: event.trickleMs } : {}) }]);
          break;
        }
        case 'service-5xx':
        case 'service-hang': {
          await during([{ route: 'sources', ...(event.status ? { status: event.status } : {}), ...(event.latencyMs ? { latencyMs: event.latencyMs } : {}) }]);
          break;
        }
        case 'connector-deleted': {
          const source = [...(emu.state.workspaces.get('default')?.sources.values() ?? [])].find((s) => s.name === `conn-${event.profile}`);
          if (!source) {
            record.note = 'no connector to delete';
            break;
          }
          const res = await fetch(`${emu.url}/api/v1/sources/${source.id}`, { method: 'DELETE', headers: { [emu.options.apiKeyHeader]: DEFAULT_EMULATOR_API_KEY } });
          record.status = res.status;
          await res.arrayBuffer();
          break;
        }
        case 'replica-sigstop': {
          const replica = replicas.get(event.replica);
          const window = { from: started, to: Infinity };
          down.get(replica.name).push(window);
          replica.child.kill('SIGSTOP');
          await hold();
          replica.child.kill('SIGCONT');
          window.to = Date.now() + DOWN_GRACE_MS;
          break;
        }
        case 'replica-kill-9': {
          const replica = replicas.get(event.replica);
          const window = { from: started, to: Infinity };
          down.get(replica.name).push(window);
          await replica.kill('SIGKILL');
          await hold();
          replica.start();
          // Until it is ready again (a node start and a first sweep), plus the same grace as after a SIGCONT.
          await waitFor(`replica ${replica.name} back`, async () => (await replica.readyz())?.body?.profiles !== undefined, 20_000).catch(() => undefined);
          window.to = Date.now() + DOWN_GRACE_MS;
          break;
        }
        case 'token-file-unwritable': {
          const replica = replicas.get(event.replica);
          const away = `${replica.tokenDir}.away`;
          const window = { from: started, to: Infinity };
          unwritable.get(replica.name).push(window);
          renameSync(replica.tokenDir, away);
          writeFileSync(replica.tokenDir, 'not a directory\n');
          await hold();
          rmSync(replica.tokenDir, { force: true });
          renameSync(away, replica.tokenDir);
          window.usableAt = Date.now();
          window.to = Date.now() + DOWN_GRACE_MS;
          break;
        }
        case 'redis-restart': {
          if (!redis) {
            record.note = 'not run: no redis-server';
            break;
          }
          await redis.kill();
          await hold();
          await redis.start();
          break;
        }
        case 'clock-step-back':
        case 'clock-step-ahead': {
          const replica = replicas.get(event.replica);
          if (!replica.offsetFile) {
            record.note = 'not run: no libfaketime';
            break;
          }
          writeFileSync(replica.offsetFile, `${event.stepSeconds > 0 ? '+' : ''}${event.stepSeconds}\n`);
          if (event.stepSeconds > 0) jumps.get(replica.name).push({ from: Date.now(), to: Date.now() + DOWN_GRACE_MS });
          await hold();
          writeFileSync(replica.offsetFile, '+0\n');
          // Setting the clock right again after a step back throws it ahead just as far.
          if (event.stepSeconds < 0) jumps.get(replica.name).push({ from: Date.now(), to: Date.now() + DOWN_GRACE_MS });
          break;
        }
        case 'grant-revoked': {
          revokedAt = Date.now();
          emu.revokeGrant(refreshTokens.get(event.profile));
          result.expectedHumanActions = [event.profile];
          break;
        }
        default:
          throw new Error(`unknown fault ${event.kind}`);
      }
      for (const close of faultEnds) close();
      record.endedAt = Date.now() - t0;
    };
    const faultRuns = [];
    const timers = schedule.map((event) => setTimeout(() => faultRuns.push(runFault(event).catch((error) => {
      result.executed.push({ kind: event.kind, error: error.message });
      log(`fault ${event.kind} failed: ${error.message}`);
    })), event.at));
    cleanups.push(() => timers.forEach(clearTimeout));

    // ---- observations ----
    // Which profiles' reconcile leases exist in Redis now (read-only: the soak never touches a key).
    let leases = new Set();
    /** The shared record of each profile's last reconcile (src/daemon/redis.ts): which token the connector holds. */
    let records = new Map();
    const poisoned = new Windows();
    let redisClient;
    if (redis) {
      const { Redis } = await import('ioredis');
      redisClient = new Redis(redis.url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => 200, lazyConnect: false });
      redisClient.on('error', () => undefined);
      cleanups.push(() => redisClient.disconnect());
    }
    const readLeases = async () => {
      if (!redisClient) return;
      try {
        const values = await redisClient.mget(...PROFILES.map((p) => `syncauth:lease:${p}`), ...PROFILES.map((p) => `syncauth:reconciled:${p}`));
        leases = new Set(PROFILES.filter((_, i) => values[i] !== null));
        records = new Map(PROFILES.map((p, i) => {
          try {
            return [p, JSON.parse(values[PROFILES.length + i] ?? 'null')];
          } catch {
            return [p, null];
          }
        }));
      } catch {
        leases = new Set();
        records = new Map();
      }
    };
    const leaseSeen = new Map();
    const staleLease = new Windows();
    const inWindow = (windows, at) => windows.some((w) => at >= w.from && at <= w.to);
    // Just after the wall clock was thrown ahead: until the renewal that follows can succeed, that is past
    // any token endpoint fault the jump fell into (a 429 burst, an outage), and a grace after it.
    const afterJump = (name, at) =>
      (jumps.get(name) ?? []).some(
        (j) => at >= j.from && (at <= j.to || tokenFaults.some((w) => w.from <= j.to && w.to >= j.from && at <= w.to + OUTAGE_GRACE_MS)),
      );
    const inLongOutage = (at) => longOutages.some((w) => at >= w.from && at <= w.to + OUTAGE_GRACE_MS);
    const expiredUnexpected = new Windows();
    const expiredOutage = new Windows();
    const expiredDown = new Windows();
    const expiredUnusable = new Windows();
    const staleUnexpected = new Windows();
    const staleOutage = new Windows();
    const staleService = new Windows();
    const missing = new Windows();
    const absent = new Windows();
    const absentUnexpected = new Windows();
    const unwritable = new Map(REPLICAS.map((r) => [r, []]));
    const human = new Map();
    const flaggedBy = new Map();
    const flag = (profile, replica, reason) => {
      if (!human.has(profile)) human.set(profile, { profile, reason });
      flaggedBy.set(profile, new Set([...(flaggedBy.get(profile) ?? []), replica]));
    };
    let lastReadyz = 0;
    let rssPeak = 0;
    let rssPeakDetail;
    const weekWallMs = (7 * DAY) / factor;
    const events = () => result.executed.filter((e) => e.kind).map((e) => e.kind);
    // The faults under way at `at` or ended within the last lifetime, newest first: what a window may be due to.
    const causeAt = (at) => {
      const t = at - t0;
      const near = result.executed
        .filter((e) => e.at !== undefined && e.at <= t + 100 && (e.endedAt === undefined || e.endedAt >= t - lifetimeMs))
        .reverse()
        .map((e) => `${e.kind}${e.replica ? ` (replica ${e.replica})` : ''}${e.profile ? ` (${e.profile})` : ''} at +${(e.at / 1000).toFixed(1)} s`);
      return near.length > 0 ? `${near.join(', ')} (wall offsets)` : 'no fault under way';
    };
    const observe = async () => {
      const now = Date.now();
      for (const replica of replicas.values()) {
        for (const profile of PROFILES) {
          const key = `${replica.name}/${profile}`;
          const revoked = revokedAt !== undefined && profile === result.expectedHumanActions[0];
          const token = revoked ? undefined : replica.published(profile);
          const issued = token ? emu.state.accessTokens.get(token) : undefined;
          const expired = token !== undefined && token !== '' && (!issued || issued.expiresAt <= now);
          const isDown = inWindow(down.get(replica.name), now);
          const outage = !isDown && inLongOutage(now);
          const info = { replica: replica.name, profile, cause: causeAt(now) };
          // The directory unusable: the file can be neither written nor removed, and the old one is back when it
          // is usable again, until the next sweep writes the token held or removes the file.
          const unusable = !isDown && !outage && unwritable.get(replica.name).some((w) => now >= w.from && now <= (w.usableAt ?? Infinity) + SWEEP_MS + FILE_GRACE_MS);
          expiredDown.observe(key, expired && isDown, now, info);
          expiredOutage.observe(key, expired && outage, now, info);
          expiredUnusable.observe(key, expired && unusable, now, info);
          expiredUnexpected.observe(key, expired && !isDown && !outage && !unusable, now, info);
          // No token at all for a consumer. Expected only while the token endpoint is down past the margin, while
          // the directory is unusable, and just after a wall clock thrown ahead (the daemon drops a token its
          // clock says is dead, then renews at once): listed. Anywhere else it is a miss.
          const none = !revoked && !token && !isDown;
          const excused = outage || inWindow(unwritable.get(replica.name), now) || afterJump(replica.name, now);
          absent.observe(key, none && excused, now, info);
          absentUnexpected.observe(key, none && !excused, now, info);
        }
        const pid = replica.running ? replica.child.pid : undefined;
        const rss = pid ? rssMiB(pid) : undefined;
        if (rss !== undefined) {
          if (rss > rssPeak) {
            rssPeak = rss;
            rssPeakDetail = { replica: replica.name, instance: replica.instances.length - 1, at: round((now - t0) / 1000), cause: causeAt(now) };
          }
          const instance = replica.instances.at(-1);
          instance.rssLast = rss;
          // After the first simulated week (420 s of wall time at 10 s lifetimes), but not before the process is
          // warm (its modules loaded, its first lifetimes renewed). A slice shorter than a few weeks takes its
          // baseline at a quarter of its length, and never before the process is warm.
          if (instance.rssWeek === undefined && now - t0 >= Math.max(WARM_MS, Math.min(weekWallMs, durationMs / 4))) instance.rssWeek = rss;
          if (now - (instance.lastSeries ?? 0) >= 5_000) {
            instance.lastSeries = now;
            (instance.series ??= []).push([Math.round((now - t0) / 1000), round(rss)]);
          }
        }
      }
      await readLeases();
      const wentDownLately = [...down.values()].flat().some((w) => now >= w.from && now - w.from <= LEASE_MS + DOWN_GRACE_MS);
      for (const profile of leases) if (wentDownLately) leaseSeen.set(profile, now);
      const sources = [...(emu.state.workspaces.get('default')?.sources.values() ?? [])];
      for (const profile of PROFILES) {
        const named = sources.filter((s) => s.name === `conn-${profile}`);
        if (named.length > 1) {
          result.duplicateConnectors += 1;
          if (result.duplicateDetail.length < 10) result.duplicateDetail.push({ profile, at: now - t0, ids: named.map((s) => s.id), cause: causeAt(now) });
        }
        missing.observe(profile, named.length === 0, now, { profile, cause: causeAt(now) });
        const revoked = revokedAt !== undefined && profile === result.expectedHumanActions[0];
        const held = named[0] ? String(named[0].config.token ?? '') : '';
        const issued = held ? emu.state.accessTokens.get(held) : undefined;
        const stale = !revoked && named.length > 0 && (!issued || issued.expiresAt <= now);
        const outage = inLongOutage(now);
        // A lease left by a replica that went down, or lapsed less than a lifetime ago (the next renewal reconciles).
        // A record that says the connector's token lives longer than any token can (a lifetime from now) was
        // written from a wrong clock: every replica believes the connector fresh and none reconciles.
        const record = records.get(profile);
        const bogus = typeof record?.expiresAt === 'number' && record.expiresAt > now + lifetimeMs + SECOND;
        poisoned.observe(profile, bogus, now, { profile, cause: `the shared reconcile record says the connector's token expires in ${bogus ? Math.round((record.expiresAt - now) / 1000) : 0} s`, at: now });
        const lease = !outage && !bogus && now - (leaseSeen.get(profile) ?? -Infinity) <= lifetimeMs;
        const serviceDown = !outage && !lease && reconcileFaults.some((w) => now >= w.from && now <= w.to + OUTAGE_GRACE_MS);
        staleOutage.observe(profile, stale && outage, now, { profile, cause: causeAt(now) });
        staleLease.observe(profile, stale && lease, now, { profile, cause: causeAt(now) });
        staleService.observe(profile, stale && serviceDown, now, { profile, cause: causeAt(now) });
        staleUnexpected.observe(profile, stale && !outage && !lease && !serviceDown, now, { profile, cause: bogus ? `a shared reconcile record from a wrong clock (expiry ${Math.round((record.expiresAt - now) / 1000)} s ahead); ${causeAt(now)}` : causeAt(now) });
      }
      if (now - lastReadyz >= 1_000) {
        lastReadyz = now;
        for (const replica of replicas.values()) {
          const answer = await replica.readyz(400);
          for (const [profile, state] of Object.entries(answer?.body?.profiles ?? {})) {
            if (typeof state.reason !== 'string' || !/re-?authoriz/i.test(state.reason)) continue;
            flag(profile, replica.name, `readyz of replica ${replica.name}: ${state.reason.split(':')[0]}`);
          }
        }
      }
    };
    while (Date.now() - t0 < durationMs) {
      const tick = Date.now();
      await observe();
      await sleep(Math.max(0, SAMPLE_MS - (Date.now() - tick)));
    }
    await Promise.all(faultRuns);
    await observe();
    const end = Date.now();
    const elapsed = end - t0;

    // ---- the verdict ----
    const shift = (w) => ({ replica: w.replica, profile: w.profile, from: (w.from - t0) * factor, wallFrom: (w.from - t0) / 1000, seconds: w.seconds, cause: w.cause });
    result.expiredWindows = expiredUnexpected.close(end).map(shift);
    result.expiredSeconds = result.expiredWindows.reduce((s, w) => s + w.seconds, 0);
    result.expiredDuringLongOutages = expiredOutage.close(end).map(shift);
    result.expiredWhileReplicaDown = expiredDown.close(end).map(shift);
    result.expiredWhileDirectoryUnusable = expiredUnusable.close(end).map(shift);
    const stale = staleUnexpected.close(end).map(shift);
    result.staleConnector = {
      count: stale.length, seconds: stale.reduce((s, w) => s + w.seconds, 0), windows: stale,
      duringLongOutages: staleOutage.close(end).map(shift),
      duringServiceOutages: staleService.close(end).map(shift),
      whileLeaseOfDownReplica: staleLease.close(end).map(shift),
    };
    /** Stretches in which a profile's shared reconcile record claimed an expiry no token can have. */
    result.poisonedRecords = poisoned.close(end).map(shift);
    result.noTokenListed = absent.close(end).map(shift);
    result.noTokenWindows = absentUnexpected.close(end).map(shift);
    result.noTokenSeconds = result.noTokenWindows.reduce((sum, w) => sum + w.seconds, 0);
    const missingWindows = missing.close(end);
    result.connectorMissing = missingWindows.map(shift);
    result.connectorsMissingAtEnd = missingWindows.filter((w) => w.to === end).map((w) => w.profile);

    for (const replica of replicas.values()) {
      for (const { record } of replica.lines) {
        if (record.event === 'profile.reauthorization_needed' && typeof record.profile === 'string') {
          flag(record.profile, replica.name, `log of replica ${replica.name}: profile.reauthorization_needed`);
        }
      }
    }
    result.humanActions = [...human.values()];
    /** Which replicas flagged each profile needing re-authorization (each must flag the revoked one). */
    result.flaggedBy = Object.fromEntries([...flaggedBy].map(([p, set]) => [p, [...set].sort()]));

    const simulated = elapsed * factor;
    result.simulatedMs = simulated;
    result.lifetimes = simulated / result.lifetimeMs;
    const revokedProfile = result.expectedHumanActions[0];
    for (const [name, proxy] of proxies) {
      const replica = replicas.get(name);
      const byToken = new Map([...refreshTokens].map(([p, t]) => [t, p]));
      const renewed = proxy.seen.filter((r) => r.at >= t0 && r.at <= end && r.status === 200 && byToken.has(r.refreshToken));
      result.renewals[name] = renewed.length;
      /** Every token request of this replica: wall offset (s), profile, status, seconds until answered and closed. */
      (result.tokenRequests ??= {})[name] = proxy.seen.filter((r) => r.at >= t0).map((r) => [
        round((r.at - t0) / 1000), byToken.get(r.refreshToken) ?? '?', r.status,
        r.answeredAt ? round((r.answeredAt - r.at) / 1000) : null, r.closedAt ? round((r.closedAt - r.at) / 1000) : null,
      ]);
      // The rate is read from the intervals between one token's consecutive renewals, so the run's two ends do not
      // count; an interval during which the replica was stopped or dead, or the token endpoint was down longer
      // than the margin, is left out (no schedule can renew then), as the expired windows of those times are.
      // So is the renewal a wall clock thrown ahead forces at once (the daemon cannot tell it from a resume).
      // And so is one the token endpoint delayed (an outage, a burst, a slow answer): in a year such faults are
      // days apart, in this slice they are a lifetime apart, and each stretches the interval it falls in. The
      // rate over every interval but the replica's own down time is kept too (renewalsPerTokenPerDayRaw).
      const rate = (excluded) => {
        let intervals = 0;
        let spanMs = 0;
        const detail = [];
        for (const profile of PROFILES) {
          const times = renewed.filter((r) => byToken.get(r.refreshToken) === profile).map((r) => r.at);
          for (let i = 1; i < times.length; i++) {
            if (excluded.some((w) => times[i - 1] < w.to && times[i] > w.from)) continue;
            intervals += 1;
            spanMs += times[i] - times[i - 1];
            detail.push([profile, round((times[i - 1] - t0) / 1000), round((times[i] - times[i - 1]) / 1000)]);
          }
        }
        return { perDay: spanMs > 0 ? intervals / ((spanMs * factor) / DAY) : 0, intervals, detail };
      };
      const judged = rate([...down.get(name), ...tokenFaults.map((w) => ({ from: w.from, to: w.to + OUTAGE_GRACE_MS })), ...(jumps.get(name) ?? [])]);
      result.renewalsPerTokenPerDay[name] = judged.perDay;
      result.renewalIntervals = { ...result.renewalIntervals, [name]: judged.intervals };
      (result.intervalDetail ??= {})[name] = judged.detail;
      (result.renewalsPerTokenPerDayRaw ??= {})[name] = rate(down.get(name)).perDay;
      if (revokedAt) {
        const revokedToken = refreshTokens.get(revokedProfile);
        const asked = proxy.seen.filter((r) => r.at > revokedAt && r.refreshToken === revokedToken);
        // Counted from the answer that told the daemon the grant is gone: one refused by an outage told it nothing,
        // and neither did a refusal it never read (its request cancelled when the process was stopped past its
        // lock's stale time, the lock lost). The daemon says when it knows: the log line that flags the profile.
        const learned = asked.findIndex((r) => r.status >= 400 && r.status < 500 && r.status !== 429);
        const knew = replica?.lines.find(({ record }) => record.profile === revokedProfile && (record.event === 'profile.reauthorization_needed' || record.event === 'grant.changed'));
        const after = knew ? asked.filter((r) => r.at > knew.at).length : undefined;
        result.revokedRetries[name] = learned < 0 ? 0 : after === undefined ? asked.length - learned : 1 + after;
        result.revokedRequests = { ...result.revokedRequests, [name]: asked.map((r) => ({ at: (r.at - t0) / 1000, status: r.status })) };
      }
      void replica;
    }
    const lines = [...replicas.values()].reduce((s, r) => s + r.lines.filter((l) => l.at >= t0).length, 0);
    result.logLinesPerDay = lines / (simulated / DAY);
    result.logLinesPerProfileDay = result.logLinesPerDay / (PROFILES.length * REPLICAS.length);

    result.rssPeakMiB = round(rssPeak);
    result.rssPeakDetail = rssPeakDetail;
    // Growth is judged on the processes that ran the whole run (a restarted one starts its own baseline).
    let worst;
    result.rssSeries = {};
    for (const replica of replicas.values()) {
      result.rssSeries[replica.name] = replica.instances.map((i) => i.series ?? []);
      const instance = replica.instances.at(-1);
      if (instance.startedAt >= t0 || instance.rssWeek === undefined || instance.rssLast === undefined) continue;
      const growth = instance.rssLast / instance.rssWeek;
      if (!worst || growth > worst.growth) worst = { growth, week: instance.rssWeek, end: instance.rssLast };
    }
    if (worst) {
      result.rssWeekMiB = round(worst.week);
      result.rssEndMiB = round(worst.end);
    }

    // Grants lost: a grant that was not revoked must still renew, with the refresh token each replica stores.
    for (const profile of PROFILES) {
      if (profile === revokedProfile && revokedAt) continue;
      const grant = grantOf(profile);
      for (const replica of replicas.values()) {
        const stored = await openSecretStore({ kind: 'file', configDir: path.join(replica.home, 'config'), storeKey, env: {} }).get(profile).catch(() => ({}));
        const why = !grant || grant.revokedAt !== null
          ? 'the emulator has no live grant'
          : stored.refresh_token !== grant.refreshToken
            ? 'the stored refresh token is not the grant\'s'
            : (await renewsAt(emu.tokenUrl, app, stored.refresh_token)) ? undefined : 'the stored refresh token no longer renews';
        if (why) {
          result.grantsLost += 1;
          result.grantsLostDetail.push({ profile, replica: replica.name, why });
        }
      }
    }
    if (logDir) {
      mkdirSync(logDir, { recursive: true });
      for (const replica of replicas.values()) {
        writeFileSync(path.join(logDir, `replica-${replica.name}.log`), replica.lines.map((l) => `${((l.at - t0) / 1000).toFixed(2)} ${JSON.stringify(l.record)}`).join('\n'));
      }
      writeFileSync(path.join(logDir, 'executed.json'), JSON.stringify(result.executed, null, 1));
    }
    result.wallMs = Date.now() - wallStart;
    result.observedEvents = events();
    return result;
  } finally {
    for (const cleanup of cleanups.reverse()) {
      try {
        await cleanup();
      } catch {
        // Clean what can be cleaned.
      }
    }
  }
}

function round(n) {
  return Math.round(n * 10) / 10;
}

async function renewsAt(tokenUrl, app, refreshToken) {
  const res = await fetch(tokenUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: app.appKey, client_secret: app.appSecret }).toString(),
  });
  await res.arrayBuffer();
  return res.status === 200;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const args = process.argv.slice(2);
  const value = (flag, fallback) => {
    const i = args.indexOf(flag);
    return i >= 0 ? args[i + 1] : fallback;
  };
  const seed = Number(value('--seed', String(Date.now() % 100_000)));
  const durationMs = Number(value('--duration', '90')) * 1000;
  const json = args.includes('--json');
  const logDir = value('--log-dir', undefined);
  const logLevel = value('--log-level', undefined);
  const result = await runRealSoak({ seed, durationMs, logDir, logLevel, log: json ? () => {} : (line) => process.stderr.write(`${line}\n`) });
  const misses = checkTargets(result);
  process.stdout.write(json ? `${JSON.stringify({ ...result, misses }, null, 2)}\n` : `${formatSchedule(result)}\n\n${formatResult(result, misses)}\n`);
  process.exit(misses.length > 0 ? 1 : 0);
}
