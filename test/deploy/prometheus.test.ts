// deploy/prometheus: the alerting rules pass `promtool check rules` and their own unit tests
// (`promtool test rules`), and their expressions hold against the daemon's real /metrics: a daemon serving a
// healthy profile, a revoked one and one whose connector cannot be updated is scraped, its samples become
// promtool's input series, and exactly the alerts that should fire do. The fleet's alerts likewise, against
// three replicas of a fleet: one dies while Redis is away, and the others' metrics show its share unserved.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { startDaemon } from '../../src/daemon/index.js';
import type { DaemonGrant, RunningDaemon } from '../../src/daemon/index.js';
import { ROOT, tempDir } from '../helpers/cli.js';
import { isCI } from '../helpers/secret-service.js';
import { captureLog, emulator, fakeClock, obtainGrant, profileOf, seededRandom } from '../daemon/helpers.js';
import { openProfileStore } from '../../src/profile/index.js';
import { findExecutable } from '../helpers/executables.js';
import { CoordinatorUnavailableError } from '../../src/daemon/coordinator.js';
import { memoryCoordinator, type MemoryRedis } from '../helpers/replicas.mjs';

const RULES_DIR = path.join(ROOT, 'deploy/prometheus');
const RULES = path.join(RULES_DIR, 'syncauth-rules.yml');
const RULES_TESTS = path.join(RULES_DIR, 'syncauth-rules.test.yml');

const promtool = findExecutable('promtool');
const MISSING = 'promtool not found: install the Debian package (apt-get install -y prometheus)';
const skip = promtool === null && !isCI();
if (skip) console.warn(`${MISSING}; skipping the alerting rule checks (they fail instead when CI is set)`);

function runPromtool(args: string[], cwd: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(promtool as string, args, { cwd, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (output += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (output += d));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, output }));
  });
}

/** `promtool test rules` on `tests` (a rule test file's content, named `file`) beside a copy of the rules; its output printed. */
async function testRules(file: string, tests: unknown): Promise<{ code: number | null; output: string }> {
  const dir = tempDir('syncauth-rules-');
  copyFileSync(RULES, path.join(dir, 'syncauth-rules.yml'));
  writeFileSync(path.join(dir, file), stringify(tests));
  const result = await runPromtool(['test', 'rules', file], dir);
  console.log(result.output);
  return result;
}

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface RuleTests {
  tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[];
}

