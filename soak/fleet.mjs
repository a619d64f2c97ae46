// The soak's fleet mode: a simulated season of replicas that share their profiles. Three replicas of the real
// daemon code in fleet mode (`fleet: { timers: false, leaseMs: 3 min }`), one in-process stand-in for Redis
// (test/helpers/replicas.mjs: the members' leases, the grant records and the reconcile records, on the soak's
// clock; not a redis-server), the emulator's Dropbox and service on the same clock, and a thousand profiles that
// no replica publishes anywhere: each is renewed, checked and reconciled by the one replica that owns it, and its
// only consumer is its connector. Faults are drawn from the seed (cold starts of every replica, SIGHUP-like
// reloads, kill -9 of a replica and a new one started later, Redis away long enough for the fallback to every
// profile, token-endpoint 5xx bursts and 429 storms, and a grant revoked then fixed through re-authorization).
//
// How time moves: a minute at a time (a replica's heartbeat is due every lease ÷ 3, one minute, and the token
// checks fall in every minute), and at each minute every running replica is swept only when something of its
// own is due by then (`nextDueAt()`: a renewal, a token's expiry, a reconcile or its retry, its share of the
// fleet to match again; anything it cannot place in time counts as due); otherwise it gets the heartbeat alone
// (`heartbeat()`), which is all a sweep with nothing due does that matters; and a sweep visits only the
// profiles whose own time has come (`sweep({ onlyDue: true })`), reporting the others idle. Skipping is exact
// here, since no other process writes a replica's profile store (what differs is only which profile a random
// draw falls to). Its token checks are ticked after, every minute. With a hundred profiles five sweeps in six
// find nothing due; with a thousand, one in five, and a sweep visits a few of a replica's 333.
//
// What is judged, by what the consumers and Dropbox see: the token each connector holds (the emulator's
// service) and each profile's newest issued token (the emulator's token log), every simulated minute.
import { randomBytes } from 'node:crypto';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { memoryCoordinator, obtainGrant } from '../test/helpers/replicas.mjs';
import { DAY, HOUR, MINUTE, drawSchedule, duration, emptyResult, fmt, seededRandom, sum, windowLedger } from './common.mjs';
import {
  LIFETIME, MARGIN, MemoryRedis, OUTAGE_GRACE, RECONCILE_TIMEOUT, SERVICE_CALL, START, TOKEN_TIMEOUT, forgetHistory, memory, tokenFaultRules,
} from './virtual.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = (file) => import(pathToFileURL(path.join(root, 'dist', file)).href);

const STEP = MINUTE;
const FLEET_LEASE = 3 * MINUTE;
/** The product's default check interval; the per-second cap is raised so that a minute's tick lets a minute's checks through. */
const CHECK_INTERVAL = 15 * MINUTE;
const CHECKS_PER_SECOND = 30;
/** A person re-authorizes this long after the grant was revoked (drawn). */
const REAUTH_AFTER = [30 * MINUTE, 3 * HOUR];
/** After a membership change: the members' leases to end (3 min) and the sweep that takes the profiles. */
const MOVE_WINDOW = FLEET_LEASE + 10 * MINUTE;
const WINDOW = 10 * MINUTE;

export const FLEET_TARGETS = {
  /** Renewals per profile per day, fleet-wide, net of the renewals membership changes cost: at most 1.05× the ideal. */
  renewalRatio: [0.95, 1.05],
  logLinesPerProfileDay: 100,
};

/**
 * Where the replicas' profile stores go: a RAM file system when there is one (the same calls; a flush or a
 * rename waits for no disk, which on a shared disk made most of a run's wall time), else the temporary directory.
 */
function storesBase() {
  try {
    accessSync('/dev/shm', constants.W_OK);
    return '/dev/shm';
  } catch {
    return tmpdir();
  }
}

/** The fault kinds of a season, scaled by `days / 365` as the year soak's are (at least one of each). */
function fleetFaultSpecs(days, slots) {
  const n = (perYear) => Math.max(1, Math.round((perYear * days) / 365));
  const pick = (list) => (random) => list[Math.floor(random() * list.length)];
  const between = (lo, hi) => (random) => Math.round(lo + random() * (hi - lo));
  return [
    { kind: 'cold_start', channel: 'replica', count: n(6), durationMs: [0, 0] },
    { kind: 'replica_killed', channel: 'replica', count: n(12), durationMs: [5 * MINUTE, 2 * HOUR], slot: pick(slots) },
    { kind: 'reload', channel: 'reload', count: n(24), durationMs: [0, 0], slot: pick(slots) },
    // Past the fallback bound (min(5 min, margin / 2)), short of the margin: last_owned, then all, then shares.
    { kind: 'redis_down', channel: 'redis', count: n(6), durationMs: [6 * MINUTE, 12 * MINUTE] },
    { kind: 'token_5xx_burst', channel: 'token', count: n(12), durationMs: [MINUTE, 10 * MINUTE], errorRate: 0.6 },
    { kind: 'token_429_burst', channel: 'token', count: n(8), durationMs: [2 * MINUTE, 20 * MINUTE], retryAfterSeconds: between(30, 900) },
  ];
}

/**
 * Runs `days` of simulated time with `profileCount` shared profiles on `replicas` fleet replicas. `log` gets
 * progress lines. `visitAll` makes each sweep visit every profile, as the daemon's own schedule does, to compare
 * with the visits of the due alone. Returns the result `checkFleetTargets` and `formatFleetResult` read.
 */
