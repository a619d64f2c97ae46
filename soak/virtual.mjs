// The year in virtual time: the real daemon code (two replicas, each a Daemon with its own config dir and token
// files), the emulator's Dropbox and service, and an in-memory stand-in for Redis's leases, all reading one
// clock that the soak moves a minute at a time, sweeping each running replica at every minute as the
// daemon's default schedule does. Faults are drawn from the seed and applied at their simulated time; after
// each minute the soak looks at what a user would see (the token files, the connectors, the grants) and
// accounts every second of it.
//
// What is simulated and what is real: the clock is the soak's; requests, files, locks and the daemon's logic
// are real. A sweep takes no simulated time, so a slow or hung answer is a real delay past the daemon's
// deadlines (which are shortened to real fractions of a second here), seen by the daemon as a timeout.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import v8 from 'node:v8';
import vm from 'node:vm';
import { memoryCoordinator, obtainGrant } from '../test/helpers/replicas.mjs';
import { DAY, HOUR, MINUTE, SECOND, drawSchedule, emptyResult, seededRandom, windowLedger } from './common.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = (file) => import(pathToFileURL(path.join(root, 'dist', file)).href);

export const START = Date.parse('2030-01-01T00:00:00Z');
const STEP = MINUTE;
export const LIFETIME = 4 * HOUR;
export const MARGIN = 15 * MINUTE;
/** After a long outage ends, the retries that follow (backoff capped at a minute) and the next sweep. */
export const OUTAGE_GRACE = 3 * MINUTE;
/** Deadlines in real milliseconds: a slow answer is slower than these, a normal one far faster. */
export const TOKEN_TIMEOUT = 300;
export const RECONCILE_TIMEOUT = 600;
export const SERVICE_CALL = 400;
const HANG = 1_000;

/** The fault kinds of a year, scaled by `days / 365` (at least one of each). */
function faultSpecs(days, profiles, replicas) {
  const n = (perYear) => Math.max(1, Math.round((perYear * days) / 365));
  const pick = (list) => (random) => list[Math.floor(random() * list.length)];
  const between = (lo, hi) => (random) => Math.round(lo + random() * (hi - lo));
  const replica = pick(replicas);
  const profile = pick(profiles);
  return [
    { kind: 'token_outage_short', channel: 'token', count: n(12), durationMs: [2 * MINUTE, 12 * MINUTE] },
    { kind: 'token_outage_long', channel: 'token', count: n(2), durationMs: [30 * MINUTE, 90 * MINUTE] },
    { kind: 'token_5xx_burst', channel: 'token', count: n(12), durationMs: [MINUTE, 10 * MINUTE], errorRate: 0.6 },
    { kind: 'token_429_burst', channel: 'token', count: n(8), durationMs: [2 * MINUTE, 20 * MINUTE], retryAfterSeconds: between(30, 900) },
    { kind: 'token_slow', channel: 'token', count: n(6), durationMs: [5 * MINUTE, 30 * MINUTE], latencyMs: 60 },
    { kind: 'token_hang', channel: 'token', count: n(4), durationMs: [5 * MINUTE, 12 * MINUTE], latencyMs: HANG },
    { kind: 'token_trickle', channel: 'token', count: n(4), durationMs: [5 * MINUTE, 12 * MINUTE], trickleMs: HANG },
    { kind: 'service_5xx', channel: 'service', count: n(10), durationMs: [5 * MINUTE, 40 * MINUTE] },
    { kind: 'service_hang', channel: 'service', count: n(6), durationMs: [5 * MINUTE, 12 * MINUTE], latencyMs: HANG },
    { kind: 'service_trickle', channel: 'service', count: n(4), durationMs: [5 * MINUTE, 12 * MINUTE], trickleMs: HANG },
    { kind: 'connector_deleted', channel: 'connector', count: n(6), durationMs: [0, 0], profile },
    { kind: 'replica_killed', channel: 'replica', count: n(6), durationMs: [MINUTE, 20 * MINUTE], replica, leaseLeftOn: profile },
    { kind: 'replica_stopped', channel: 'replica', count: n(3), durationMs: [LIFETIME + 30 * MINUTE, 8 * HOUR], replica },
    { kind: 'host_suspended', channel: 'replica', count: n(3), durationMs: [30 * MINUTE, 10 * HOUR], replica },
    { kind: 'redis_restarted', channel: 'redis', count: n(6), durationMs: [10 * SECOND, 10 * MINUTE] },
    {
      kind: 'clock_stepped',
      channel: 'clock',
      count: n(8),
      durationMs: [30 * MINUTE, 12 * HOUR],
      replica,
      stepMs: (random) => (random() < 0.5 ? -1 : 1) * Math.round(5 * MINUTE + random() * 3 * HOUR),
    },
    { kind: 'token_file_unwritable', channel: 'file', count: n(6), durationMs: [30 * MINUTE, 2 * HOUR], replica },
  ];
}