const rules = (parse(readFileSync(RULES, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);
const ruleTests = parse(readFileSync(RULES_TESTS, 'utf8')) as RuleTests;

describe.skipIf(skip)('the alerting rules', () => {
  beforeAll(() => {
    if (!promtool) throw new Error(`${MISSING} (required in CI: CI is set)`);
  });

  it('pass promtool check rules', async () => {
    const result = await runPromtool(['check', 'rules', RULES], RULES_DIR);
    console.log(result.output);
    expect(result.code).toBe(0);
    expect(result.output).toContain(`SUCCESS: ${rules.length} rules found`);
  });

  it('pass their unit tests (promtool test rules), which make every alert fire somewhere', async () => {
    const result = await runPromtool(['test', 'rules', path.basename(RULES_TESTS)], RULES_DIR);
    console.log(result.output);
    expect(result.code).toBe(0);
    expect(result.output).toContain('SUCCESS');
    const fired = new Set(ruleTests.tests.flatMap((t) => t.alert_rule_test ?? []).filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname));
    expect([...fired].sort()).toEqual(rules.map((r) => r.alert).sort());
  });

  it('would fail on a broken rule (the checks above can fail)', async () => {
    const dir = tempDir('syncauth-rules-');
    writeFileSync(path.join(dir, 'syncauth-rules.yml'), readFileSync(RULES, 'utf8').replace('syncauth_reauthorization_needed == 1\n        for: 1m', 'syncauth_reauthorization_needed == 1)\n        for: 1m'));
    expect((await runPromtool(['check', 'rules', 'syncauth-rules.yml'], dir)).code).not.toBe(0);
    // A rule that no longer excludes revoked profiles from "not renewed" fails the unit tests.
    writeFileSync(path.join(dir, 'syncauth-rules.yml'), readFileSync(RULES, 'utf8').replace(/\n\s*unless on \(job, instance, profile\)\n\s*\(syncauth_reauthorization_needed == 1\)/, ''));
    copyFileSync(RULES_TESTS, path.join(dir, 'syncauth-rules.test.yml'));
    expect((await runPromtool(['test', 'rules', 'syncauth-rules.test.yml'], dir)).code).not.toBe(0);
  });

  it('name the severity, the profile and the command that fixes it', () => {
    for (const rule of rules) {
      expect([rule.alert, rule.labels?.severity]).toEqual([rule.alert, expect.stringMatching(/^(warning|critical)$/)]);
      expect([rule.alert, typeof rule.annotations?.summary, typeof rule.annotations?.description]).toEqual([rule.alert, 'string', 'string']);
      // About a profile: a `profile` label in the expression (not the fleet's counts of profiles), or a per-profile series.
      if (/\bprofile\b/.test(rule.expr) || /reconcile|reauthorization|token_expiry/.test(rule.expr)) {
        expect([rule.alert, rule.annotations?.description]).toEqual([rule.alert, expect.stringMatching(/\{\{ \$labels\.profile \}\}[\s\S]*`syncauth [a-z]+ --profile \{\{ \$labels\.profile \}\}`/)]);
      }
    }
  });
});

// ---- the rules against the daemon's real metrics ----

const LABELS = { job: 'syncauth', instance: 'daemon:9464' };
const MINUTES = 75;

/** Prometheus text exposition → promtool input series: syncauth's samples only (those starting with `prefix`), with job and instance added. */
function inputSeries(text: string, scrapedAtSeconds: number, labels: Record<string, string> = LABELS, prefix = 'syncauth_'): { series: string; values: string }[] {
  const out: { series: string; values: string }[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(prefix)) continue;
    const match = /^([a-z_:][a-z0-9_:]*)(?:\{(.*)\})? (\S+)$/i.exec(line);
    if (!match) throw new Error(`cannot read the sample: ${line}`);
    const [, name, own = '', raw] = match as unknown as [string, string, string | undefined, string];
    const value = Number(raw);
    if (!Number.isFinite(value)) throw new Error(`not a finite sample: ${line}`);
    const all = [own, ...Object.entries(labels).map(([k, v]) => `${k}="${v}"`)].filter((l) => l !== '').join(',');
    // Timestamps move to promtool's clock, which starts at 0 at the scrape; the daemon sweeps every minute.
    let values = `${value}x${MINUTES}`;
    if (name.endsWith('_timestamp_seconds')) {
      const rebased = Math.round(value - scrapedAtSeconds);
      values = name === 'syncauth_last_sweep_timestamp_seconds' ? `${rebased}+60x${MINUTES}` : `${rebased}x${MINUTES}`;
    }
    out.push({ series: `${name}{${all}}`, values });
  }
  return out;
}

/** The annotation templates of a rule with its labels filled in (only `{{ $labels.x }}` is used where this is called). */
function render(template: string, labels: Record<string, string>): string {
  const text = template.replace(/\{\{ \$labels\.([a-z_]+) \}\}/g, (_, name: string) => labels[name] ?? '');
  if (text.includes('{{')) throw new Error(`cannot render: ${template}`);
  return text;
}

/** Prometheus' humanizeDuration, for the seconds the annotations show. */
function humanizeDuration(seconds: number): string {
  const sign = seconds < 0 ? '-' : '';
  const v = Math.abs(seconds);
  const [d, h, m, s] = [Math.floor(v / 86_400), Math.floor(v / 3_600) % 24, Math.floor(v / 60) % 60, Math.floor(v) % 60];
  if (d) return `${sign}${d}d ${h}h ${m}m ${s}s`;
  if (h) return `${sign}${h}h ${m}m ${s}s`;
  if (m) return `${sign}${m}m ${s}s`;
  return `${sign}${v}s`;
}

const byName = new Map(rules.map((r) => [r.alert, r]));

/**
 * Runs promtool on `series` (held for MINUTES minutes): each listed rule's expression selects exactly the samples
 * in `selected` right away, and at the end each alert fires for exactly the profiles in `firing` (none for an
 * alert not listed there), its annotations rendered with the alert's labels and value.
 */
