// The daemon's part of `npm run bench`: resident memory while idle with 1, 1,000 and 10,000 profiles, the
// time of one sweep of 10,000 due profiles against the emulator, and token requests per profile over a
// simulated day. Not a test: nothing here fails on a number.
//
// Every measurement runs in a child process of its own (this file again, with a role as its argument), so
// one's heap and caches never show in another's numbers. The emulator the sweeps talk to runs in one more
// child, so that it and the daemon each have a core of this 2-core machine. Only the simulated day runs the
// emulator in the same process as the daemon: they share a hand-moved clock.
import { fork } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { clearTimeout, setTimeout } from 'node:timers';
import { setTimeout as sleep } from 'node:timers/promises';
import { URLSearchParams, fileURLToPath, pathToFileURL } from 'node:url';
import { serveRole } from './roles.mjs';

const self = fileURLToPath(import.meta.url);
const root = path.resolve(path.dirname(self), '..');
const dist = (file) => import(pathToFileURL(path.join(root, 'dist', file)).href);

const LIFETIME_S = 14_400; // the emulator's default, Dropbox's 4 hours
const MARGIN_MS = 900_000; // `renewMargin` default in src/config.ts
const JITTER_SHARE = 0.2; // startDaemon's default jitter: up to 20% of the margin
const SWEEP_PROFILES = 10_000;
const RECONCILE_SIZES = [250, 1_000];
const IDLE_SIZES = [1, 1_000, 10_000];
const FAST_CONCURRENCY = 32;
const MiB = 1024 * 1024;

/** A logger as the daemon runs it (info, redacted JSON), writing nowhere: formatting is paid, the terminal not. */
export async function quietLogger() {
  const { createLogger } = await dist('log.js');
  return createLogger({ level: 'info', destination: { write() {} } });
}

// ---------------------------------------------------------------------------------------------------------------
// The parent side: children, grants, rows.