export async function runFleetSoak({ seed = 1, days = 14, profileCount = 1000, replicas: replicaCount = 3, log = () => {}, logEvery = 1, visitAll = false } = {}) {
  const started = performance.now();
  const [{ startEmulator, DEFAULT_APP, DEFAULT_EMULATOR_API_KEY }, { startDaemon }, { createLogger }, { exchangeCode }, { openProfileStore }, { CoordinatorUnavailableError }] =
    await Promise.all([dist('emulator/index.js'), dist('daemon/index.js'), dist('log.js'), dist('oauth/index.js'), dist('profile/index.js'), dist('daemon/coordinator.js')]);

  const random = seededRandom(seed);
  const total = days * DAY;
  let t = START;
  const now = () => t;
  // A connection check reports at once on the soak's clock: the re-authorization waits for its outcome, polling in
  // real time while the soak's clock stands still, so the emulator's default delay (200 ms) held it for its whole
  // deadline (a minute of every run's wall time).
  const emu = await startEmulator({ autoApprove: true, now, tokenLifetimeSeconds: LIFETIME / 1000, checkDelayMs: 0 });
  const work = mkdtempSync(path.join(storesBase(), 'syncauth-fleet-soak-'));
  const names = Array.from({ length: profileCount }, (_, i) => `p${i + 1}`);
  const index = new Map(names.map((name, i) => [name, i]));
  const grants = new Map();
  for (let i = 0; i < names.length; i += 20) {
    const batch = names.slice(i, i + 20);
    const got = await Promise.all(batch.map(() => obtainGrant(emu, DEFAULT_APP, exchangeCode)));
    batch.forEach((name, j) => grants.set(name, got[j]));
  }
  // What the replicas are configured with (a Secret mounted in each, read-only): a re-authorization does not
  // change it, so a replica started after one must take the new grant from its sealed record in Redis.
  const configured = new Map(grants);
  /** The emulator's grant id of each profile's grant (a re-authorization adds the new one). */
  const profileOfGrant = new Map(names.map((name) => [emu.state.grantsByRefreshToken.get(grants.get(name).refreshToken).id, name]));
  const secrets = new Set([DEFAULT_APP.appSecret, DEFAULT_EMULATOR_API_KEY, ...[...grants.values()].map((g) => g.refreshToken)]);
  const shortestSecret = Math.min(...[...secrets].map((s) => s.length));
  const grantKey = randomBytes(32);
  const redis = new MemoryRedis(now);
  const workflowId = emu.seeded?.workflowId;

  const result = emptyResult('fleet', seed);
  Object.assign(result, { lifetimeMs: LIFETIME, marginMs: MARGIN, profiles: profileCount, replicas: replicaCount, redis: 'in-process stand-in (test/helpers/replicas.mjs memoryCoordinator), not a redis-server', stores: path.dirname(work) });
  const slots = Array.from({ length: replicaCount }, (_, i) => i);
  const schedule = drawSchedule(random, { durationMs: total - DAY, skipMs: DAY, gapMs: 2 * HOUR, specs: fleetFaultSpecs(days, slots) });
  // One grant is revoked half way, and a person re-authorizes it through the page on some replica a while later.
  const revoked = {
    at: Math.round(total / 2),
    kind: 'grant_revoked',
    channel: 'grant',
    durationMs: Math.round(REAUTH_AFTER[0] + random() * (REAUTH_AFTER[1] - REAUTH_AFTER[0])),
    profile: names[Math.floor(random() * names.length)],
    reauthorizedOn: Math.floor(random() * replicaCount),
  };
  schedule.push(revoked);
  schedule.sort((a, b) => a.at - b.at);
  result.schedule = schedule;

  // ---- the replicas ----
  const loader = () =>
    Promise.resolve(
      names.map((name) => ({
        name,
        tokenUrl: emu.tokenUrl,
        dropboxApiUrl: emu.apiUrl,
        grant: configured.get(name),
        readGrant: async () => configured.get(name),
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

  const events = new Map();
  const countEvent = (event) => events.set(event, (events.get(event) ?? 0) + 1);
  let logLines = 0;
  let replicasStarted = 0;
  /** Each slot's replica: a new process (new id) at each start, as a restarted pod is. */
  const replicas = slots.map((slot) => ({ slot, id: undefined, daemon: undefined, running: false, served: new Set(), renewals: 0 }));

  const startReplica = async (r) => {
    replicasStarted += 1;
    r.id = `r${replicasStarted}`;
    const logger = createLogger({
      level: 'info',
      destination: {
        write: (line) => {
          logLines++;
          const event = /"event":"([^"]+)"/.exec(line);
          if (event) countEvent(event[1]);
          // A secret would show as a JSON string of its own: each run of token characters is looked up.
          for (const word of line.match(/[A-Za-z0-9_\-.~]+/g) ?? []) {
            if (word.length >= shortestSecret && secrets.has(word)) result.secretLeaks++;
          }
        },
      },
    });
    r.daemon = await startDaemon({
      profiles: loader,
      profileStore: openProfileStore(path.join(work, r.id, 'config')),
      renewMarginMs: MARGIN,
      schedule: false,
      logger,
      now,
      monotonicNow: () => t - START,
      random: seededRandom(seed * 31 + replicasStarted),
      coordinator: memoryCoordinator(redis, r.id, CoordinatorUnavailableError, now),
      grantKey,
      fleet: { timers: false, leaseMs: FLEET_LEASE },
      // A sweep takes no simulated time here, so the fleet's cap on token requests (a wait on the clock between
      // requests) cannot act within one: it is lifted, and the requests per 10 minutes are reported instead. The
      // cap itself is tested in test/daemon/fleet.test.ts.
      maxRenewalsPerSecond: 1_000_000,
      checkIntervalMs: CHECK_INTERVAL,
      maxChecksPerSecond: CHECKS_PER_SECOND,
      tokenTimeoutMs: TOKEN_TIMEOUT,
      reconcileTimeoutMs: RECONCILE_TIMEOUT,
      serviceRetry: { retries: 1, baseDelayMs: 10, maxDelayMs: 20 },
      // The token checks and the reconciles' service calls reach the emulator's routes within this process (the
      // same daemon code down to the transport; the emulator logs each as its server does, and a route a fault
      // names goes over HTTP): over loopback HTTP they cost a third of the run. Token requests go over HTTP.
      serviceClient: { timeouts: { totalMs: SERVICE_CALL }, dispatcher: emu.dispatcher },
      dropboxApiDispatcher: emu.dispatcher,
      shutdownTimeoutMs: 1_000,
    });
    r.running = true;
    r.served = new Set();
  };
  /** The replicas killed, each held weakly: one still reachable at the end is in what is left, not in a living replica's share. */
  const killed = [];
  /** kill -9: no more sweeps, no close (its membership is left to run out); the process's memory goes with it. */
  const kill = (r) => {
    killed.push(new WeakRef(r.daemon));
    r.running = false;
    r.daemon = undefined;
    r.served = new Set();
  };
  const stopReplica = async (r) => {
    r.running = false;
    const daemon = r.daemon;
    r.daemon = undefined;
    r.served = new Set();
    await daemon.close();
  };

  // ---- the faults, as transitions at simulated times ----
  const transitions = [];
  const at = (time, fn) => transitions.push({ time: START + time, fn });
  let revokedAt;
  let reauthorizedAt;
  let reauthorization;
  for (const e of schedule) {
    const end = e.at + e.durationMs;
    switch (e.kind) {
      case 'token_5xx_burst':
      case 'token_429_burst':
        at(e.at, () => emu.setFaults(tokenFaultRules(e)));
        at(end, () => emu.setFaults([]));
        break;
      case 'cold_start':
        at(e.at, async () => {
          for (const r of replicas) if (r.daemon) await stopReplica(r);
          for (const r of replicas) await startReplica(r);
        });
        break;
      case 'replica_killed':
        at(e.at, () => kill(replicas[e.slot]));
        at(end, () => startReplica(replicas[e.slot]));
        break;
      case 'reload':
        at(e.at, () => replicas[e.slot].daemon?.reload());
        break;
      case 'redis_down':
        at(e.at, () => ((redis.down = true)));
        at(end, () => ((redis.down = false)));
        break;
      case 'grant_revoked':
        at(e.at, () => {
          emu.revokeGrant(grants.get(e.profile).refreshToken);
          revokedAt = t;
        });
        // The person opens the re-authorization page on whichever replica the load balancer gives them: the
        // owner, or another that completes the loop with a worker of its own and shares the grant sealed.
        at(end, async () => {
          const fresh = await obtainGrant(emu, DEFAULT_APP, exchangeCode);
          const issued = emu.state.grantsByRefreshToken.get(fresh.refreshToken);
          profileOfGrant.set(issued.id, e.profile);
          secrets.add(fresh.refreshToken);
          const r = replicas[e.reauthorizedOn].running ? replicas[e.reauthorizedOn] : replicas.find((x) => x.running);
          const answer = await r.daemon.reauthorized(e.profile, { ...fresh, accountId: issued.accountId });
          reauthorizedAt = t;
          reauthorization = { replica: r.id, owner: replicas.find((x) => x.served.has(e.profile))?.id, stored: answer.stored, ...(answer.error ? { error: answer.error } : {}) };
          grants.set(e.profile, fresh);
        });
        break;
      default:
        throw new Error(`soak: unknown fault ${e.kind}`);
    }
  }
  transitions.sort((a, b) => a.time - b.time);

  // ---- what the consumers see ----
  const ws = emu.state.workspaces.get('default');
  const family = /^conn-(p\d+)(-\d{14})?$/;
  const span = (e, grace = 0) => [START + e.at, START + e.at + e.durationMs + grace];
  // A 429 storm longer than the margin less two retries: a token renewed at the margin can die waiting, and no
  // daemon can help it (the year soak's rule). Listed apart, with the catch-up after it.
  const longOutages = schedule.filter((e) => e.kind === 'token_429_burst' && e.durationMs > MARGIN - 2 * MINUTE).map((e) => span(e, OUTAGE_GRACE));
  const inLongOutage = (from, to) => longOutages.some(([a, b]) => from < b && to > a);
  const redisOutages = schedule.filter((e) => e.kind === 'redis_down').map((e) => span(e, OUTAGE_GRACE));
  const inRedisOutage = (from, to) => redisOutages.some(([a, b]) => from < b && to > a);
  const inRevocation = (name, from) => name === revoked.profile && revokedAt !== undefined && (reauthorizedAt === undefined || from < reauthorizedAt + OUTAGE_GRACE);
  const activeKinds = () =>
    schedule
      .filter((e) => START + e.at <= t && t <= START + e.at + e.durationMs + LIFETIME)
      .map((e) => `${e.kind}${e.slot !== undefined ? `(slot ${e.slot})` : ''}${e.profile ? `(${e.profile})` : ''}@+${(e.at / HOUR).toFixed(1)}h`)
      .join(', ');

  /** Open windows by key, each pushed to its list when it opens and extended while the condition holds. */
  const { account, clean: cleanWindows } = windowLedger(START);
  const staleUnexpected = [];
  const staleRevoked = [];
  const staleLongOutage = [];
  const staleRedis = [];
  const lapsedUnexpected = [];
  const lapsedListed = [];
  let missingConnectorSeconds = 0;
  const missingConnector = [];

  /** Each profile's connectors, read once per look (a thousand profiles share one workspace). */
  const connectors = () => {
    const by = new Map();
    for (const source of ws.sources.values()) {
      const m = family.exec(source.name);
      if (!m) continue;
      const list = by.get(m[1]);
      if (list) list.push(source);
      else by.set(m[1], [source]);
    }
    return by;
  };
  /** The newest token issued to each profile expires at this time (from the emulator's token log). */
  const newestExpiry = new Array(profileCount).fill(-Infinity);

  /** Accounts (prev, t] as it was: the connectors' tokens, and each profile's newest token. */
  const accountInterval = (prev) => {
    const by = connectors();
    for (const name of names) {
      const expiry = newestExpiry[index.get(name)];
      if (prev > START && expiry < t) {
        const from = Math.max(prev, expiry);
        const info = { profile: name, cause: activeKinds() || 'no fault active' };
        const list = inRevocation(name, from) || inLongOutage(from, t) ? lapsedListed : lapsedUnexpected;
        account(`lapsed/${name}`, list, from, t, info);
      }
      const sources = by.get(name) ?? [];
      if (sources.length === 0 && prev > START) {
        missingConnectorSeconds += (t - prev) / 1000;
        account(`missing/${name}`, missingConnector, prev, t, { profile: name, cause: activeKinds() || 'no fault active' });
      }
      for (const source of sources) {
        const token = source.config?.token;
        const expiresAt = token ? (emu.state.accessTokens.get(token)?.expiresAt ?? -Infinity) : -Infinity;
        if (expiresAt >= t) continue;
        const from = Math.max(prev, expiresAt);
        const info = { profile: name, connector: source.id, cause: activeKinds() || 'no fault active' };
        const list = inRevocation(name, from) ? staleRevoked : inLongOutage(from, t) ? staleLongOutage : inRedisOutage(from, t) ? staleRedis : staleUnexpected;
        account(`stale/${name}`, list, from, t, info);
      }
    }
    return by;
  };

  // ---- the token endpoint, as the emulator logged it ----
  const revokedGrantId = emu.state.grantsByRefreshToken.get(grants.get(revoked.profile).refreshToken).id;
  const renewalsOf = new Array(profileCount).fill(0);
  const tokenWindows = new Map();
  let tokenRequests = 0;
  let checkRequests = 0;
  const revokedRequests = [];
  let noticedAt;
  const readRequests = () => {
    const requests = emu.state.requests;
    for (const r of requests) {
      if (r.route === 'account') checkRequests++;
      if (r.route !== 'token') continue;
      tokenRequests++;
      const w = Math.floor((r.at - START) / WINDOW);
      tokenWindows.set(w, (tokenWindows.get(w) ?? 0) + 1);
      const name = r.grantId === undefined ? undefined : profileOfGrant.get(r.grantId);
      if (name === undefined) continue;
      if (r.status === 200) {
        renewalsOf[index.get(name)]++;
        newestExpiry[index.get(name)] = Math.max(newestExpiry[index.get(name)], r.at + LIFETIME);
      }
      // A request for the revoked grant after the revocation: the first is when the fleet learned it.
      if (r.grantId === revokedGrantId && revokedAt !== undefined && r.at >= revokedAt && r.status !== 200) {
        revokedRequests.push({ at: (r.at - START) / 1000, status: r.status });
        noticedAt ??= r.at;
      }
    }
    requests.splice(0);
  };

  // ---- membership, as each replica's sweep reports what it serves ----
  const takes = { total: 0, byCause: {} };
  const movedProfiles = new Set();
  const causeOfTake = () => {
    for (const e of schedule) {
      if (e.kind === 'grant_revoked' || e.channel === 'token' || e.kind === 'reload') continue;
      if (START + e.at <= t && t <= START + e.at + e.durationMs + MOVE_WINDOW) return e.kind;
    }
    return t - START <= MOVE_WINDOW ? 'first_start' : 'other';
  };
  let firstTakes = 0;
  const observeServed = (r, report) => {
    const served = new Set();
    for (const entry of report.profiles) {
      served.add(entry.profile);
      if (entry.renewal === 'renewed') r.renewals++;
    }
    for (const name of served) {
      if (r.served.has(name)) continue;
      const cause = causeOfTake();
      if (cause === 'first_start') firstTakes++;
      else {
        takes.total++;
        takes.byCause[cause] = (takes.byCause[cause] ?? 0) + 1;
        movedProfiles.add(name);
      }
    }
    r.served = served;
  };

  // ---- the season ----
  // The grants' code exchanges were the soak's, not the replicas' token requests.
  emu.state.requests.splice(0);
  const base = memory();
  for (const r of replicas) await startReplica(r);
  let next = 0;
  let prev = t;
  let day = 0;
  let duplicateServed = 0;
  let peak = { heap: 0, rss: 0, served: [] };
  const daily = [];
  /** Wall time by part: the replicas' sweeps (their renewals and reconciles with them), their checks, the soak's own looking. */
  const wallBy = { sweeps: 0, checks: 0, harness: 0 };
  /** Sweeps made, and skipped with nothing due (the heartbeat alone). */
  const sweeps = { made: 0, skipped: 0 };
  while (t < START + total) {
    t += STEP;
    const a0 = performance.now();
    const by = accountInterval(prev);
    wallBy.harness += performance.now() - a0;
    prev = t;
    for (const [, list] of by) {
      if (list.length > 1) {
        result.duplicateConnectors++;
        if (result.duplicateDetail.length < 5) result.duplicateDetail.push({ profile: list[0].name, count: list.length, at: t - START, cause: activeKinds() });
      }
    }
    while (next < transitions.length && transitions[next].time <= t) {
      await transitions[next].fn();
      next++;
    }
    const c0 = performance.now();
    for (const r of replicas) {
      if (!r.running) continue;
      if (r.daemon.nextDueAt() > t) {
        await r.daemon.heartbeat();
        // A change of the members (or of Redis's reachability) may move profiles to or from it: due now.
        if (r.daemon.nextDueAt() > t) {
          sweeps.skipped++;
          continue;
        }
      }
      sweeps.made++;
      observeServed(r, await r.daemon.sweep({ onlyDue: !visitAll }));
    }
    const c1 = performance.now();
    for (const r of replicas) if (r.running) await r.daemon.checkTick();
    const c2 = performance.now();
    readRequests();
    wallBy.sweeps += c1 - c0;
    wallBy.checks += c2 - c1;
    wallBy.harness += performance.now() - c2;
    // Served by two replicas at once, outside Redis outages (where serving every profile is the rule) and the
    // minutes a membership change takes to be seen by all.
    if (!redis.down && !inRedisOutage(t, t + 1)) {
      const seen = new Set();
      let twice = 0;
      for (const r of replicas) {
        for (const name of r.served) {
          if (seen.has(name)) twice++;
          else seen.add(name);
        }
      }
      if (twice > 0 && causeOfTake() === 'other') duplicateServed += twice;
    }
    if ((t - START) % DAY === 0) {
      day++;
      forgetHistory(emu, t - DAY);
      const m = memory();
      if (m.heap > peak.heap) peak = { heap: m.heap, rss: m.rss, served: replicas.map((r) => r.served.size), day };
      result.rssPeakMiB = Math.max(result.rssPeakMiB, m.rss);
      daily.push({ day, heapMiB: m.heap, rssMiB: m.rss, served: replicas.map((r) => (r.running ? r.served.size : 0)) });
      if (day === 7) Object.assign(result, { rssWeekMiB: m.rss, heapWeekMiB: m.heap });
      if (day % logEvery === 0) {
        const wall = (performance.now() - started) / 1000;
        log(`fleet: day ${day}/${days}, renewals ${renewalsOf.reduce((s, n) => s + n, 0)}, served ${replicas.map((r) => `${r.id} ${r.served.size}`).join(', ')}, heap ${m.heap.toFixed(1)} MiB, rss ${m.rss.toFixed(1)} MiB, ${wall.toFixed(0)} s wall`);
      }
    }
  }
  const end = memory();
  Object.assign(result, { rssEndMiB: end.rss, heapEndMiB: end.heap, rssPeakMiB: Math.max(result.rssPeakMiB, end.rss) });
  if (end.heap > peak.heap) peak = { heap: end.heap, rss: end.rss, served: replicas.map((r) => r.served.size), day: days };

  // ---- the end: who still holds a grant, who needs a person ----
  const humans = new Map();
  const servedBy = new Map();
  for (const r of replicas) {
    if (!r.running) continue;
    const status = r.daemon.status();
    for (const p of status.profiles) {
      servedBy.set(p.name, [...(servedBy.get(p.name) ?? []), r.id]);
      if (p.terminal) humans.set(p.name, p.terminal.reason);
      if (!p.holdsToken || p.terminal) {
        result.grantsLost++;
        result.grantsLostDetail.push({ replica: r.id, profile: p.name, holdsToken: p.holdsToken, terminal: p.terminal?.code, cause: p.reason });
      }
    }
  }
  for (const name of names) {
    const grant = emu.state.grantsByRefreshToken.get(grants.get(name).refreshToken);
    if (!grant || grant.revokedAt !== null) {
      result.grantsLost++;
      result.grantsLostDetail.push({ profile: name, cause: 'the emulator no longer knows the grant' });
    }
  }
  result.humanActions = [...humans].map(([profile, reason]) => ({ profile, reason }));
  result.expectedHumanActions = [];

  const renewals = renewalsOf.reduce((s, n) => s + n, 0);
  const revokedMs = (reauthorizedAt ?? START + total) - (revokedAt ?? START + total);
  const profileDays = (profileCount * total - revokedMs) / DAY;
  result.simulatedMs = total;
  result.lifetimes = total / LIFETIME;
  result.idealPerDay = DAY / (LIFETIME - MARGIN - (MARGIN * 0.2) / 2);
  for (const r of replicas) result.renewals[r.id] = r.renewals;
  const windows = [...tokenWindows.values()];
  const windowCount = total / WINDOW;
  const quietWindows = [...tokenWindows].filter(([w]) => !schedule.some((e) => ['cold_start', 'replica_killed', 'redis_down'].includes(e.kind) && w * WINDOW >= e.at - WINDOW && w * WINDOW <= e.at + e.durationMs + MOVE_WINDOW) && w * WINDOW > MOVE_WINDOW);
  const maxOf = (list) => list.reduce((best, [w, n]) => (n > best.n ? { n, at: w * WINDOW } : best), { n: 0, at: 0 });
  // What each window held, for the largest per cause: the first start, a later start of every replica, a kill
  // (the others take its share), the new replica that joins after it (it takes a share back), Redis away, a
  // token-endpoint burst; `none` for a window that held none of them.
  const spans = [{ cause: 'first_start', from: -WINDOW, to: MOVE_WINDOW }, ...schedule.flatMap((e) => {
    const from = (at, to, cause) => ({ cause, from: at - WINDOW, to: to + MOVE_WINDOW });
    if (e.kind === 'replica_killed') return [from(e.at, e.at, 'replica_killed'), from(e.at + e.durationMs, e.at + e.durationMs, 'replica_joined')];
    if (['cold_start', 'redis_down', 'token_5xx_burst', 'token_429_burst'].includes(e.kind)) return [from(e.at, e.at + e.durationMs, e.kind)];
    return [];
  })];
  const byCause = {};
  for (const [w, n] of tokenWindows) {
    const causes = spans.filter((span) => w * WINDOW >= span.from && w * WINDOW <= span.to).map((span) => span.cause);
    for (const cause of causes.length > 0 ? new Set(causes) : ['none']) {
      if (n > (byCause[cause]?.n ?? 0)) byCause[cause] = { n, at: w * WINDOW };
    }
  }
  const servedCounts = replicas.map((r) => (r.running ? r.served.size : 0));
  const heapOfDaemons = peak.heap - base.heap;
  Object.assign(result, {
    fleet: {
      stepMs: STEP,
      leaseMs: FLEET_LEASE,
      checks: { intervalMs: CHECK_INTERVAL, perSecond: CHECKS_PER_SECOND, requests: checkRequests, perProfilePerDay: checkRequests / profileDays },
      renewals,
      renewalsMin: Math.min(...renewalsOf),
      renewalsMax: Math.max(...renewalsOf),
      profileDays,
      perProfilePerDay: renewals / profileDays,
      ratio: renewals / profileDays / result.idealPerDay,
      takes,
      firstTakes,
      movedProfiles: movedProfiles.size,
      netPerProfilePerDay: (renewals - takes.total) / profileDays,
      netRatio: (renewals - takes.total) / profileDays / result.idealPerDay,
      tokenRequests,
      tokenWindow: {
        average: tokenRequests / windowCount,
        max: maxOf([...tokenWindows]),
        maxQuiet: maxOf(quietWindows),
        byCause,
        windows: windows.length,
      },
      memory: {
        baseHeapMiB: base.heap,
        peakHeapMiB: peak.heap,
        peakRssMiB: peak.rss,
        peakDay: peak.day,
        servedAtPeak: peak.served,
        daemonsHeapMiB: heapOfDaemons,
        daily,
      },
      wallBy,
      sweeps,
      servedAtEnd: servedCounts,
      servedTwiceAtEnd: [...servedBy].filter(([, ids]) => ids.length > 1).length,
      servedByNoneAtEnd: names.filter((name) => !servedBy.has(name)).length,
      duplicateServed,
      revocation: {
        profile: revoked.profile,
        revokedAt: revokedAt === undefined ? undefined : revokedAt - START,
        noticedAfterMs: noticedAt === undefined ? undefined : noticedAt - revokedAt,
        reauthorizedAt: reauthorizedAt === undefined ? undefined : reauthorizedAt - START,
        reauthorization,
        requests: revokedRequests,
      },
      events: Object.fromEntries([...events].filter(([e]) => e.startsWith('fleet.') || e.startsWith('grant.') || e.includes('reauthorization') || e.startsWith('daemon.reload'))),
      replicasStarted,
    },
  });
  result.staleConnector = {
    count: staleUnexpected.length,
    seconds: staleUnexpected.reduce((s, w) => s + w.seconds, 0),
    windows: cleanWindows(staleUnexpected),
    duringServiceOutages: cleanWindows(staleRedis),
    duringRevocation: cleanWindows(staleRevoked),
    duringLongOutages: cleanWindows(staleLongOutage),
  };
  result.lapsed = { windows: cleanWindows(lapsedUnexpected), listed: cleanWindows(lapsedListed) };
  result.missingConnectorSeconds = missingConnectorSeconds;
  result.missingConnectorWindows = cleanWindows(missingConnector);
  result.logLinesPerDay = logLines / days;
  result.logLinesPerProfileDay = logLines / days / profileCount;

  // The heap each replica holds: what a full collection gives back once it is closed and dropped, one at a time.
  const held = [];
  let before = memory().heap;
  for (const r of replicas) {
    if (!r.running) continue;
    const served = r.served.size;
    await stopReplica(r);
    const after = memory().heap;
    held.push({ replica: r.id, served, heapMiB: before - after });
    before = after;
  }
  result.fleet.memory.heldAtEnd = held;
  result.fleet.memory.killedStillReachable = killed.filter((ref) => ref.deref() !== undefined).length;
  result.fleet.memory.killed = killed.length;
  result.fleet.memory.withoutReplicasMiB = before;
  await emu.close();
  rmSync(work, { recursive: true, force: true });
  result.wallMs = performance.now() - started;
  return result;
}

/** The targets a fleet run missed, each `{ target, message, event? }`. */
export function checkFleetTargets(result) {
  const misses = [];
  const miss = (target, message, event) => misses.push({ target, message, ...(event ? { event } : {}) });
  const f = result.fleet;
  const stale = result.staleConnector;
  if (stale.count > 0) miss('connector with an expired token', `${stale.count} window(s), ${fmt(stale.seconds)} s`, stale.windows[0]);
  if (stale.duringServiceOutages.length > 0) miss('connector with an expired token', `${stale.duringServiceOutages.length} window(s) while Redis was away`, stale.duringServiceOutages[0]);
  if (result.lapsed.windows.length > 0) miss('profile without a live token', `${result.lapsed.windows.length} window(s) in which a profile's newest token had expired`, result.lapsed.windows[0]);
  const [lo, hi] = FLEET_TARGETS.renewalRatio;
  if (!(f.netRatio >= lo && f.netRatio <= hi)) miss('renewal rate', `${f.netPerProfilePerDay.toFixed(3)} renewals per profile per day net of ${f.takes.total} taken over, ${f.netRatio.toFixed(3)}× the ideal`);
  if (f.servedTwiceAtEnd > 0 || f.servedByNoneAtEnd > 0) miss('one owner per profile', `at the end ${f.servedTwiceAtEnd} profile(s) served twice, ${f.servedByNoneAtEnd} by none`);
  if (f.duplicateServed > 0) miss('one owner per profile', `${f.duplicateServed} profile-minute(s) served by two replicas outside membership changes and Redis outages`);
  const rev = f.revocation;
  if (rev.noticedAfterMs === undefined || rev.noticedAfterMs > f.checks.intervalMs + STEP) miss('revocation noticed', rev.noticedAfterMs === undefined ? 'the revoked grant was never noticed' : `noticed after ${fmt(rev.noticedAfterMs / 1000)} s, more than the check interval (${f.checks.intervalMs / 1000} s) and a tick`);
  if (!rev.reauthorization?.stored) miss('re-authorization', `the re-authorization was not stored: ${JSON.stringify(rev.reauthorization)}`);
  if (result.grantsLost > 0) miss('grants lost', `${result.grantsLost} grant(s) lost: ${JSON.stringify(result.grantsLostDetail.slice(0, 5))}`);
  if (result.humanActions.length > 0) miss('human actions', `still needed at the end for ${JSON.stringify(result.humanActions)}`);
  if (result.duplicateConnectors > 0) miss('duplicate connectors', `${result.duplicateConnectors} observation(s) with duplicate connectors`, result.duplicateDetail[0]);
  if (result.logLinesPerProfileDay > FLEET_TARGETS.logLinesPerProfileDay) miss('log volume', `${fmt(result.logLinesPerProfileDay)} log lines per profile per day`);
  if (result.secretLeaks > 0) miss('secret in logs', `${result.secretLeaks} log line(s) held a secret`);
  return misses;
}



/** The fleet run's table: what ran, and each target with its value. */
export function formatFleetResult(result, misses = checkFleetTargets(result)) {
  const f = result.fleet;
  const rows = [];
  const row = (label, value, target = '', ok) => rows.push([label, String(value), target, ok === undefined ? '' : ok ? 'ok' : 'MISSED']);
  const missed = (target) => !misses.some((m) => m.target === target);
  const made = f.sweeps ? `; ${fmt(f.sweeps.made)} sweeps, ${fmt(f.sweeps.skipped)} skipped with nothing due` : '';
  row('simulated time', `${duration(result.simulatedMs)}, a step per minute (each running replica's heartbeat, its sweep when something is due, its checks ticked${made})`);
  row('profiles × replicas', `${result.profiles} shared × ${result.replicas} (fleet lease ${duration(f.leaseMs)}; ${f.replicasStarted} replica processes started in all)`);
  row('Redis', result.redis);
  if (result.stores) row('profile stores', `files under ${result.stores}; token checks and service calls answered by the emulator in-process`);
  row('token lifetime / margin', `${duration(result.lifetimeMs)} / ${duration(result.marginMs)}`);
  const stale = result.staleConnector;
  row('(1) connector with an expired token', `${stale.count} window(s), ${fmt(stale.seconds)} s`, '0', stale.count === 0 && stale.duringServiceOutages.length === 0);
  row('    during the revocation, until re-authorized', `${stale.duringRevocation.length} window(s), ${fmt(sum(stale.duringRevocation))} s`, 'listed');
  row('    during 429 storms longer than the margin', `${stale.duringLongOutages.length} window(s), ${fmt(sum(stale.duringLongOutages))} s`, 'listed');
  row('    while Redis was away', `${stale.duringServiceOutages.length} window(s), ${fmt(sum(stale.duringServiceOutages))} s`, '0');
  row('    profile whose newest token had expired', `${result.lapsed.windows.length} window(s), ${fmt(sum(result.lapsed.windows))} s (listed: ${result.lapsed.listed.length}, ${fmt(sum(result.lapsed.listed))} s)`, '0', result.lapsed.windows.length === 0);
  row('(2) renewals', `${fmt(f.renewals)} (per profile ${f.renewalsMin}–${f.renewalsMax})`);
  row('    per profile per day, all', `${f.perProfilePerDay.toFixed(3)} (${f.ratio.toFixed(3)}× ideal ${result.idealPerDay.toFixed(3)})`, 'reported');
  row('    taken over (membership changes)', `${fmt(f.takes.total)} (${Object.entries(f.takes.byCause).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}); ${f.movedProfiles} profiles moved at least once`, 'counted apart');
  const [lo, hi] = FLEET_TARGETS.renewalRatio;
  row('    per profile per day, net of takeovers', `${f.netPerProfilePerDay.toFixed(3)} (${f.netRatio.toFixed(3)}× ideal)`, `${lo}–${hi}×`, f.netRatio >= lo && f.netRatio <= hi);
  const tw = f.tokenWindow;
  row('(3) token requests per 10 min', `average ${fmt(tw.average)}, max ${fmt(tw.max.n)} at +${duration(tw.max.at)} (${(tw.max.n / tw.average).toFixed(1)}×)`, 'reported');
  row('    outside starts, kills, Redis outages', `max ${fmt(tw.maxQuiet.n)} at +${duration(tw.maxQuiet.at)} (${(tw.maxQuiet.n / tw.average).toFixed(1)}× the average)`, 'reported (≤ 2× is asked with them too: not met, a taker renews at once)');
  if (tw.byCause) {
    const causes = Object.entries(tw.byCause).sort((a, b) => b[1].n - a[1].n);
    row('    largest by what the window held', causes.map(([cause, m]) => `${cause} ${fmt(m.n)} (${(m.n / tw.average).toFixed(1)}×)`).join(', '), 'reported');
  }
  const m = f.memory;
  row('(4) heap after GC, peak', `${fmt(m.peakHeapMiB)} MiB on day ${m.peakDay} (RSS ${fmt(m.peakRssMiB)} MiB); before any replica ${fmt(m.baseHeapMiB)} MiB`, 'reported');
  // One process holds the emulator, the soak and every replica: the growth over the start counts the emulator's
  // tokens and connectors too, and what a replica holds is what a collection gives back once it is closed.
  row('    growth over the start, one process', `${fmt(m.daemonsHeapMiB)} MiB with ${m.servedAtPeak.join(' + ')} served (the emulator's tokens and connectors included)`, 'reported');
  if (m.heldAtEnd) {
    const each = m.heldAtEnd.map((h) => `${h.replica} ${fmt(h.heapMiB)} MiB for ${h.served}`).join(', ');
    row('    per replica: freed by closing it at the end', `${each} served profiles; ${fmt(m.withoutReplicasMiB)} MiB left without them`, 'reported');
    // A replica dropped without close() keeps its workers' token-expiry timers (real timers, unref'd, of the
    // token's lifetime), which hold it until they fire: a killed process frees them; here they sit in what is left.
    row('    killed replicas still held (expiry timers)', `${m.killedStillReachable} of ${m.killed}`, 'reported');
  }
  if (result.heapWeekMiB > 0) row('    heap week 1 → end', `${fmt(result.heapWeekMiB)} → ${fmt(result.heapEndMiB)} MiB`, 'reported');
  const rev = f.revocation;
  const asked = rev.requests.map((r) => `+${fmt(r.at - rev.revokedAt / 1000, 0)} s ${r.status}`).join(', ');
  row('(5) revocation noticed after', rev.noticedAfterMs === undefined ? 'never' : `${fmt(rev.noticedAfterMs / 1000)} s (requests for the revoked grant: ${asked})`, `≤ ${f.checks.intervalMs / 1000} s + a tick`, missed('revocation noticed'));
  row('    re-authorized through the page', rev.reauthorization ? `on ${rev.reauthorization.replica} (owner ${rev.reauthorization.owner ?? 'none'}), stored ${rev.reauthorization.stored}, +${duration(rev.reauthorizedAt - rev.revokedAt)} after` : 'not done', 'stored', missed('re-authorization'));
  row('    token checks', `${fmt(f.checks.requests)} (${f.checks.perProfilePerDay.toFixed(1)} per profile per day; every ${duration(f.checks.intervalMs)}, ≤ ${f.checks.perSecond}/s)`, 'reported');
  row('one owner per profile', `at the end: ${f.servedAtEnd.join(' + ')} served, ${f.servedTwiceAtEnd} twice, ${f.servedByNoneAtEnd} by none; ${f.duplicateServed} profile-minutes served twice outside changes`, '0', missed('one owner per profile'));
  row('grants lost', result.grantsLost, '0', result.grantsLost === 0);
  row('human actions left', result.humanActions.map((h) => h.profile).join(', ') || 'none', 'none', result.humanActions.length === 0);
  row('duplicate connectors (observations)', result.duplicateConnectors, '0', result.duplicateConnectors === 0);
  const missing = result.missingConnectorWindows ?? [];
  const firstMissing = missing.reduce((a, w) => Math.min(a, w.from), Infinity);
  const lastMissing = missing.reduce((a, w) => Math.max(a, w.from + w.seconds * 1000), -Infinity);
  row('no connector at all', `${fmt(result.missingConnectorSeconds)} s${missing.length > 0 ? ` (${missing.length} profiles, from +${duration(firstMissing)} to +${duration(lastMissing)})` : ''}`, 'reported');
  row('fleet log events', Object.entries(f.events).map(([k, n]) => `${k} ${n}`).join(', '), 'reported');
  row('log lines per day', `${fmt(result.logLinesPerDay)} (${fmt(result.logLinesPerProfileDay)} per profile)`, `≤ ${FLEET_TARGETS.logLinesPerProfileDay} per profile`, result.logLinesPerProfileDay <= FLEET_TARGETS.logLinesPerProfileDay);
  row('log lines holding a secret', result.secretLeaks, '0', result.secretLeaks === 0);
  row('wall time', `${duration(result.wallMs)} (${fmt(result.simulatedMs / DAY / (result.wallMs / MINUTE), 2)} simulated days per wall minute)`);
  row('    of which', `sweeps ${duration(f.wallBy.sweeps)}, checks ${duration(f.wallBy.checks)}, the soak's looking ${duration(f.wallBy.harness)}`);
  const width = rows.reduce((w, r) => Math.max(w, r[0].length), 0);
  const vwidth = Math.min(90, rows.reduce((w, r) => Math.max(w, r[1].length), 0));
  const twidth = rows.reduce((w, r) => Math.max(w, r[2].length), 0);
  const lines = [`syncauth soak — fleet run, seed ${result.seed}`, `${'measure'.padEnd(width)}  ${'value'.padEnd(vwidth)}  ${'target'.padEnd(twidth)}  result`];
  for (const [a, b, c, d] of rows) lines.push(`${a.padEnd(width)}  ${b.padEnd(vwidth)}  ${c.padEnd(twidth)}  ${d}`.trimEnd());
  const windows = [...stale.windows.map((w) => ['stale', w]), ...stale.duringServiceOutages.map((w) => ['stale redis', w]), ...result.lapsed.windows.map((w) => ['lapsed', w])];
  if (windows.length > 0) {
    lines.push('', 'unexpected windows:');
    for (const [why, w] of windows.slice(0, 20)) lines.push(`  ${why.padEnd(12)} profile ${w.profile}: +${duration(w.from)} for ${fmt(w.seconds)} s${w.cause ? ` (${w.cause})` : ''}`);
  }
  if (misses.length > 0) {
    lines.push('', `MISSED (replay with --fleet --seed ${result.seed}):`);
    for (const m of misses) lines.push(`  ${m.target}: ${m.message}${m.event ? `; event: ${typeof m.event === 'string' ? m.event : JSON.stringify(m.event)}` : ''}`);
  }
  return lines.join('\n');
}