async function promtoolAgainst(
  series: { series: string; values: string }[],
  want: {
    selected: Record<string, { profile: string; metric: string; value: number }[]>;
    firing: Record<string, string[]>;
    values?: Record<string, (profile: string) => number>;
  },
): Promise<{ code: number | null; output: string }> {
  const alertOf = (alert: string, profile: string) => {
    const rule = byName.get(alert) as Rule;
    const labels = { ...LABELS, profile, severity: rule.labels?.severity as string };
    const value = want.values?.[alert]?.(profile);
    const text = (template: string): string =>
      render(template.replace(/\{\{ \$value \| humanizeDuration \}\}/g, () => humanizeDuration(value as number)), labels);
    return { exp_labels: labels, exp_annotations: Object.fromEntries(Object.entries(rule.annotations ?? {}).map(([k, v]) => [k, text(v)])) };
  };
  const at = `${MINUTES - 5}m`;
  const tests = {
    rule_files: ['syncauth-rules.yml'],
    evaluation_interval: '1m',
    tests: [
      {
        interval: '1m',
        input_series: series,
        promql_expr_test: Object.entries(want.selected).map(([alert, samples]) => ({
          expr: (byName.get(alert) as Rule).expr,
          eval_time: '0m',
          exp_samples: samples.map((s) => ({ labels: `${s.metric}{job="syncauth",instance="daemon:9464",profile="${s.profile}"}`, value: s.value })),
        })),
        alert_rule_test: rules.map((rule) => ({
          eval_time: at,
          alertname: rule.alert,
          exp_alerts: (want.firing[rule.alert] ?? []).map((profile) => alertOf(rule.alert, profile)),
        })),
      },
    ],
  };
  return testRules('real.test.yml', tests);
}

describe.skipIf(skip)('the alerting rules against a real daemon', () => {
  it('fire for a revoked profile and a failing connector, then for tokens a failing token endpoint leaves in the margin, and for nothing else', async () => {
    if (!promtool) throw new Error(`${MISSING} (required in CI: CI is set)`);
    const clock = fakeClock();
    const emu = await emulator({ tokenLifetimeSeconds: 14_400, now: clock.now });
    const grants = new Map<string, DaemonGrant>();
    for (const name of ['docs', 'legal', 'sales']) grants.set(name, await obtainGrant(emu));
    const log = captureLog();
    const daemon: RunningDaemon = await startDaemon({
      profiles: async () =>
        ['docs', 'legal', 'sales'].map((name) => ({
          // sales reconciles with an API key the service refuses: its connector is never updated.
          ...profileOf(emu, { name, grant: grants.get(name) as DaemonGrant, reconcile: true }, name === 'sales' ? 'not-the-key' : undefined),
          readGrant: async () => grants.get(name) as DaemonGrant,
        })),
      profileStore: openProfileStore(tempDir('syncauth-metrics-')),
      renewMarginMs: 900_000,
      schedule: false,
      logger: log.logger,
      now: clock.now,
      sleep: clock.sleep,
      random: seededRandom(),
      backoff: { baseMs: 500 },
      serviceRetry: { retries: 0 },
      listen: { host: '127.0.0.1', port: 0 },
    });
    try {
      await daemon.sweep();
      emu.revokeGrant((grants.get('legal') as DaemonGrant).refreshToken);
      // Into the margin: every profile renews; legal's grant is refused.
      clock.advance(14_400_000 - 800_000);
      await daemon.sweep();
      clock.advance(10_000);
      const text = await (await fetch(`${daemon.url as string}/metrics`)).text();
      for (const name of ['syncauth_renew_margin_seconds', 'syncauth_reauthorization_needed', 'syncauth_last_reconcile_success', 'syncauth_last_sweep_timestamp_seconds']) {
        expect(text).toContain(`${name}`);
      }
      const series = inputSeries(text, clock.now() / 1000);
      console.log(series.map((s) => `${s.series} ${s.values}`).join('\n'));

      const phase1 = await promtoolAgainst(series, {
        selected: {
          SyncauthReauthorizationNeeded: [{ profile: 'legal', metric: 'syncauth_reauthorization_needed', value: 1 }],
          SyncauthReconcileFailing: [{ profile: 'sales', metric: 'syncauth_last_reconcile_success', value: 0 }],
          // legal's token is inside the margin too, but it needs re-authorization: that alert alone.
          SyncauthTokenNotRenewed: [],
          SyncauthSweepStalled: [],
        },
        firing: { SyncauthReauthorizationNeeded: ['legal'], SyncauthReconcileFailing: ['sales'] },
      });
      expect(phase1.code, phase1.output).toBe(0);

      // The token endpoint fails from now on; the tokens slide into the margin again and are not renewed.
      emu.setFaults([{ route: 'token', status: 503 }]);
      clock.advance(14_400_000 - 800_000 - 10_000);
      await daemon.sweep();
      clock.advance(10_000);
      const stuck = inputSeries(await (await fetch(`${daemon.url as string}/metrics`)).text(), clock.now() / 1000);
      const expiry = (profile: string): number =>
        Number(/^(-?\d+)x/.exec(stuck.find((s) => s.series.startsWith(`syncauth_token_expiry_seconds{profile="${profile}"`))?.values ?? '')?.[1]);
      expect(expiry('docs')).toBeLessThan(900);
      const phase2 = await promtoolAgainst(stuck, {
        selected: {
          SyncauthTokenNotRenewed: ['docs', 'sales'].map((profile) => ({ profile, metric: 'syncauth_token_expiry_seconds', value: expiry(profile) })),
        },
        firing: { SyncauthReauthorizationNeeded: ['legal'], SyncauthReconcileFailing: ['sales'], SyncauthTokenNotRenewed: ['docs', 'sales'] },
        values: { SyncauthTokenNotRenewed: (profile) => expiry(profile) },
      });
      expect(phase2.code, phase2.output).toBe(0);
    } finally {
      await daemon.close();
    }
  }, 60_000);
});