/** How the emulator's token endpoint answers during a token outage, 5xx burst or 429 burst. */
export function tokenFaultRules(e) {
  switch (e.kind) {
    case 'token_outage_short':
    case 'token_outage_long':
      return [{ route: 'token', status: 503 }];
    case 'token_5xx_burst':
      return [{ route: 'token', status: 500, errorRate: e.errorRate }];
    case 'token_429_burst':
      return [{ route: 'token', status: 429, retryAfterSeconds: e.retryAfterSeconds }];
    default:
      throw new Error(`soak: ${e.kind} is not a token fault`);
  }
}

/** Redis's leases and records, on the soak's clock; "restarting" it loses both, as a Redis without persistence does. */
export class MemoryRedis {
  leases = new Map();
  records = new Map();
  down = false;
  constructor(now) {
    this.now = now;
  }
  restart() {
    this.leases.clear();
    this.records.clear();
  }
}

/** A full collection, whether or not node was started with --expose-gc. */
const collect = globalThis.gc ?? (v8.setFlagsFromString('--expose-gc'), vm.runInNewContext('gc'));

/** RSS and heap in use, after a full collection. */
export function memory() {
  collect();
  const m = process.memoryUsage();
  return { rss: m.rss / 2 ** 20, heap: m.heapUsed / 2 ** 20, total: m.heapTotal / 2 ** 20 };
}

/**
 * Runs `days` of simulated time with `profiles` profiles on two replicas. `log` gets progress lines.
 * `faults: false` runs the same year with no faults (a baseline).
 */