/** Runs `file` (this one by default) as `role` in a child and resolves with the one message it sends back. */
export function child(role, job, { timeoutMs = 180_000, file = self } = {}) {
  return new Promise((resolve, reject) => {
    const proc = fork(file, [role], { execArgv: ['--expose-gc'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced' });
    let answered = false;
    const timer = setTimeout(() => {
      proc.kill();
      reject(new Error(`${role} child took longer than ${timeoutMs / 1000} s`));
    }, timeoutMs);
    proc.once('message', (message) => {
      answered = true;
      clearTimeout(timer);
      if (message.error) reject(new Error(`${role} child: ${message.error}`));
      else resolve(message);
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      if (!answered) reject(new Error(`${role} child exited with ${code} before answering`));
    });
    proc.send(job);
  });
}

/** The emulator in a child of its own; resolves when it listens. */
export function emulatorChild(workspaces, { tokenLifetimeSeconds } = {}) {
  return new Promise((resolve, reject) => {
    const proc = fork(self, ['emulator'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced' });
    proc.once('exit', (code) => reject(new Error(`emulator child exited with ${code}`)));
    proc.once('message', (message) => {
      if (message.error) {
        reject(new Error(message.error));
        return;
      }
      resolve({
        ...message,
        /** CPU time the emulator has used so far, in ms. */
        cpu() {
          return new Promise((done) => {
            proc.once('message', (usage) => done((usage.user + usage.system) / 1000));
            proc.send({ cpu: true });
          });
        },
        /**
         * The service's requests (not Dropbox's) from the `since`-th on: counts by method and route (ids as
         * `{id}`), the bytes of the answers, and `next`, the `since` of the next call.
         */
        serviceCalls(since = 0) {
          return new Promise((done) => {
            proc.once('message', done);
            proc.send({ serviceCalls: since });
          });
        },
        /**
         * The token endpoint's requests from the `since`-th request on: how many, how many answered 200, the
         * grants they renewed (distinct), the most one grant was renewed, the most that arrived within one second
         * (`peakPerSecond`), and `next`, the `since` of the next call.
         */
        tokenCalls(since = 0) {
          return new Promise((done) => {
            proc.once('message', done);
            proc.send({ tokenCalls: since });
          });
        },
        async close() {
          const exited = new Promise((done) => proc.once('exit', done));
          proc.send({ close: true });
          await exited;
        },
      });
    });
    proc.send({ workspaces, tokenLifetimeSeconds });
  });
}

/** `count` offline grants of the default app, through the auto-approved authorize page and the code exchange. */
export async function makeGrants(emulator, app, count) {
  const refreshTokens = new Array(count);
  let next = 0;
  const one = async () => {
    const authorize = new URL(emulator.authorizeUrl);
    authorize.search = new URLSearchParams({
      client_id: app.appKey, response_type: 'code', token_access_type: 'offline', redirect_uri: app.redirectUris[0],
    }).toString();
    const page = await fetch(authorize, { redirect: 'manual' });
    await page.arrayBuffer();
    const code = new URL(page.headers.get('location')).searchParams.get('code');
    const answer = await fetch(emulator.tokenUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code', code, redirect_uri: app.redirectUris[0], client_id: app.appKey, client_secret: app.appSecret,
      }).toString(),
    });
    const body = await answer.json();
    if (!body.refresh_token) throw new Error(`the emulator gave no refresh token: ${JSON.stringify(body).slice(0, 200)}`);
    return body.refresh_token;
  };
  await Promise.all(Array.from({ length: 32 }, async () => {
    while (next < count) {
      const i = next++;
      refreshTokens[i] = await one();
    }
  }));
  return refreshTokens;
}

const fmt = (n) => n.toLocaleString('en-US');

export async function daemonRows() {
  const rows = [];
  const attempt = async (label, fn) => {
    try {
      await fn();
    } catch (error) {
      rows.push([`${label}: FAILED (${error.message})`, NaN, '', '']);
    }
  };
  const { DEFAULT_APP } = await dist('emulator/index.js');
  const { DEFAULT_CONCURRENCY } = await dist('daemon/index.js');
  const workspaces = RECONCILE_SIZES.map((n) => ({ name: `bench-${n}`, apiKeys: [`bench-api-key-${n}`] }));
  const emulator = await emulatorChild(workspaces);
  const work = mkdtempSync(path.join(tmpdir(), 'syncauth-bench-daemon-'));
  try {
    const grantStart = performance.now();
    const refreshTokens = await makeGrants(emulator, DEFAULT_APP, SWEEP_PROFILES);
    const grantMs = performance.now() - grantStart;
    const grantsFile = path.join(work, 'grants.json');
    writeFileSync(grantsFile, JSON.stringify({ appKey: DEFAULT_APP.appKey, appSecret: DEFAULT_APP.appSecret, refreshTokens }));
    const shared = { tokenUrl: emulator.tokenUrl, emulatorUrl: emulator.url, grantsFile, work };
    rows.push([`setup: ${fmt(SWEEP_PROFILES)} grants made through the emulator (authorize + code exchange)`, grantMs, 'ms', '']);

    /** One daemon child, with the emulator's CPU time over its life. */
    const run = async (job) => {
      const before = await emulator.cpu();
      const result = await child('daemon', { ...shared, ...job });
      return { ...result, emulatorCpuMs: (await emulator.cpu()) - before };
    };
    const sweepRows = (label, s, n, reconcile) => {
      rows.push([`${label}${outcomeNote(s.outcomes, n, reconcile)}`, s.ms, 'ms', reconcile ? '' : '< 60,000 (one sweep interval)']);
      rows.push(['  renewals per second', s.outcomes.renewed / (s.ms / 1000), 'renewals/s', '']);
      rows.push(['  daemon CPU per profile (user + system)', s.cpuMs / n, 'ms', '']);
    };

    // --- resident memory, idle: each child sweeps once (tokens held, as in steady state), then settles ---
    const idle = new Map();
    await attempt('idle memory', async () => {
      const baseline = await run({ n: 0, concurrency: FAST_CONCURRENCY });
      rows.push(['idle, daemon loaded, 0 profiles (baseline): rss', baseline.memory.rss / MiB, 'MiB', '']);
      rows.push(['idle, daemon loaded, 0 profiles (baseline): heap used', baseline.memory.heapUsed / MiB, 'MiB', '']);
      for (const n of IDLE_SIZES) {
        const m = await run({ n, concurrency: FAST_CONCURRENCY });
        idle.set(n, m);
        const what = `idle, ${fmt(n)} profile${n === 1 ? '' : 's'} holding fresh tokens`;
        const note = m.first.outcomes.renewed === n ? '' : ` (only ${fmt(m.first.outcomes.renewed)} renewed)`;
        rows.push([`${what}: rss${note}`, m.memory.rss / MiB, 'MiB', '']);
        rows.push([`${what}: heap used`, m.memory.heapUsed / MiB, 'MiB', '']);
        if (n >= 1_000) {
          rows.push([`  per profile above baseline: rss`, (m.memory.rss - baseline.memory.rss) / n / 1024, 'KiB', '']);
          rows.push([`  per profile above baseline: heap used`, (m.memory.heapUsed - baseline.memory.heapUsed) / n / 1024, 'KiB', '']);
        }
      }
    });

    // --- one sweep of 10,000 due profiles (fresh state: none renewed before), reconcile off ---
    const sweepLabel = (n, concurrency, extra = '') =>
      `one sweep, ${fmt(n)} due profiles, ${extra || 'reconcile off'}, concurrency ${concurrency}${concurrency === DEFAULT_CONCURRENCY ? ' (default)' : ''}`;
    await attempt(sweepLabel(SWEEP_PROFILES, DEFAULT_CONCURRENCY), async () => {
      const s = await run({ n: SWEEP_PROFILES, concurrency: DEFAULT_CONCURRENCY });
      sweepRows(sweepLabel(SWEEP_PROFILES, DEFAULT_CONCURRENCY), s.first, SWEEP_PROFILES);
      rows.push(['  emulator CPU per token request', s.emulatorCpuMs / SWEEP_PROFILES, 'ms', '']);
    });
    // The idle-memory child of the same size already timed its sweep at the higher concurrency.
    const fast = idle.get(SWEEP_PROFILES);
    if (fast) {
      sweepRows(sweepLabel(SWEEP_PROFILES, FAST_CONCURRENCY), fast.first, SWEEP_PROFILES);
      rows.push(['  emulator CPU per token request', fast.emulatorCpuMs / SWEEP_PROFILES, 'ms', '']);
    }
    for (const [n, m] of idle) {
      rows.push([`one sweep with nothing due (after the renewals), ${fmt(n)} profile${n === 1 ? '' : 's'}`, m.idle.ms, 'ms', '']);
    }

    // --- with reconcile (every connector in one workspace): the first sweep creates the connectors, the next
    // (a token lifetime later on the daemon's clock) updates them ---
    for (const n of RECONCILE_SIZES) {
      const label = sweepLabel(n, DEFAULT_CONCURRENCY, 'reconcile on (one workspace)');
      await attempt(label, async () => {
        const s = await run({ n, concurrency: DEFAULT_CONCURRENCY, reconcile: true, apiKey: `bench-api-key-${n}`, again: true });
        rows.push([`${label}, first: creating connectors${outcomeNote(s.first.outcomes, n, 'created')}`, s.first.ms, 'ms', '']);
        rows.push(['  per profile', s.first.ms / n, 'ms', '']);
        rows.push([`${label}, next: updating connectors${outcomeNote(s.second.outcomes, n, 'updated')}`, s.second.ms, 'ms', '']);
        rows.push(['  per profile', s.second.ms / n, 'ms', '']);
      });
    }
  } finally {
    await emulator.close();
    rmSync(work, { recursive: true, force: true });
  }

  // --- token requests per profile per simulated day ---
  await attempt('simulated days', async () => {
    const d = await child('day', {});
    const ideal = 86_400_000 / (LIFETIME_S * 1000 - MARGIN_MS - (MARGIN_MS * JITTER_SHARE) / 2);
    const target = `≈ ${ideal.toFixed(1)} (86400 / (14400 − 900 − 90))`;
    const spread = (day) => ` (min ${day.min}, max ${day.max})`;
    rows.push([`token requests / profile, simulated day 1, incl. the renewal at start${spread(d.days[0])}`, d.days[0].mean, 'requests', target]);
    rows.push([`token requests / profile, simulated day 2 (steady state)${spread(d.days[1])}`, d.days[1].mean, 'requests', target]);
    rows.push([`  86400 s / mean time between renewals (${Math.round(d.meanInterval / 1000)} s over ${d.intervals} intervals)`, 86_400_000 / d.meanInterval, 'requests', target]);
    rows.push([`  simulating ${d.profiles} profiles × 2 days, a sweep every 60 s (${fmt(d.sweeps)} sweeps, ${d.tokenRequests} token requests)`, d.ms, 'ms', '']);
  });
  return rows;
}

function serviceCallsSince(requests, since) {
  const calls = {};
  let count = 0;
  let bytes = 0;
  for (const r of requests.slice(since)) {
    if (!r.path.startsWith('/api/v1/')) continue;
    const key = `${r.method} ${r.path.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, '{id}')}${r.status >= 300 ? ` (${r.status})` : ''}`;
    calls[key] = (calls[key] ?? 0) + 1;
    count += 1;
    bytes += r.bytes ?? 0;
  }
  return { next: requests.length, count, bytes, calls };
}

function tokenCallsSince(requests, since) {
  const perGrant = new Map();
  let count = 0;
  let ok = 0;
  const times = [];
  for (const r of requests.slice(since)) {
    if (r.route !== 'token') continue;
    count += 1;
    times.push(r.at);
    if (r.status !== 200) continue;
    ok += 1;
    if (r.grantId !== undefined) perGrant.set(r.grantId, (perGrant.get(r.grantId) ?? 0) + 1);
  }
  let most = 0;
  for (const n of perGrant.values()) most = Math.max(most, n);
  // The most requests that arrived within any one second.
  times.sort((a, b) => a - b);
  let peakPerSecond = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i] - times[j] >= 1000) j++;
    peakPerSecond = Math.max(peakPerSecond, i - j + 1);
  }
  return { next: requests.length, count, ok, grants: perGrant.size, most, peakPerSecond };
}

