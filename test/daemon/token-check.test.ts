// The checks of published tokens, in-process on a hand-moved clock: many profiles of one Dropbox account are
// checked no faster than the cap (counted at the emulator), each at its own offset within the interval; an app
// without account_info.read gets one warning and no more checks (and `doctor` says so); with replicas sharing a
// real Redis, one replica checks each profile per interval and the other acts on what it found, while an outcome
// planted in Redis by someone without SYNCAUTH_GRANT_KEY makes no replica renew. The flags and the file's keys are
// taken as documented.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import type { Dispatcher } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisCoordinator, startDaemon, type DaemonGrant, type DaemonOptions, type DaemonProfile, type RunningDaemon } from '../../src/daemon/index.js';
import { parseDaemonConfig } from '../../src/daemon/config-file.js';
import { checkCycle, checkOffset, parseCheckInterval, parseChecksPerSecond } from '../../src/daemon/token-check.js';
import { DEFAULT_APP, type RunningEmulator } from '../../src/emulator/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { redisAvailability, startRedisServer, type RedisServer } from '../helpers/redis.js';
import { captureLog, emulator, fakeClock, obtainGrant, profileOf, seededRandom, tempDir, tokenRequests, type CapturedLog, type Clock } from './helpers.js';

const FOUR_HOURS_S = 14_400;
const MINUTE = 60_000;

interface Setup {
  emu: RunningEmulator;
  clock: Clock;
  log: CapturedLog;
  daemon: RunningDaemon;
  grants: Map<string, DaemonGrant>;
}

async function setup(
  count: number,
  daemon: Partial<DaemonOptions>,
  app = DEFAULT_APP,
  shared?: { emu: RunningEmulator; clock: Clock; grants: Map<string, DaemonGrant> },
  /** Accounts recorded in the profiles' state before the daemon starts, by profile. */
  recorded: Record<string, string> = {},
): Promise<Setup & { tokenDir: string }> {
  const clock = shared?.clock ?? fakeClock();
  const emu = shared?.emu ?? (await emulator({ tokenLifetimeSeconds: FOUR_HOURS_S, now: clock.now, apps: [app] }));
  const names = Array.from({ length: count }, (_, i) => `p${String(i + 1).padStart(3, '0')}`);
  const grants = shared?.grants ?? new Map<string, DaemonGrant>();
  for (const name of names) if (!grants.has(name)) grants.set(name, await obtainGrant(emu, app));
  const log = captureLog();
  const store = openProfileStore(tempDir());
  for (const [name, accountId] of Object.entries(recorded)) await store.update(name, () => ({ accountId }));
  const tokenDir = tempDir();
  const profiles = (): Promise<DaemonProfile[]> =>
    Promise.resolve(names.map((name) => ({ ...profileOf(emu, { name, grant: grants.get(name) as DaemonGrant }), dropboxApiUrl: emu.apiUrl, readGrant: async () => grants.get(name) as DaemonGrant })));
  const running = await startDaemon({
    profiles,
    profileStore: store,
    renewMarginMs: 15 * MINUTE,
    schedule: false,
    logger: log.logger,
    now: clock.now,
    random: seededRandom(),
    sleep: clock.sleep,
    tokenFile: path.join(tokenDir, '{profile}.token'),
    ...daemon,
  });
  return { emu, clock, log, daemon: running, grants, tokenDir };
}

/** When the emulator answered each users/get_current_account, on its clock. */
function checksAt(emu: RunningEmulator, since = 0): number[] {
  return emu.state.requests.filter((r) => r.path === '/2/users/get_current_account' && Number(r.at) >= since).map((r) => Number(r.at));
}

/** Moves the clock `stepMs` at a time for `totalMs`, running the checks due at each step. */
async function tickFor(s: Setup, totalMs: number, stepMs: number): Promise<void> {
  for (let t = 0; t < totalMs; t += stepMs) {
    s.clock.advance(stepMs);
    await s.daemon.checkTick();
  }
}

