// What both soak runs share: the seeded random numbers, the fault schedule drawn from them, the targets a run
// must meet, and the report (a table, or JSON). A run returns a plain result object (described by
// `emptyResult`); `checkTargets` turns it into the list of targets missed, each naming the event that broke
// it when there is one, so that `--seed N` replays the failure.

/** Uniform numbers in [0, 1) from a 32-bit seed (mulberry32): the same seed gives the same run. */
export function seededRandom(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

/**
 * Places faults at random times. `specs` is a list of `{ kind, channel, count, durationMs: [min, max], ...extra }`;
 * two faults of one channel (the token endpoint, the service, a replica, Redis, the clock...) never overlap,
 * and a gap of `gapMs` is kept between them so each one's effect is seen on its own. An extra value that is a
 * function is drawn per event: `(random) => ...`. `skipMs` at the start is
 * left quiet, so the run has a baseline. Returns the events sorted by time, each `{ at, kind, channel, durationMs, ...extra }`.
 */
export function drawSchedule(random, { durationMs, skipMs = 0, gapMs = 0, specs }) {
  const events = [];
  const busy = new Map();
  for (const spec of specs) {
    const { count, durationMs: range, channel, ...extra } = spec;
    for (let n = 0; n < count; n++) {
      for (let attempt = 0; attempt < 200; attempt++) {
        const length = Math.round(range[0] + random() * (range[1] - range[0]));
        const at = Math.round(skipMs + random() * (durationMs - skipMs - length - gapMs));
        const taken = busy.get(channel) ?? [];
        if (taken.some(([from, to]) => at < to + gapMs && at + length + gapMs > from)) continue;
        taken.push([at, at + length]);
        busy.set(channel, taken);
        const drawn = Object.fromEntries(Object.entries(extra).map(([k, v]) => [k, typeof v === 'function' ? v(random) : v]));
        events.push({ at, channel, durationMs: length, ...drawn });
        break;
      }
    }
  }
  return events.sort((a, b) => a.at - b.at || a.kind.localeCompare(b.kind));
}

/** A run's result before anything happened; every run fills in the same fields. */
export function emptyResult(run, seed) {
  return {
    run,
    seed,
    simulatedMs: 0,
    lifetimeMs: 0,
    marginMs: 0,
    profiles: 0,
    replicas: 0,
    /** The fault schedule, as drawn. */
    schedule: [],
    /** Token lifetimes the run covered: simulated time / lifetime, per profile. */
    lifetimes: 0,
    /** Access tokens issued by renewals, per replica. */
    renewals: {},
    /** Renewals per token per day, per replica that renews, against the ideal for the lifetime and margin. */
    renewalsPerTokenPerDay: {},
    idealPerDay: 0,
    /** Seconds a published token was expired while its daemon was running, outside the windows below. */
    expiredSeconds: 0,
    expiredWindows: [],
    /** Expired while the token endpoint was down longer than the margin: expected, listed. */
    expiredDuringLongOutages: [],
    /** Expired while the replica itself was stopped or dead: listed apart. */
    expiredWhileReplicaDown: [],
    /**
     * Expired while the token file's directory was unusable (nothing can be written or removed there), and until
     * the sweep after it is usable again writes or removes the file: listed apart.
     */
    expiredWhileDirectoryUnusable: [],
    /** Seconds a running replica published no token for a profile it serves, outside the listed windows. */
    noTokenSeconds: 0,
    noTokenWindows: [],
    /** No token while the token endpoint was down past the margin, or the token file's directory unusable. */
    noTokenListed: [],
    /** Seconds a profile had no connector at all (deleted behind the daemon's back, until recreated): reported. */
    missingConnectorSeconds: 0,
    grantsLost: 0,
    grantsLostDetail: [],
    /** Observations at which a profile had more than one connector. */
    duplicateConnectors: 0,
    duplicateDetail: [],
    /** The connector held an expired token (the cycle deadline is the expiry of the token it was given). */
    staleConnector: { count: 0, seconds: 0, windows: [], duringServiceOutages: [] },
    humanActions: [],
    expectedHumanActions: [],
    /** Token requests made for the revoked grant after it was revoked, per replica. */
    revokedRetries: {},
    rssPeakMiB: 0,
    rssWeekMiB: 0,
    rssEndMiB: 0,
    /**
     * Heap in use after a full collection, after the first week and at the end. Where several parts share one
     * process (the virtual run: emulator, harness, two daemons), this is the leak measure: RSS there follows
     * V8's reserved heap, which grows and shrinks by tens of MiB with no object kept. Absent (0) otherwise.
     */
    heapWeekMiB: 0,
    heapEndMiB: 0,
    logLinesPerDay: 0,
    logLinesPerProfileDay: 0,
    /** Log lines that held a secret (an app secret, a refresh or access token): must be 0. */
    secretLeaks: 0,
    /** Faults the run could not make, with why (a missing tool): printed, and a miss. */
    notRun: [],
    wallMs: 0,
  };
}

export const TARGETS = {
  expiredSeconds: 0,
  grantsLost: 0,
  duplicateConnectors: 0,
  staleConnectorCount: 0,
  /** Renewals per token per day may exceed the ideal by retries after faults, never fall below it much. */
  renewalRatio: [0.95, 1.15],
  rssGrowth: 0.1,
  /** Requests for a revoked grant: the one that learns it is revoked, and one more after a re-read of the store. */
  revokedRetries: 3,
  logLinesPerProfileDay: 100,
};

/** The targets `result` missed, each `{ target, message, event? }`. */
export function checkTargets(result) {
  const misses = [];
  const miss = (target, message, event) => misses.push({ target, message, ...(event ? { event } : {}) });
  if (result.expiredSeconds > TARGETS.expiredSeconds) {
    const w = result.expiredWindows[0];
    miss('expired token published', `${fmt(result.expiredSeconds)} s with an expired token published while its daemon ran`, w?.cause ?? w);
  }
  if (result.noTokenSeconds > 0) {
    const w = result.noTokenWindows[0];
    miss('no token published', `${fmt(result.noTokenSeconds)} s with no token published by a running replica`, w?.cause ?? w);
  }
  if (result.grantsLost > TARGETS.grantsLost) miss('grants lost', `${result.grantsLost} grant(s) lost: ${JSON.stringify(result.grantsLostDetail)}`, result.grantsLostDetail[0]?.cause);
  if (result.duplicateConnectors > TARGETS.duplicateConnectors) miss('duplicate connectors', `${result.duplicateConnectors} observation(s) with duplicate connectors`, result.duplicateDetail[0]);
  if (result.staleConnector.count > TARGETS.staleConnectorCount) {
    miss('stale connector', `the connector held an expired token ${result.staleConnector.count} time(s), ${fmt(result.staleConnector.seconds)} s in all`, result.staleConnector.windows[0]?.cause ?? result.staleConnector.windows[0]);
  }
  const needed = [...result.humanActions].map((h) => h.profile).sort();
  const expected = [...result.expectedHumanActions].sort();
  if (JSON.stringify(needed) !== JSON.stringify(expected)) miss('human actions', `needed for ${JSON.stringify(needed)}, expected only ${JSON.stringify(expected)}`);
  for (const [replica, ratio] of Object.entries(result.renewalsPerTokenPerDay)) {
    const r = ratio / result.idealPerDay;
    if (!(r >= TARGETS.renewalRatio[0] && r <= TARGETS.renewalRatio[1])) miss('renewal rate', `replica ${replica}: ${ratio.toFixed(2)} renewals per token per day, ${r.toFixed(3)}× the ideal`);
  }
  for (const [replica, count] of Object.entries(result.revokedRetries)) {
    if (count > TARGETS.revokedRetries) {
      const asked = result.revokedRequests?.[replica];
      miss('revoked grant retried', `replica ${replica} asked for the revoked grant ${count} times after it was revoked${asked ? ` (at, status: ${asked.map((r) => `${r.at} s ${r.status}`).join(', ')})` : ''}`);
    }
  }
  if (result.heapWeekMiB > 0) {
    if (result.heapEndMiB > result.heapWeekMiB * (1 + TARGETS.rssGrowth)) miss('memory growth', `heap in use ${fmt(result.heapEndMiB)} MiB at the end, ${fmt(result.heapWeekMiB)} MiB after the first week`);
  } else if (result.rssWeekMiB > 0 && result.rssEndMiB > result.rssWeekMiB * (1 + TARGETS.rssGrowth)) {
    miss('memory growth', `RSS ${fmt(result.rssEndMiB)} MiB at the end, ${fmt(result.rssWeekMiB)} MiB after the first week`);
  }
  if (result.logLinesPerProfileDay > TARGETS.logLinesPerProfileDay) miss('log volume', `${fmt(result.logLinesPerProfileDay)} log lines per profile per day`);
  if (result.secretLeaks > 0) miss('secret in logs', `${result.secretLeaks} log line(s) held a secret`);
  for (const n of result.notRun) miss('fault not run', `${n.kind}: ${n.reason}`);
  return misses;
}

export function fmt(n, digits = 1) {
  return Number.isInteger(n) ? n.toLocaleString('en-US') : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export function duration(ms) {
  if (ms >= 2 * DAY) return `${fmt(ms / DAY)} days`;
  if (ms >= 2 * HOUR) return `${fmt(ms / HOUR)} h`;
  if (ms >= 2 * MINUTE) return `${fmt(ms / MINUTE)} min`;
  return `${fmt(ms / SECOND)} s`;
}

/** The fault schedule, one line per event, at simulated offsets from the start. */
export function formatSchedule(result) {
  const lines = [`fault schedule (seed ${result.seed}, ${result.schedule.length} events):`];
  for (const e of result.schedule) {
    const extra = Object.entries(e)
      .filter(([k]) => !['at', 'kind', 'channel', 'durationMs'].includes(k))
      .map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : v}`)
      .join(' ');
    lines.push(`  +${duration(e.at).padEnd(12)} ${e.kind.padEnd(26)} ${e.durationMs ? duration(e.durationMs).padEnd(10) : ''.padEnd(10)} ${extra}`);
  }
  return lines.join('\n');
}

/** The report a user reads: what ran, and each target with its value. */
export function formatResult(result, misses = checkTargets(result)) {
  const rows = [];
  const row = (label, value, target = '', ok) => rows.push([label, String(value), target, ok === undefined ? '' : ok ? 'ok' : 'MISSED']);
  row('simulated time', duration(result.simulatedMs));
  row('profiles × replicas', `${result.profiles} × ${result.replicas}`);
  row('token lifetime / margin', `${duration(result.lifetimeMs)} / ${duration(result.marginMs)}`);
  row('lifetimes per profile', fmt(result.lifetimes, 0));
  for (const [replica, n] of Object.entries(result.renewals)) row(`renewals, replica ${replica}`, fmt(n));
  for (const [replica, perDay] of Object.entries(result.renewalsPerTokenPerDay)) {
    const r = perDay / result.idealPerDay;
    row(`renewals/token/day, replica ${replica}`, `${perDay.toFixed(2)} (${r.toFixed(3)}× ideal ${result.idealPerDay.toFixed(2)})`, `${TARGETS.renewalRatio[0]}–${TARGETS.renewalRatio[1]}×`, r >= TARGETS.renewalRatio[0] && r <= TARGETS.renewalRatio[1]);
  }
  row('expired token published, daemon running', `${fmt(result.expiredSeconds)} s`, '0 s', result.expiredSeconds === 0);
  row('  during outages longer than the margin', `${result.expiredDuringLongOutages.length} window(s), ${fmt(sum(result.expiredDuringLongOutages))} s`, 'listed');
  row('  while the replica was stopped or dead', `${result.expiredWhileReplicaDown.length} window(s), ${fmt(sum(result.expiredWhileReplicaDown))} s`, 'listed');
  const unusable = result.expiredWhileDirectoryUnusable ?? [];
  row('  directory unusable, until the next sweep', `${unusable.length} window(s), ${fmt(sum(unusable))} s`, 'listed');
  row('no token published, daemon running', `${fmt(result.noTokenSeconds)} s`, '0 s', result.noTokenSeconds === 0);
  row('  token endpoint down past the margin, or directory unusable', `${result.noTokenListed.length} window(s), ${fmt(sum(result.noTokenListed))} s`, 'listed');
  row('grants lost', result.grantsLost, '0', result.grantsLost === 0);
  row('duplicate connectors (observations)', result.duplicateConnectors, '0', result.duplicateConnectors === 0);
  row('connector with an expired token', `${result.staleConnector.count} time(s), ${fmt(result.staleConnector.seconds)} s`, '0', result.staleConnector.count === 0);
  const serviceWindows = result.staleConnector.duringServiceOutages ?? [];
  row('  while the service refused or hung, or Redis was down', `${serviceWindows.length} window(s), ${fmt(sum(serviceWindows))} s`, 'listed');
  // The real run also keeps these apart (its lease and outages are long against its margin); the table shows them.
  const leaseWindows = result.staleConnector.whileLeaseOfDownReplica;
  if (leaseWindows) row('  while a dead or stopped replica held the lease (30 s)', `${leaseWindows.length} window(s), ${fmt(sum(leaseWindows))} s`, 'listed');
  const outageWindows = result.staleConnector.duringLongOutages;
  if (outageWindows) row('  during token outages longer than the margin', `${outageWindows.length} window(s), ${fmt(sum(outageWindows))} s`, 'listed');
  row('no connector at all (deleted, until recreated)', `${fmt(result.missingConnectorSeconds)} s`, 'reported');
  const needed = result.humanActions.map((h) => `${h.profile} (${h.reason})`).join(', ') || 'none';
  row('human actions needed', needed, `only ${result.expectedHumanActions.join(', ') || 'none'}`, !misses.some((m) => m.target === 'human actions'));
  for (const [replica, n] of Object.entries(result.revokedRetries)) row(`  revoked grant asked again, replica ${replica}`, n, `≤ ${TARGETS.revokedRetries}`, n <= TARGETS.revokedRetries);
  const peak = result.rssPeakDetail;
  row('peak RSS', `${fmt(result.rssPeakMiB)} MiB${peak ? ` (replica ${peak.replica}, +${fmt(peak.at)} s wall)` : ''}`);
  const growthRow = (label, week, end, judged) => {
    const growth = end / week - 1;
    row(label, `${fmt(week)} → ${fmt(end)} MiB (${growth >= 0 ? '+' : ''}${(growth * 100).toFixed(1)} %)`, judged ? `≤ +${TARGETS.rssGrowth * 100} %` : 'reported', judged ? growth <= TARGETS.rssGrowth : undefined);
  };
  if (result.rssWeekMiB > 0) growthRow('RSS after week 1 → at the end', result.rssWeekMiB, result.rssEndMiB, !(result.heapWeekMiB > 0));
  if (result.heapWeekMiB > 0) growthRow('heap in use after GC, week 1 → end', result.heapWeekMiB, result.heapEndMiB, true);
  row('log lines per day', `${fmt(result.logLinesPerDay)} (${fmt(result.logLinesPerProfileDay)} per profile)`, `≤ ${TARGETS.logLinesPerProfileDay} per profile`, result.logLinesPerProfileDay <= TARGETS.logLinesPerProfileDay);
  row('log lines holding a secret', result.secretLeaks, '0', result.secretLeaks === 0);
  row('wall time', duration(result.wallMs));
  const width = rows.reduce((w, r) => Math.max(w, r[0].length), 0);
  const vwidth = rows.reduce((w, r) => Math.max(w, r[1].length), 0);
  const twidth = rows.reduce((w, r) => Math.max(w, r[2].length), 0);
  const lines = [`syncauth soak — ${result.run} run, seed ${result.seed}`, `${'measure'.padEnd(width)}  ${'value'.padEnd(vwidth)}  ${'target'.padEnd(twidth)}  result`];
  for (const [a, b, c, d] of rows) lines.push(`${a.padEnd(width)}  ${b.padEnd(vwidth)}  ${c.padEnd(twidth)}  ${d}`.trimEnd());
  const windows = [
    ...result.expiredDuringLongOutages.map((w) => ['long outage', w]),
    ...result.expiredWhileReplicaDown.map((w) => ['replica down', w]),
    ...(result.expiredWhileDirectoryUnusable ?? []).map((w) => ['dir unusable', w]),
    ...result.expiredWindows.map((w) => ['UNEXPECTED', w]),
  ];
  if (windows.length > 0) {
    lines.push('', 'windows with an expired token published:');
    for (const [why, w] of windows) lines.push(`  ${why.padEnd(12)} replica ${w.replica} profile ${w.profile}: +${duration(w.from)} for ${fmt(w.seconds)} s${w.cause ? ` (${w.cause})` : ''}`);
  }
  for (const n of result.notRun) lines.push(`not run: ${n.kind}: ${n.reason}`);
  if (misses.length > 0) {
    lines.push('', `MISSED (replay with --seed ${result.seed}):`);
    for (const m of misses) lines.push(`  ${m.target}: ${m.message}${m.event ? `; event: ${typeof m.event === 'string' ? m.event : JSON.stringify(m.event)}` : ''}`);
  }
  return lines.join('\n');
}

export function sum(windows) {
  return windows.reduce((s, w) => s + w.seconds, 0);
}

/**
 * Windows accounted minute by minute, per key: `account(key, list, from, to, info)` pushes a window to `list`
 * when it opens and extends it while the next stretch follows on (same key, same list); `clean(list)` is the list
 * as reported, its times from `start`.
 */
export function windowLedger(start) {
  const open = new Map();
  const account = (key, list, from, to, info) => {
    const seconds = (to - from) / 1000;
    const current = open.get(key);
    if (current && current.to === from && current.list === list) {
      current.to = to;
      current.seconds += seconds;
      return;
    }
    const w = { ...info, from: from - start, to, seconds, list };
    open.set(key, w);
    list.push(w);
  };
  const clean = (list) => list.map(({ list: _l, to: _t, ...w }) => w);
  return { account, clean };
}

/** Tracks stretches of time in which a condition held, per key; closed stretches are returned by `close`. */
export class Windows {
  #open = new Map();
  #closed = [];

  /** At `at`, the condition holds (or not) for `key`; `info` is kept with a stretch when it opens. */
  observe(key, holds, at, info = {}) {
    const open = this.#open.get(key);
    if (holds && !open) this.#open.set(key, { from: at, ...info });
    if (!holds && open) {
      this.#open.delete(key);
      this.#closed.push({ ...open, to: at, seconds: (at - open.from) / 1000 });
    }
  }

  close(at) {
    for (const [key] of this.#open) this.observe(key, false, at);
    return this.#closed;
  }
}