function outcomeNote(outcomes, n, reconcile) {
  const problems = Object.entries(outcomes).filter(([k, v]) => k !== 'renewed' && !k.startsWith('reconcile:') && v > 0);
  if (outcomes.renewed !== n) problems.unshift(['renewed', outcomes.renewed]);
  if (reconcile && outcomes[`reconcile:${reconcile}`] !== n) {
    problems.push(...Object.entries(outcomes).filter(([k]) => k.startsWith('reconcile:')));
  }
  return problems.length ? ` [${problems.map(([k, v]) => `${k} ${v}`).join(', ')}]` : '';
}

// ---------------------------------------------------------------------------------------------------------------
// The child side.

async function benchDaemon({ n, tokenUrl, emulatorUrl, grantsFile, work, concurrency, reconcile, apiKey, now }) {
  const { startDaemon } = await dist('daemon/index.js');
  const { openProfileStore } = await dist('profile/index.js');
  const grants = n > 0 ? JSON.parse(readFileSync(grantsFile, 'utf8')) : { refreshTokens: [] };
  if (grants.refreshTokens.length < n) throw new Error(`only ${grants.refreshTokens.length} grants for ${n} profiles`);
  const configDir = mkdtempSync(path.join(work, 'config-'));
  const profiles = Array.from({ length: n }, (_, i) => ({
    name: `p${i}`,
    tokenUrl,
    grant: { appKey: grants.appKey, appSecret: grants.appSecret, refreshToken: grants.refreshTokens[i] },
    ...(reconcile
      ? { reconcile: { baseUrl: emulatorUrl, apiKey, connectorName: `conn-p${i}`, remoteUrl: 'dropbox://data', recursive: false } }
      : {}),
  }));
  const daemon = await startDaemon({
    profiles,
    profileStore: openProfileStore(configDir),
    renewMarginMs: MARGIN_MS,
    schedule: false,
    concurrency,
    logger: await quietLogger(),
    ...(now ? { now } : {}),
  });
  return daemon;
}