describe('token checks', () => {
  it('forty profiles of one account are checked no faster than one a second, and each within profiles ÷ cap', async () => {
    // Forty profiles, a 20 s interval: the cap (1/s) needs 40 s to go round, so it binds.
    const s = await setup(40, { checkIntervalMs: 20_000, maxChecksPerSecond: 1 });
    try {
      await s.daemon.sweep();
      const start = s.clock.now();
      expect(s.daemon.status().checks).toEqual({ intervalSeconds: 20, maxPerSecond: 1, noticeWithinSeconds: 40 });
      await tickFor(s, 3 * MINUTE, 100);
      const times = checksAt(s.emu, start).sort((a, b) => a - b);
      for (let i = 1; i < times.length; i++) expect((times[i] as number) - (times[i - 1] as number)).toBeGreaterThanOrEqual(1_000);
      // Three minutes at one a second, less the first interval spent learning each profile's slot.
      expect(times.length).toBeGreaterThanOrEqual(150);
      expect(times.length).toBeLessThanOrEqual(181);
      // Every profile checked, and found valid.
      expect(s.daemon.status().profiles.map((p) => p.check?.outcome)).toEqual(Array.from({ length: 40 }, () => 'valid'));
    } finally {
      await s.daemon.close();
    }
  }, 120_000);

  it('spreads the checks over the interval instead of checking every profile at once', async () => {
    const s = await setup(30, { checkIntervalMs: 10 * MINUTE, maxChecksPerSecond: 50 });
    try {
      await s.daemon.sweep();
      const start = s.clock.now();
      await tickFor(s, 20 * MINUTE, 1_000);
      const seconds = new Set(checksAt(s.emu, start).map((at) => Math.floor(at / 1_000)));
      const times = checksAt(s.emu, start);
      // Each profile once per interval (two intervals), at most one more for the interval it started in.
      expect(times.length).toBeGreaterThanOrEqual(30);
      expect(times.length).toBeLessThanOrEqual(60);
      // Not in one burst: spread over many distinct seconds.
      expect(seconds.size).toBeGreaterThan(20);
    } finally {
      await s.daemon.close();
    }
  }, 60_000);

  it('a revoked grant: the next check renews at once, meets invalid_grant and parks the profile', async () => {
    const s = await setup(1, { checkIntervalMs: MINUTE });
    try {
      await s.daemon.sweep();
      await tickFor(s, 2 * MINUTE, 1_000);
      expect(s.daemon.status().profiles[0]).toMatchObject({ ready: true, check: { outcome: 'valid' } });
      s.emu.revokeGrant((s.grants.get('p001') as DaemonGrant).refreshToken);
      await tickFor(s, MINUTE + 1_000, 1_000);
      const profile = s.daemon.status().profiles[0];
      expect(profile?.ready).toBe(false);
      expect(profile?.terminal?.reason).toBe('reauthorization_needed');
      expect(profile?.check?.outcome).toBe('invalid');
      expect(s.log.records().map((r) => r.event)).toContain('profile.reauthorization_needed');
      // Parked: nothing more is checked.
      const before = checksAt(s.emu).length;
      await tickFor(s, 3 * MINUTE, 1_000);
      expect(checksAt(s.emu).length).toBe(before);
    } finally {
      await s.daemon.close();
    }
  }, 60_000);

  it('checks go through the Dropbox API transport the daemon is given (the emulator in-process), and a revocation is still found', async () => {
    // The soak's way: the same daemon code down to the transport, the emulator answering within the process.
    let given = 0;
    const to: { emu?: RunningEmulator } = {};
    const dispatcher = {
      request: (request: Parameters<Dispatcher['request']>[0]) => {
        given += 1;
        return (to.emu as RunningEmulator).dispatcher.request(request as never);
      },
    } as unknown as Dispatcher;
    const s = await setup(2, { checkIntervalMs: MINUTE, dropboxApiDispatcher: dispatcher });
    to.emu = s.emu;
    try {
      await s.daemon.sweep();
      await tickFor(s, 2 * MINUTE, 1_000);
      expect(s.daemon.status().profiles.map((p) => p.check?.outcome)).toEqual(['valid', 'valid']);
      // Each check the emulator logged came through the transport given.
      expect(checksAt(s.emu).length).toBeGreaterThanOrEqual(2);
      expect(given).toBe(checksAt(s.emu).length);
      s.emu.revokeGrant((s.grants.get('p001') as DaemonGrant).refreshToken);
      await tickFor(s, MINUTE + 1_000, 1_000);
      expect(s.daemon.status().profiles[0]).toMatchObject({ ready: false, terminal: { reason: 'reauthorization_needed' }, check: { outcome: 'invalid' } });
      expect(given).toBe(checksAt(s.emu).length);
    } finally {
      await s.daemon.close();
    }
  }, 60_000);

  it('missing_scope: one warning, checks off for the profile, said in the status', async () => {
    const app = { ...DEFAULT_APP, scopes: DEFAULT_APP.scopes.filter((scope) => scope !== 'account_info.read') };
    const s = await setup(1, { checkIntervalMs: MINUTE }, app);
    try {
      await s.daemon.sweep();
      await tickFor(s, 5 * MINUTE, 1_000);
      expect(checksAt(s.emu)).toHaveLength(1);
      const warnings = s.log.records().filter((r) => r.event === 'check.off');
      expect(warnings).toHaveLength(1);
      expect(String(warnings[0]?.msg)).toContain('missing_scope');
      const profile = s.daemon.status().profiles[0];
      expect(profile?.ready).toBe(true);
      expect(profile?.check?.off).toMatch(/account_info\.read/);
    } finally {
      await s.daemon.close();
    }
  }, 60_000);

  it('a hung or failing account endpoint: each check ends at its deadline, counted, and nothing else is done', async () => {
    const s = await setup(1, { checkIntervalMs: MINUTE, checkTimeoutMs: 300 });
    try {
      await s.daemon.sweep();
      await tickFor(s, MINUTE, 1_000);
      const tokenRequests = (): number => s.emu.state.requests.filter((r) => r.route === 'token').length;
      const before = tokenRequests();
      s.emu.setFaults([{ route: 'account', latencyMs: 20_000 }]);
      const started = performance.now();
      await tickFor(s, MINUTE, 1_000);
      // One check, cut off at 300 ms; generous bound for a loaded machine.
      expect(performance.now() - started).toBeLessThan(15_000);
      expect(s.daemon.status().profiles[0]).toMatchObject({ ready: true, check: { outcome: 'failed' } });
      s.emu.setFaults([{ route: 'account', status: 503 }]);
      await tickFor(s, MINUTE, 1_000);
      expect(s.daemon.status().profiles[0]).toMatchObject({ ready: true, check: { outcome: 'failed' } });
      // No renewal was started by either.
      expect(tokenRequests()).toBe(before);
    } finally {
      s.emu.setFaults([]);
      await s.daemon.close();
    }
  }, 60_000);

  it("a token of another account than the one recorded is withdrawn and the profile stopped, logged as an error", async () => {
    const s = await setup(1, { checkIntervalMs: MINUTE }, DEFAULT_APP, undefined, { p001: 'dbid:AAsomeone-else' });
    try {
      await s.daemon.sweep();
      expect(existsSync(path.join(s.tokenDir, 'p001.token'))).toBe(true);
      await tickFor(s, 2 * MINUTE, 1_000);
      const profile = s.daemon.status().profiles[0];
      expect(profile).toMatchObject({ ready: false, check: { outcome: 'account_mismatch' }, terminal: { reason: 'configuration_error', code: 'TOKEN_ACCOUNT_MISMATCH' } });
      expect(existsSync(path.join(s.tokenDir, 'p001.token'))).toBe(false);
      const errors = s.log.records().filter((r) => r.event === 'check.account_mismatch');
      expect(errors).toHaveLength(1);
      expect(errors[0]?.level).toBe(50);
    } finally {
      await s.daemon.close();
    }
  }, 60_000);

  it('the flags and the file take 15m, 90s, 0 and off, and refuse the rest by name', () => {
    expect(parseCheckInterval('15m')).toBe(15 * MINUTE);
    expect(parseCheckInterval('90')).toBe(90_000);
    expect(parseCheckInterval('2s')).toBe(2_000);
    expect(parseCheckInterval('0')).toBe(0);
    expect(parseCheckInterval('off')).toBe(0);
    expect(() => parseCheckInterval('fast')).toThrow(/from 1s to 24h/);
    expect(parseChecksPerSecond('0.5')).toBe(0.5);
    expect(() => parseChecksPerSecond('0')).toThrow(/above 0/);
    const config = parseDaemonConfig('version: 1\ndaemon:\n  check_interval: 15m\n  max_checks_per_second: 2\n', '/etc/syncauth.yaml');
    expect(config.daemon).toMatchObject({ check_interval: '15m', max_checks_per_second: 2 });
    expect(() => parseDaemonConfig('version: 1\ndaemon:\n  check_interval: soon\n', '/etc/syncauth.yaml')).toThrow(/daemon\.check_interval/);
  });
});