// ---- the fleet's alerts against real replicas ----

describe.skipIf(skip)('the fleet alerts against real replicas', () => {
  const MINUTE = 60_000;
  const FALLBACK = 20 * MINUTE;

  /** promtool on the replicas' fleet series (held for MINUTES minutes): at the end, exactly `firing` of the fleet's alerts. */
  async function fleetAlerts(series: { series: string; values: string }[], firing: { unserved?: number; fallback?: string[] }): Promise<{ code: number | null; output: string }> {
    const annotations = (alert: string, labels: Record<string, string>, value?: number): Record<string, string> =>
      Object.fromEntries(Object.entries((byName.get(alert) as Rule).annotations ?? {}).map(([k, v]) => [k, render(v.replace(/\{\{ \$value \}\}/g, String(value)), labels)]));
    const tests = {
      rule_files: ['syncauth-rules.yml'],
      evaluation_interval: '1m',
      tests: [{
        interval: '1m',
        input_series: series,
        alert_rule_test: [
          {
            eval_time: `${MINUTES - 5}m`,
            alertname: 'SyncauthFleetShareUnserved',
            exp_alerts: firing.unserved === undefined ? [] : [{ exp_labels: { severity: 'critical' }, exp_annotations: annotations('SyncauthFleetShareUnserved', {}, firing.unserved) }],
          },
          {
            eval_time: `${MINUTES - 5}m`,
            alertname: 'SyncauthFleetFallback',
            exp_alerts: (firing.fallback ?? []).map((instance) => {
              const labels = { job: 'syncauth', instance, severity: 'warning' };
              return { exp_labels: labels, exp_annotations: annotations('SyncauthFleetFallback', labels) };
            }),
          },
        ],
      }],
    };
    return testRules('fleet.test.yml', tests);
  }

  it('fire for a share nobody serves while Redis is away and for replicas in fallback, and not while every share is served', async () => {
    if (!promtool) throw new Error(`${MISSING} (required in CI: CI is set)`);
    const clock = fakeClock();
    let mono = 0;
    const emu = await emulator({ tokenLifetimeSeconds: 14_400, now: clock.now });
    const redis: MemoryRedis = { now: clock.now, leases: new Map(), records: new Map() };
    const grantKey = randomBytes(32);
    const names = Array.from({ length: 9 }, (_, i) => `p${i}`);
    const grants = new Map<string, DaemonGrant>();
    for (const name of names) grants.set(name, await obtainGrant(emu));
    const log = captureLog();
    const replicas = new Map<string, RunningDaemon>();
    for (const id of ['a', 'b', 'c']) {
      replicas.set(id, await startDaemon({
        profiles: async () => names.map((name) => profileOf(emu, { name, grant: grants.get(name) as DaemonGrant })),
        profileStore: openProfileStore(tempDir('syncauth-metrics-')),
        renewMarginMs: 900_000,
        schedule: false,
        checkIntervalMs: 0,
        logger: log.logger,
        now: clock.now,
        monotonicNow: () => mono,
        random: seededRandom(),
        coordinator: memoryCoordinator(redis, id, CoordinatorUnavailableError, clock.now),
        grantKey,
        fleet: { timers: false, leaseMs: 3 * MINUTE, fallbackMs: FALLBACK },
      }));
    }
    const alive = new Set(replicas.keys());
    const sweep = async (minutes = 1): Promise<void> => {
      for (let i = 0; i < minutes; i += 1) {
        clock.advance(MINUTE);
        mono += MINUTE;
        for (const id of alive) await (replicas.get(id) as RunningDaemon).sweep();
      }
    };
    const scrape = async (): Promise<{ series: string; values: string }[]> => {
      const series: { series: string; values: string }[] = [];
      for (const id of alive) series.push(...inputSeries(await (replicas.get(id) as RunningDaemon).registry.metrics(), clock.now() / 1000, { job: 'syncauth', instance: `${id}:9464` }, 'syncauth_fleet_'));
      return series;
    };
    const served = (id: string): number => (replicas.get(id) as RunningDaemon).status().fleet?.served as number;
    try {
      await sweep();
      const healthy = await scrape();
      console.log(healthy.map((s) => `${s.series} ${s.values}`).join('\n'));
      expect((await fleetAlerts(healthy, {})).code).toBe(0);

      // c dies, and Redis goes away before the others have seen its lease end: its share is served by nobody.
      const cShare = served('c');
      expect(cShare).toBeGreaterThan(0);
      alive.delete('c');
      redis.down = true;
      await sweep();
      const unserved = await scrape();
      const result = await fleetAlerts(unserved, { unserved: names.length - cShare, fallback: ['a:9464', 'b:9464'] });
      expect(result.code, result.output).toBe(0);

      // Past the bound a and b serve every profile: still in fallback, but no share is unserved.
      await sweep(FALLBACK / MINUTE);
      const all = await scrape();
      const after = await fleetAlerts(all, { fallback: ['a:9464', 'b:9464'] });
      expect(after.code, after.output).toBe(0);
    } finally {
      for (const daemon of replicas.values()) await daemon.close();
    }
  }, 60_000);
});