function tally(report) {
  const outcomes = { renewed: 0 };
  for (const entry of report.profiles) {
    const key = entry.renewal ?? entry.action;
    outcomes[key] = (outcomes[key] ?? 0) + 1;
    if (entry.reconcile) outcomes[`reconcile:${entry.reconcile}`] = (outcomes[`reconcile:${entry.reconcile}`] ?? 0) + 1;
  }
  return outcomes;
}

async function settledMemory() {
  for (let i = 0; i < 4; i += 1) {
    globalThis.gc();
    await sleep(100);
  }
  return process.memoryUsage();
}

const roles = {
  async emulator(job) {
    const { startEmulator, DEFAULT_APP, DEFAULT_EMULATOR_API_KEY } = await dist('emulator/index.js');
    const emu = await startEmulator({
      apps: [DEFAULT_APP],
      autoApprove: true,
      tokenLifetimeSeconds: job.tokenLifetimeSeconds ?? LIFETIME_S,
      workspaces: [{ name: 'default', apiKeys: [DEFAULT_EMULATOR_API_KEY] }, ...job.workspaces],
    });
    process.on('message', (message) => {
      if (message.cpu) process.send(process.cpuUsage());
      if (message.serviceCalls !== undefined) process.send(serviceCallsSince(emu.state.requests, message.serviceCalls));
      if (message.tokenCalls !== undefined) process.send(tokenCallsSince(emu.state.requests, message.tokenCalls));
      if (message.close) void emu.close().then(() => process.exit(0));
    });
    process.on('disconnect', () => void emu.close().then(() => process.exit(0)));
    return { url: emu.url, tokenUrl: emu.tokenUrl, authorizeUrl: emu.authorizeUrl, apiUrl: emu.apiUrl };
  },

  /**
   * A daemon with `n` profiles, none renewed before (a fresh config dir): times one sweep, which renews them
   * all; with `again`, a second one a token lifetime later on the daemon's clock. Then its memory, settled.
   */
  async daemon(job) {
    let offset = 0;
    const daemon = await benchDaemon({ ...job, now: () => Date.now() + offset });
    await settledMemory();
    const timed = async () => {
      const cpu = process.cpuUsage();
      const start = performance.now();
      const report = await daemon.sweep();
      const ms = performance.now() - start;
      const used = process.cpuUsage(cpu);
      return { ms, cpuMs: (used.user + used.system) / 1000, outcomes: tally(report) };
    };
    const first = job.n > 0 ? await timed() : undefined;
    // What every scheduled sweep costs while nothing is due.
    const idle = job.n > 0 ? await timed() : undefined;
    let second;
    if (job.again) {
      // Inside the margin of the tokens just renewed, not yet expired: every profile is due again.
      offset = LIFETIME_S * 1000 - MARGIN_MS / 2;
      second = await timed();
    }
    const memory = await settledMemory();
    await daemon.close();
    return { first, idle, second, memory: { rss: memory.rss, heapUsed: memory.heapUsed } };
  },

  /** Token requests per profile per simulated day: emulator and daemon on one hand-moved clock. */
  async day() {
    const { startEmulator, DEFAULT_APP } = await dist('emulator/index.js');
    const { startDaemon } = await dist('daemon/index.js');
    const { openProfileStore } = await dist('profile/index.js');
    const profiles = 10;
    const days = 2;
    const stepMs = 60_000;
    let t = Date.parse('2030-01-01T00:00:00Z');
    const now = () => t;
    const emu = await startEmulator({ apps: [DEFAULT_APP], autoApprove: true, tokenLifetimeSeconds: LIFETIME_S, now });
    const work = mkdtempSync(path.join(tmpdir(), 'syncauth-bench-day-'));
    try {
      const refreshTokens = await makeGrants(emu, DEFAULT_APP, profiles);
      const exchangesBefore = emu.state.requests.filter((r) => r.route === 'token').length;
      const exchanged = new Set(emu.state.accessTokens.keys());
      const daemon = await startDaemon({
        profiles: refreshTokens.map((refreshToken, i) => ({
          name: `p${i}`,
          tokenUrl: emu.tokenUrl,
          grant: { appKey: DEFAULT_APP.appKey, appSecret: DEFAULT_APP.appSecret, refreshToken },
        })),
        profileStore: openProfileStore(path.join(work, 'config')),
        renewMarginMs: MARGIN_MS,
        schedule: false,
        logger: await quietLogger(),
        now,
      });
      const start = t;
      const wall = performance.now();
      const sweeps = (days * 86_400_000) / stepMs;
      for (let i = 0; i < sweeps; i += 1) {
        await daemon.sweep();
        t += stepMs;
      }
      const ms = performance.now() - wall;
      await daemon.close();
      // Renewals per grant and day, from the access tokens the emulator issued (the first was the exchange's).
      const grantOf = new Map([...emu.state.grants.values()].map((g) => [g.id, g]));
      // The steady rate: a day over the mean time between one renewal and the next, the first one aside.
      const issued = new Map();
      for (const token of emu.state.accessTokens.values()) {
        if (exchanged.has(token.token)) continue;
        issued.set(token.grantId, [...(issued.get(token.grantId) ?? []), token.issuedAt]);
      }
      const intervals = [...issued.values()].flatMap((times) => times.sort((a, b) => a - b).slice(1).map((t1, i) => t1 - times[i]));
      const meanInterval = intervals.reduce((a, b) => a + b, 0) / intervals.length;
      const perDay = Array.from({ length: days }, () => new Map());
      for (const token of emu.state.accessTokens.values()) {
        const grant = grantOf.get(token.grantId);
        if (!grant || exchanged.has(token.token)) continue;
        const day = Math.floor((token.issuedAt - start) / 86_400_000);
        if (day < days) perDay[day].set(grant.id, (perDay[day].get(grant.id) ?? 0) + 1);
      }
      const tokenRequests = emu.state.requests.filter((r) => r.route === 'token').length - exchangesBefore;
      const summary = perDay.map((counts) => {
        const values = [...grantOf.keys()].map((id) => counts.get(id) ?? 0);
        return { mean: values.reduce((a, b) => a + b, 0) / values.length, min: Math.min(...values), max: Math.max(...values) };
      });
      return { profiles, sweeps, ms, days: summary, tokenRequests, meanInterval, intervals: intervals.length };
    } finally {
      await emu.close();
      rmSync(work, { recursive: true, force: true });
    }
  },
};

if (process.argv[1] === self && process.argv[2] in roles) serveRole(roles, process.argv[2], { keepRunning: ['emulator'] });

/** Resident memory of a live process, bytes (VmRSS from /proc), or NaN where /proc is not there. */
export function rssOf(pid) {
  try {
    const kb = /^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? NaN : Number(kb) * 1024;
  } catch {
    return NaN;
  }
}