const redisOk = redisAvailability();
describe.skipIf(redisOk.skip)('token checks with replicas sharing Redis', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedisServer(redisOk);
  });
  afterAll(async () => redis?.stop());

  it('one replica checks each profile per interval, and the other acts on what it found', async () => {
    const clock = fakeClock();
    const grantKey = randomBytes(32);
    const a = await createRedisCoordinator({ url: redis.url, keyPrefix: 'checks', replicaId: 'a', now: clock.now, grantKey });
    const b = await createRedisCoordinator({ url: redis.url, keyPrefix: 'checks', replicaId: 'b', now: clock.now, grantKey });
    await Promise.all([a.ready(), b.ready()]);
    const first = await setup(3, { checkIntervalMs: MINUTE, coordinator: a }, DEFAULT_APP, undefined);
    const second = await setup(3, { checkIntervalMs: MINUTE, coordinator: b }, DEFAULT_APP, { emu: first.emu, clock: first.clock, grants: first.grants });
    try {
      await first.daemon.sweep();
      await second.daemon.sweep();
      const both = async (ms: number): Promise<void> => {
        for (let t = 0; t < ms; t += 1_000) {
          first.clock.advance(1_000);
          await Promise.all([first.daemon.checkTick(), second.daemon.checkTick()]);
        }
      };
      await both(4 * MINUTE);
      // Three profiles, about four intervals (the first spent learning the slots): one check each per interval.
      const checks = checksAt(first.emu, first.clock.now() - 4 * MINUTE);
      expect(checks.length).toBeGreaterThanOrEqual(6);
      expect(checks.length).toBeLessThanOrEqual(12);
      first.emu.revokeGrant((first.grants.get('p001') as DaemonGrant).refreshToken);
      await both(MINUTE + 2_000);
      for (const s of [first, second]) {
        const p = s.daemon.status().profiles.find((x) => x.name === 'p001');
        expect(p?.terminal?.reason).toBe('reauthorization_needed');
      }
      // Exactly one of them met invalid_access_token; the other was told.
      const outcomes = [first, second].map((s) => s.daemon.status().profiles.find((x) => x.name === 'p001')?.check?.outcome).sort();
      expect(outcomes).toEqual(['invalid', 'shared']);
    } finally {
      await first.daemon.close();
      await second.daemon.close();
    }
  }, 120_000);

  it('an invalid outcome planted in Redis without SYNCAUTH_GRANT_KEY makes no replica renew', async () => {
    const grantKey = randomBytes(32);
    const redisLog = captureLog();
    const a = await createRedisCoordinator({ url: redis.url, keyPrefix: 'planted', replicaId: 'a', grantKey, logger: redisLog.logger });
    const b = await createRedisCoordinator({ url: redis.url, keyPrefix: 'planted', replicaId: 'b', grantKey, logger: redisLog.logger });
    await Promise.all([a.ready(), b.ready()]);
    const first = await setup(2, { checkIntervalMs: MINUTE, coordinator: a }, DEFAULT_APP, undefined);
    const second = await setup(2, { checkIntervalMs: MINUTE, coordinator: b }, DEFAULT_APP, { emu: first.emu, clock: first.clock, grants: first.grants });
    const clock = first.clock;
    // Whoever holds Redis's password writes the check records of the coming intervals as a replica would have.
    const raw = new Redis(redis.url);
    try {
      await first.daemon.sweep();
      await second.daemon.sweep();
      const before = tokenRequests(first.emu);
      for (const name of ['p001', 'p002']) {
        const now = checkCycle(clock.now(), checkOffset(name, MINUTE), MINUTE);
        for (let cycle = now; cycle <= now + 5; cycle += 1) {
          await raw.set(`planted:check:${name}:${cycle}`, cycle % 2 === 0 ? 'invalid' : JSON.stringify({ v: 1, state: 'expired', mac: 'AAAA' }), 'PX', 10 * MINUTE);
        }
      }
      for (let t = 0; t < 4 * MINUTE; t += 1_000) {
        clock.advance(1_000);
        await Promise.all([first.daemon.checkTick(), second.daemon.checkTick()]);
      }
      // The replicas checked for themselves (the tokens are good), and nobody renewed.
      expect(tokenRequests(first.emu)).toBe(before);
      expect(checksAt(first.emu, clock.now() - 4 * MINUTE).length).toBeGreaterThanOrEqual(4);
      for (const s of [first, second]) {
        for (const p of s.daemon.status().profiles) expect(p.check?.outcome).toBe('valid');
        expect(s.log.records().filter((r) => r.event === 'token.refused')).toEqual([]);
      }
      // Each planted record met is told once at warn (by each replica), not at every tick: at most 12 records × 2 replicas.
      const refused = redisLog.records().filter((r) => r.event === 'check.record_refused');
      expect(refused.length).toBeGreaterThan(0);
      expect(refused.length).toBeLessThanOrEqual(24);
      expect(refused.every((r) => r.level === 'warn' || r.level === 40)).toBe(true);
    } finally {
      raw.disconnect();
      await first.daemon.close();
      await second.daemon.close();
    }
  }, 120_000);

  it('a replica without SYNCAUTH_GRANT_KEY shares no token checks through Redis', async () => {
    const keyless = await createRedisCoordinator({ url: redis.url, keyPrefix: 'keyless', replicaId: 'k' });
    try {
      await keyless.ready();
      expect(keyless.claimCheck).toBeUndefined();
      expect(keyless.recordCheck).toBeUndefined();
      expect(keyless.peekCheck).toBeUndefined();
    } finally {
      await keyless.close();
    }
  });
});