// ---- the token-endpoint budget's alerts against real daemons ----

describe.skipIf(skip)('the budget alerts against real daemons', () => {
  const MINUTE = 60_000;
  const BUDGET_ALERTS = ['SyncauthTokenEndpointThrottled', 'SyncauthTokenBudgetSaturated'];

  /** promtool on `series` (held for MINUTES minutes): at the end, exactly the budget alerts in `firing`, on `instance`. */
  async function budgetAlerts(series: { series: string; values: string }[], firing: string[], values: Record<string, string>): Promise<{ code: number | null; output: string }> {
    const labels = { ...LABELS, severity: 'warning' };
    const annotations = (alert: string): Record<string, string> =>
      Object.fromEntries(
        Object.entries((byName.get(alert) as Rule).annotations ?? {}).map(([k, v]) => [k, render(v.replace(/\{\{ \$value( \| printf "%\.1f")? \}\}/g, () => values[alert] ?? ''), labels)]),
      );
    const tests = {
      rule_files: ['syncauth-rules.yml'],
      evaluation_interval: '1m',
      tests: [{
        interval: '1m',
        input_series: series,
        alert_rule_test: BUDGET_ALERTS.map((alert) => ({
          eval_time: `${MINUTES - 5}m`,
          alertname: alert,
          exp_alerts: firing.includes(alert) ? [{ exp_labels: labels, exp_annotations: annotations(alert) }] : [],
        })),
      }],
    };
    return testRules('budget.test.yml', tests);
  }

  /**
   * A daemon with `cap` token requests a second and one renewal at a time, cold-started on 16 profiles of one
   * Dropbox account; its budget series as Prometheus would hold them: the delay counter growing as it grew over
   * the 5 minutes from the start, then (after a 429 when `throttle`) the pause gauge as last scraped.
   */
  async function budgetSeries(cap: number, throttle: boolean): Promise<{ series: { series: string; values: string }[]; waiting: number }> {
    const clock = fakeClock();
    const emu = await emulator({ tokenLifetimeSeconds: 14_400, now: clock.now });
    const names = Array.from({ length: 16 }, (_, i) => `b${i}`);
    const grants = new Map<string, DaemonGrant>();
    for (const name of names) grants.set(name, await obtainGrant(emu));
    const profileStore = openProfileStore(tempDir('syncauth-metrics-'));
    for (const name of names) await profileStore.update(name, () => ({ accountId: 'dbid:budget' }));
    const daemon: RunningDaemon = await startDaemon({
      profiles: async () => names.map((name) => profileOf(emu, { name, grant: grants.get(name) as DaemonGrant })),
      profileStore,
      renewMarginMs: 900_000,
      schedule: false,
      checkIntervalMs: 0,
      logger: captureLog().logger,
      now: clock.now,
      sleep: clock.sleep,
      random: seededRandom(),
      concurrency: 1,
      maxRenewalsPerSecond: cap,
      listen: { host: '127.0.0.1', port: 0 },
    });
    try {
      const scrape = async (): Promise<string> => (await fetch(`${daemon.url as string}/metrics`)).text();
      const delayOf = (text: string): number => Number(/^syncauth_token_requests_delay_seconds_total (\S+)$/m.exec(text)?.[1]);
      const start = clock.now();
      const before = delayOf(await scrape());
      await daemon.sweep();
      clock.advance(Math.max(0, start + 5 * MINUTE - clock.now()));
      const perMinute = (delayOf(await scrape()) - before) / 5;
      if (throttle) {
        // Into the margin, where the first renewal meets a 429 asking for an hour: the account pauses.
        emu.setFaults([{ route: 'token', status: 429, retryAfterSeconds: 3600, times: 1 }]);
        clock.advance(14_400_000 - 800_000);
        await daemon.sweep();
      }
      const text = await scrape();
      const series = inputSeries(text, clock.now() / 1000).filter((s) => s.series.startsWith('syncauth_accounts_paused{'));
      series.push({ series: `syncauth_token_requests_delay_seconds_total{job="syncauth",instance="daemon:9464"}`, values: `0+${perMinute}x${MINUTES}` });
      console.log(series.map((s) => `${s.series} ${s.values}`).join('\n'));
      return { series, waiting: perMinute / 60 };
    } finally {
      await daemon.close();
    }
  }

  it('fire for an account the token endpoint keeps paused and for renewals waiting on a cap too low for the profiles, and not for a daemon within its cap', async () => {
    if (!promtool) throw new Error(`${MISSING} (required in CI: CI is set)`);
    // One renewal every 20 s for 16 profiles due at once: 15 wait, one of them at every moment of the 5 minutes.
    const low = await budgetSeries(0.05, true);
    expect(low.waiting).toBeCloseTo(1, 5);
    expect(low.series.find((s) => s.series.startsWith('syncauth_accounts_paused'))?.values).toBe(`1x${MINUTES}`);
    const fired = await budgetAlerts(low.series, BUDGET_ALERTS, { SyncauthTokenEndpointThrottled: '1', SyncauthTokenBudgetSaturated: low.waiting.toFixed(1) });
    expect(fired.code, fired.output).toBe(0);

    // Ten a second: the same renewals wait 0.1 s each, and nothing is paused.
    const within = await budgetSeries(10, false);
    expect(within.waiting).toBeLessThan(0.01);
    const quiet = await budgetAlerts(within.series, [], {});
    expect(quiet.code, quiet.output).toBe(0);
  }, 60_000);
});