export async function runVirtualSoak({ seed = 1, days = 365, profileCount = 10, faults = true, log = () => {}, logEvery = 30, onDay } = {}) {
  const started = performance.now();
  const [{ startEmulator, DEFAULT_APP, DEFAULT_EMULATOR_API_KEY }, { startDaemon }, { createLogger }, { exchangeCode }, { openProfileStore }, { CoordinatorUnavailableError }] =
    await Promise.all([dist('emulator/index.js'), dist('daemon/index.js'), dist('log.js'), dist('oauth/index.js'), dist('profile/index.js'), dist('daemon/coordinator.js')]);

  const random = seededRandom(seed);
  const total = days * DAY;
  let t = START;
  const now = () => t;
  const emu = await startEmulator({ autoApprove: true, now, tokenLifetimeSeconds: LIFETIME / 1000 });
  const work = mkdtempSync(path.join(tmpdir(), 'syncauth-soak-'));
  const names = Array.from({ length: profileCount }, (_, i) => `p${i + 1}`);
  const grants = new Map();
  for (const name of names) grants.set(name, await obtainGrant(emu, DEFAULT_APP, exchangeCode));
  const secrets = [DEFAULT_APP.appSecret, DEFAULT_EMULATOR_API_KEY, ...[...grants.values()].map((g) => g.refreshToken)];
  const redis = new MemoryRedis(now);
  const workflowId = emu.seeded?.workflowId;

  const result = emptyResult('virtual', seed);
  Object.assign(result, { lifetimeMs: LIFETIME, marginMs: MARGIN, profiles: profileCount, replicas: 2 });
  const replicaIds = ['a', 'b'];
  const schedule = faults
    ? drawSchedule(random, { durationMs: total - DAY, skipMs: DAY, gapMs: 2 * HOUR, specs: faultSpecs(days, names, replicaIds) })
    : [];
  // One grant is revoked on purpose, half way: flagged, not retried, the others untouched.
  const revoked = faults ? { at: Math.round(total / 2), kind: 'grant_revoked', channel: 'grant', durationMs: 0, profile: names[Math.floor(random() * names.length)] } : undefined;
  if (revoked) schedule.push(revoked);
  schedule.sort((a, b) => a.at - b.at);
  result.schedule = schedule;
  result.expectedHumanActions = revoked ? [revoked.profile] : [];

  // ---- the replicas ----
  const loader = () =>
    Promise.resolve(
      names.map((name) => ({
        name,
        tokenUrl: emu.tokenUrl,
        grant: grants.get(name),
        readGrant: async () => grants.get(name),
        reconcile: {
          baseUrl: emu.url,
          apiKey: DEFAULT_EMULATOR_API_KEY,
          connectorName: `conn-${name}`,
          remoteUrl: 'dropbox://data',
          recursive: false,
          ...(name === 'p1' && workflowId ? { workflow: { id: workflowId } } : {}),
        },
      })),
    );

  const replicas = replicaIds.map((id) => ({
    id,
    dir: path.join(work, id),
    daemon: undefined,
    /** Running: swept every minute. Down: killed, stopped or suspended. */
    running: false,
    offsetMs: 0,
    /** The monotonic clock stands still while the host is suspended. */
    monoPausedMs: 0,
    suspendedAt: undefined,
    published: new Map(),
    renewals: 0,
    activeProfileMs: 0,
    logLines: 0,
    revokedAsks: 0,
  }));

  const startReplica = async (r) => {
    mkdirSync(path.join(r.dir, 'tokens'), { recursive: true });
    const logger = createLogger({
      level: 'info',
      destination: {
        write: (line) => {
          r.logLines++;
          if (secrets.some((s) => line.includes(s))) result.secretLeaks++;
        },
      },
    });
    r.daemon = await startDaemon({
      profiles: loader,
      profileStore: openProfileStore(path.join(r.dir, 'config')),
      renewMarginMs: MARGIN,
      schedule: false,
      logger,
      now: () => t + r.offsetMs,
      monotonicNow: () => (r.suspendedAt ?? t) - START - r.monoPausedMs,
      random: seededRandom(seed * 31 + r.id.charCodeAt(0)),
      tokenFile: path.join(r.dir, 'tokens', '{profile}.token'),
      coordinator: memoryCoordinator(redis, r.id, CoordinatorUnavailableError, () => t + r.offsetMs),
      tokenTimeoutMs: TOKEN_TIMEOUT,
      reconcileTimeoutMs: RECONCILE_TIMEOUT,
      serviceRetry: { retries: 1, baseDelayMs: 10, maxDelayMs: 20 },
      serviceClient: { timeouts: { totalMs: SERVICE_CALL } },
      shutdownTimeoutMs: 1_000,
    });
    r.running = true;
  };
  for (const r of replicas) await startReplica(r);

  /**
   * kill -9: a lease it held is left to expire, and its files stay exactly as they were. The process's memory
   * goes with it, so the soak closes the dead daemon (to measure leaks of the living, not of the dead) and
   * then puts back any file the close touched.
   */
  const kill = async (r, leaseLeftOn) => {
    r.running = false;
    redis.leases.set(leaseLeftOn, { owner: r.id, until: t + 30 * SECOND });
    const dir = path.join(r.dir, 'tokens');
    const files = new Map(readdirSync(dir).map((f) => [f, readFileSync(path.join(dir, f))]));
    const dead = r.daemon;
    r.daemon = undefined;
    await dead.close();
    for (const f of readdirSync(dir)) if (!files.has(f)) rmSync(path.join(dir, f));
    for (const [f, content] of files) {
      const file = path.join(dir, f);
      if (!existsSync(file) || !readFileSync(file).equals(content)) writeFileSync(file, content, { mode: 0o600 });
    }
  };

  const readPublished = (r) => {
    for (const name of names) {
      let token;
      try {
        token = readFileSync(path.join(r.dir, 'tokens', `${name}.token`), 'utf8');
      } catch {
        r.published.delete(name);
        continue;
      }
      const issued = emu.state.accessTokens.get(token);
      r.published.set(name, { token, expiresAt: issued ? issued.expiresAt : -Infinity });
    }
  };

  // ---- the faults, as transitions at simulated times ----
  const rules = new Map();
  const applyRules = () => emu.setFaults([...rules.values()].flat());
  const byId = (id) => replicas.find((r) => r.id === id);
  const transitions = [];
  const at = (time, fn) => transitions.push({ time: START + time, fn });
  let revokedAt;
  for (const e of schedule) {
    const end = e.at + e.durationMs;
    /** The emulator answers this channel's requests by `list` from the fault's start to its end. */
    const faultRules = (channel, list) => {
      at(e.at, () => (rules.set(channel, list), applyRules()));
      at(end, () => (rules.delete(channel), applyRules()));
    };
    switch (e.kind) {
      case 'token_outage_short':
      case 'token_outage_long':
      case 'token_5xx_burst':
      case 'token_429_burst':
        faultRules('token', tokenFaultRules(e));
        break;
      case 'token_slow':
      case 'token_hang':
        faultRules('token', [{ route: 'token', latencyMs: e.latencyMs }]);
        break;
      case 'token_trickle':
        faultRules('token', [{ route: 'token', trickleMs: e.trickleMs }]);
        break;
      case 'service_trickle':
        faultRules('service', [{ route: 'sources', trickleMs: e.trickleMs }]);
        break;
      case 'service_5xx':
        faultRules('service', [{ route: 'sources', status: 500 }, { route: 'workflows', status: 502 }]);
        break;
      case 'service_hang':
        faultRules('service', [{ route: 'sources', latencyMs: e.latencyMs }]);
        break;
      case 'connector_deleted':
        at(e.at, async () => {
          for (const source of connectorsOf(e.profile)) {
            const res = await fetch(`${emu.url}/api/v1/sources/${source.id}`, { method: 'DELETE', headers: { 'service-api-key': DEFAULT_EMULATOR_API_KEY } });
            if (!res.ok) throw new Error(`soak: could not delete the connector of ${e.profile} (${res.status})`);
          }
        });
        break;
      case 'replica_killed':
        at(e.at, () => kill(byId(e.replica), e.leaseLeftOn));
        at(end, () => startReplica(byId(e.replica)));
        break;
      case 'replica_stopped':
        at(e.at, () => ((byId(e.replica).running = false)));
        at(end, () => ((byId(e.replica).running = true)));
        break;
      case 'host_suspended':
        at(e.at, () => {
          const r = byId(e.replica);
          r.running = false;
          r.suspendedAt = t;
        });
        at(end, () => {
          const r = byId(e.replica);
          r.monoPausedMs += t - r.suspendedAt;
          r.suspendedAt = undefined;
          r.running = true;
        });
        break;
      case 'redis_restarted':
        at(e.at, () => ((redis.down = true), redis.restart()));
        at(end, () => ((redis.down = false)));
        break;
      case 'clock_stepped':
        at(e.at, () => ((byId(e.replica).offsetMs += e.stepMs)));
        at(end, () => ((byId(e.replica).offsetMs -= e.stepMs)));
        break;
      case 'token_file_unwritable':
        at(e.at, () => {
          const dir = path.join(byId(e.replica).dir, 'tokens');
          renameSync(dir, `${dir}.away`);
          writeFileSync(dir, '');
        });
        at(end, () => {
          const dir = path.join(byId(e.replica).dir, 'tokens');
          rmSync(dir);
          renameSync(`${dir}.away`, dir);
        });
        break;
      case 'grant_revoked':
        at(e.at, () => {
          emu.revokeGrant(grants.get(e.profile).refreshToken);
          revokedAt = t;
        });
        break;
      default:
        throw new Error(`soak: unknown fault ${e.kind}`);
    }
  }
  transitions.sort((a, b) => a.time - b.time);

  // ---- what a user sees ----
  const ws = emu.state.workspaces.get('default');
  const family = (name) => new RegExp(`^conn-${name}(-\\d{14})?$`);
  const connectorsOf = (name) => [...ws.sources.values()].filter((s) => family(name).test(s.name));
  // The token endpoint refusing every request for longer than the margin less two retries (an outage, a 429
  // burst, answers that hang or trickle past the deadline): a token renewed at the margin can die waiting, and
  // no daemon can help it. Listed apart, as the outages longer than the margin.
  const REFUSING = new Set(['token_outage_short', 'token_outage_long', 'token_429_burst', 'token_hang', 'token_trickle']);
  const longOutages = schedule
    .filter((e) => e.kind === 'token_outage_long' || (REFUSING.has(e.kind) && e.durationMs > MARGIN - 2 * MINUTE))
    .map((e) => [START + e.at, START + e.at + e.durationMs + OUTAGE_GRACE]);
  const inLongOutage = (from, to) => longOutages.some(([a, b]) => from < b && to > a);
  const fileFaults = schedule.filter((e) => e.kind === 'token_file_unwritable').map((e) => [e.replica, START + e.at, START + e.at + e.durationMs + STEP]);
  const inFileFault = (replica, from, to) => fileFaults.some(([r, a, b]) => r === replica && from < b && to > a);
  const serviceOutages = schedule.filter((e) => e.channel === 'service' || e.kind === 'redis_restarted').map((e) => [START + e.at, START + e.at + e.durationMs + OUTAGE_GRACE]);
  const inServiceOutage = (from, to) => serviceOutages.some(([a, b]) => from < b && to > a);
  // What a window is blamed on: the faults active when it opened, or ended within a lifetime before.
  const activeKinds = () =>
    schedule
      .filter((e) => START + e.at <= t && t <= START + e.at + e.durationMs + LIFETIME)
      .map((e) => `${e.kind}${e.replica ? `(${e.replica})` : ''}${e.profile ? `(${e.profile})` : ''}@+${(e.at / HOUR).toFixed(1)}h`)
      .join(', ');

  const { account, clean: cleanWindows } = windowLedger(START);
  const expiredUnexpected = [];
  const expiredLong = [];
  const expiredDown = [];
  const expiredUnusable = [];
  const staleWindows = [];
  const staleDuringService = [];
  const noTokenUnexpected = [];
  const noTokenListed = [];
  let missingConnectorSeconds = 0;
  let staleSeconds = 0;

  /** Accounts the minute (prev, t] as it was: who ran, what was published, what the connectors held. */
  const accountInterval = (prev) => {
    for (const r of replicas) {
      for (const name of names) {
        if (revokedAt !== undefined && name === revoked.profile) continue;
        const pub = r.published.get(name);
        if (!pub && r.running && prev > START) {
          // No token for the consumers: expected while the token endpoint is down past the margin (the file
          // goes when its token expires) and while the directory itself is unusable; nowhere else.
          const list = inLongOutage(prev, t) ? noTokenListed : inFileFault(r.id, prev, t) ? noTokenListed : noTokenUnexpected;
          account(`none/${r.id}/${name}`, list, prev, t, { replica: r.id, profile: name, cause: activeKinds() || 'no fault active' });
        }
        if (!pub || pub.expiresAt >= t) continue;
        const from = Math.max(prev, pub.expiresAt);
        const list = !r.running ? expiredDown : inLongOutage(from, t) ? expiredLong : inFileFault(r.id, from, t) ? expiredUnusable : expiredUnexpected;
        account(`exp/${r.id}/${name}`, list, from, t, { replica: r.id, profile: name, cause: activeKinds() || 'no fault active' });
      }
      if (r.running) r.activeProfileMs += (t - prev) * names.filter((n) => !(revokedAt !== undefined && n === revoked.profile)).length;
    }
    for (const name of names) {
      if (revokedAt !== undefined && name === revoked.profile) continue;
      const sources = connectorsOf(name);
      if (sources.length === 0 && prev > START) missingConnectorSeconds += (t - prev) / 1000;
      for (const source of sources) {
        const token = source.config?.token;
        const expiresAt = token ? (emu.state.accessTokens.get(token)?.expiresAt ?? -Infinity) : -Infinity;
        if (expiresAt >= t) continue;
        const from = Math.max(prev, expiresAt);
        if (inLongOutage(from, t)) continue;
        const info = { profile: name, connector: source.id, cause: activeKinds() || 'no fault active' };
        // The service refused or hung past the connector's token: nothing could be given to it meanwhile.
        if (inServiceOutage(from, t)) {
          account(`stale-service/${name}`, staleDuringService, from, t, info);
          continue;
        }
        staleSeconds += (t - from) / 1000;
        account(`stale/${name}`, staleWindows, from, t, info);
      }
    }
  };

  const observeConnectors = () => {
    for (const name of names) {
      const count = connectorsOf(name).length;
      if (count > 1) {
        result.duplicateConnectors++;
        if (result.duplicateDetail.length < 5) result.duplicateDetail.push({ profile: name, count, at: t - START, cause: activeKinds() });
      }
    }
  };

  // ---- the year ----
  let next = 0;
  let prev = t;
  let day = 0;
  result.rssPeakMiB = memory().rss;
  while (t < START + total) {
    t += STEP;
    accountInterval(prev);
    prev = t;
    let touched = false;
    while (next < transitions.length && transitions[next].time <= t) {
      await transitions[next].fn();
      next++;
      touched = true;
    }
    for (const r of replicas) {
      if (!r.running) continue;
      const report = await r.daemon.sweep();
      for (const entry of report.profiles) {
        if (entry.action === 'idle') continue;
        touched = true;
        if (entry.renewal === 'renewed') r.renewals++;
        if (revokedAt !== undefined && entry.profile === revoked.profile && entry.action === 'renewal') r.revokedAsks++;
      }
    }
    if (touched || (t - START) % HOUR === 0) {
      for (const r of replicas) readPublished(r);
      observeConnectors();
    }
    if ((t - START) % DAY === 0) {
      day++;
      // The emulator's own history (every request and token of the year) is not the daemon's memory: a day is kept.
      forgetHistory(emu, t - DAY);
      const m = memory();
      result.rssPeakMiB = Math.max(result.rssPeakMiB, m.rss);
      if (day === 7) Object.assign(result, { rssWeekMiB: m.rss, heapWeekMiB: m.heap });
      await onDay?.(day);
      if (day % logEvery === 0) log(`virtual: day ${day}/${days}, renewals ${replicas.map((r) => `${r.id} ${r.renewals}`).join(', ')}, rss ${m.rss.toFixed(1)} MiB, heap ${m.heap.toFixed(1)} of ${m.total.toFixed(1)} MiB`);
    }
  }
  const end = memory();
  Object.assign(result, { rssEndMiB: end.rss, heapEndMiB: end.heap, rssPeakMiB: Math.max(result.rssPeakMiB, end.rss) });

  // ---- the end: who still holds a grant, who needs a person ----
  const humans = new Map();
  for (const r of replicas) {
    if (!r.running) continue;
    for (const p of r.daemon.status().profiles) {
      if (p.terminal) humans.set(p.name, p.terminal.reason);
      const isRevoked = revoked && p.name === revoked.profile;
      if (!isRevoked && (!p.holdsToken || p.terminal)) {
        result.grantsLost++;
        result.grantsLostDetail.push({ replica: r.id, profile: p.name, holdsToken: p.holdsToken, terminal: p.terminal?.code, cause: p.reason });
      }
    }
  }
  for (const name of names) {
    const grant = [...emu.state.grants.values()].find((g) => g.refreshToken === grants.get(name).refreshToken);
    if (!(revoked && name === revoked.profile) && (!grant || grant.revokedAt !== null)) {
      result.grantsLost++;
      result.grantsLostDetail.push({ profile: name, cause: 'the emulator no longer knows the grant' });
    }
  }
  result.humanActions = [...humans].map(([profile, reason]) => ({ profile, reason }));
  result.simulatedMs = total;
  result.lifetimes = total / LIFETIME;
  result.idealPerDay = DAY / (LIFETIME - MARGIN - (MARGIN * 0.2) / 2);
  for (const r of replicas) {
    result.renewals[r.id] = r.renewals;
    result.renewalsPerTokenPerDay[r.id] = r.renewals / (r.activeProfileMs / DAY);
    if (revoked) result.revokedRetries[r.id] = r.revokedAsks;
  }
  result.expiredWindows = cleanWindows(expiredUnexpected);
  result.expiredSeconds = result.expiredWindows.reduce((s, w) => s + w.seconds, 0);
  result.expiredDuringLongOutages = cleanWindows(expiredLong);
  result.expiredWhileReplicaDown = cleanWindows(expiredDown);
  result.expiredWhileDirectoryUnusable = cleanWindows(expiredUnusable);
  result.staleConnector = { count: staleWindows.length, seconds: staleSeconds, windows: cleanWindows(staleWindows), duringServiceOutages: cleanWindows(staleDuringService) };
  result.noTokenWindows = cleanWindows(noTokenUnexpected);
  result.noTokenSeconds = result.noTokenWindows.reduce((s, w) => s + w.seconds, 0);
  result.noTokenListed = cleanWindows(noTokenListed);
  result.missingConnectorSeconds = missingConnectorSeconds;
  const lines = replicas.reduce((s, r) => s + r.logLines, 0);
  result.logLinesPerDay = lines / days;
  result.logLinesPerProfileDay = lines / days / profileCount / replicas.length;

  for (const r of replicas) if (r.running) await r.daemon.close();
  await emu.close();
  rmSync(work, { recursive: true, force: true });
  result.wallMs = performance.now() - started;
  return result;
}

/** Drops the emulator's request log and the access tokens that expired before `before`. */
export function forgetHistory(emu, before) {
  const requests = emu.state.requests;
  const keep = requests.findIndex((r) => r.at >= before);
  requests.splice(0, keep === -1 ? requests.length : keep);
  for (const [token, issued] of emu.state.accessTokens) if (issued.expiresAt < before) emu.state.accessTokens.delete(token);
}
