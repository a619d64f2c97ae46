// The token endpoint's budget on /metrics, as Prometheus scrapes it (over HTTP): token requests by outcome, the
// cap on token requests and the renewals that wait for it, the account pauses a 429 starts (here, and from a
// record another replica wrote), the profiles they hold, and the renewals spread over the window. Daemons on the
// emulator with a hand-moved clock; the series carry no profile or account label.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { startDaemon } from '../../src/daemon/index.js';
import type { DaemonGrant, DaemonOptions, RunningDaemon } from '../../src/daemon/index.js';
import { CoordinatorUnavailableError } from '../../src/daemon/coordinator.js';
import { openProfileStore } from '../../src/profile/index.js';
import type { RunningEmulator } from '../../src/emulator/index.js';
import { memoryCoordinator, type MemoryRedis } from '../helpers/replicas.mjs';
import { captureLog, emulator, fakeClock, obtainGrant, profileOf, seededRandom, tempDir } from './helpers.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const ACCOUNT = 'dbid:budget-account';

/** The syncauth samples of a scrape of /metrics over HTTP, by series as written (`name{labels}`). */
async function scrape(daemon: RunningDaemon): Promise<Record<string, number>> {
  const response = await fetch(`${daemon.url as string}/metrics`);
  expect(response.status).toBe(200);
  const out: Record<string, number> = {};
  for (const line of (await response.text()).split('\n')) {
    const match = /^(syncauth_[a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (match) out[match[1] as string] = Number(match[2]);
  }
  return out;
}

const tokenRequests = (route: string, emu: RunningEmulator): number => emu.state.requests.filter((r) => r.route === route).length;

/** Daemons serving the same profiles of one Dropbox account on one emulator and clock. */
async function world(count: number) {
  const clock = fakeClock();
  const emu = await emulator({ tokenLifetimeSeconds: 4 * 3600, now: clock.now });
  const names = Array.from({ length: count }, (_, i) => `b${i}`);
  const grants = new Map<string, DaemonGrant>();
  for (const name of names) grants.set(name, await obtainGrant(emu));
  const daemons: RunningDaemon[] = [];
  const start = async (options: Partial<DaemonOptions> = {}): Promise<RunningDaemon> => {
    const profileStore = openProfileStore(tempDir());
    // The account the profiles' state records (as setup records it): a pause covers all of them.
    for (const name of names) await profileStore.update(name, () => ({ accountId: ACCOUNT }));
    const daemon = await startDaemon({
      profiles: () => Promise.resolve(names.map((name) => profileOf(emu, { name, grant: grants.get(name) as DaemonGrant }))),
      profileStore,
      renewMarginMs: 15 * MINUTE,
      schedule: false,
      checkIntervalMs: 0,
      logger: captureLog('info').logger,
      now: clock.now,
      sleep: clock.sleep,
      random: seededRandom(),
      // One renewal at a time: a request already on its way when the 429 arrives is not what is tested.
      concurrency: 1,
      listen: { host: '127.0.0.1', port: 0 },
      ...options,
    });
    daemons.push(daemon);
    return daemon;
  };
  const close = async (): Promise<void> => {
    for (const daemon of daemons) await daemon.close();
  };
  return { clock, emu, names, grants, start, close };
}

describe('the token-endpoint budget on /metrics', () => {
  it('a 429 with Retry-After: the pause gauge, the pauses begun here, the profiles held and the rate_limited request move, and go back once it ends', async () => {
    const w = await world(3);
    try {
      const daemon = await w.start();
      await daemon.sweep();
      const first = await scrape(daemon);
      expect(first).toMatchObject({
        'syncauth_token_requests_total{outcome="ok"}': 3,
        'syncauth_token_requests_total{outcome="rate_limited"}': 0,
        'syncauth_token_requests_total{outcome="failed"}': 0,
        syncauth_accounts_paused: 0,
        syncauth_profiles_paused: 0,
        'syncauth_account_pauses_total{source="here"}': 0,
        'syncauth_account_pauses_total{source="fleet"}': 0,
        syncauth_renewals_spread_total: 0,
      });
      // No cap without --fleet or --max-renewals-per-second: no series of one.
      expect(Object.keys(first).filter((k) => k.startsWith('syncauth_token_requests_per_second_limit') || k.startsWith('syncauth_token_requests_delay'))).toEqual([]);
      // No profile or account names a budget series.
      for (const key of Object.keys(first).filter((k) => /requests|paused|pauses|spread/.test(k))) expect(key).not.toMatch(/profile=|account=/);

      // The next renewal meets a 429 asking for 10 minutes: the account pauses, with its three profiles.
      w.emu.setFaults([{ route: 'token', status: 429, retryAfterSeconds: 600, times: 1 }]);
      const before = tokenRequests('token', w.emu);
      for (let minute = 0; minute < 4 * 60 && tokenRequests('token', w.emu) === before; minute += 1) {
        w.clock.advance(MINUTE);
        await daemon.sweep();
      }
      await daemon.sweep();
      expect(tokenRequests('token', w.emu)).toBe(before + 1);
      const paused = await scrape(daemon);
      expect(paused).toMatchObject({
        'syncauth_token_requests_total{outcome="ok"}': 3,
        'syncauth_token_requests_total{outcome="rate_limited"}': 1,
        syncauth_accounts_paused: 1,
        syncauth_profiles_paused: 3,
        'syncauth_account_pauses_total{source="here"}': 1,
        'syncauth_account_pauses_total{source="fleet"}': 0,
      });

      // Past the pause and the minute its resumes are spread over: nothing paused, every profile renewed.
      for (let minute = 0; minute < 12; minute += 1) {
        w.clock.advance(MINUTE);
        await daemon.sweep();
      }
      const after = await scrape(daemon);
      expect(after).toMatchObject({
        'syncauth_token_requests_total{outcome="ok"}': 6,
        'syncauth_token_requests_total{outcome="rate_limited"}': 1,
        syncauth_accounts_paused: 0,
        syncauth_profiles_paused: 0,
        'syncauth_account_pauses_total{source="here"}': 1,
      });
    } finally {
      await w.close();
    }
  }, 60_000);

  it("a pause another replica recorded counts as begun from the fleet, and holds this replica's profiles", async () => {
    const w = await world(2);
    const redis: MemoryRedis = { now: w.clock.now, leases: new Map(), records: new Map() };
    const grantKey = randomBytes(32);
    try {
      const [a, b] = [
        await w.start({ coordinator: memoryCoordinator(redis, 'a', CoordinatorUnavailableError, w.clock.now), grantKey }),
        await w.start({ coordinator: memoryCoordinator(redis, 'b', CoordinatorUnavailableError, w.clock.now), grantKey }),
      ] as [RunningDaemon, RunningDaemon];
      await a.sweep();
      await b.sweep();
      // Into the margin: a's first renewal meets the 429; b then reads the pause a recorded and sends nothing.
      w.clock.advance(4 * HOUR - 10 * MINUTE);
      w.emu.setFaults([{ route: 'token', status: 429, retryAfterSeconds: 600, times: 1 }]);
      const before = tokenRequests('token', w.emu);
      await a.sweep();
      await b.sweep();
      expect(tokenRequests('token', w.emu)).toBe(before + 1);
      expect(await scrape(a)).toMatchObject({
        'syncauth_account_pauses_total{source="here"}': 1,
        'syncauth_account_pauses_total{source="fleet"}': 0,
        'syncauth_token_requests_total{outcome="rate_limited"}': 1,
        syncauth_accounts_paused: 1,
      });
      expect(await scrape(b)).toMatchObject({
        'syncauth_account_pauses_total{source="here"}': 0,
        'syncauth_account_pauses_total{source="fleet"}': 1,
        'syncauth_token_requests_total{outcome="rate_limited"}': 0,
        syncauth_accounts_paused: 1,
        syncauth_profiles_paused: 2,
      });
    } finally {
      await w.close();
    }
  }, 60_000);

  it('a cap low enough that renewals wait: the cap, the renewals delayed and the seconds they waited, and those waiting during the wait', async () => {
    const w = await world(5);
    // The cap's waits are held until the test lets them go, each moving the clock by its length.
    const held: (() => void)[] = [];
    const sleep = (ms: number): Promise<void> =>
      new Promise((resolve) => {
        held.push(() => {
          w.clock.advance(ms);
          resolve();
        });
      });
    try {
      const daemon = await w.start({ maxRenewalsPerSecond: 1, sleep });
      const empty = await scrape(daemon);
      expect(empty).toMatchObject({
        syncauth_token_requests_per_second_limit: 1,
        syncauth_token_requests_delayed_total: 0,
        syncauth_token_requests_delay_seconds_total: 0,
        syncauth_token_requests_waiting: 0,
      });
      let done = false;
      const sweep = daemon.sweep().finally(() => {
        done = true;
      });
      // The first renewal goes at once; the second waits a second for its slot.
      await expect.poll(() => held.length).toBe(1);
      expect(await scrape(daemon)).toMatchObject({
        'syncauth_token_requests_total{outcome="ok"}': 1,
        syncauth_token_requests_delayed_total: 1,
        syncauth_token_requests_delay_seconds_total: 1,
        syncauth_token_requests_waiting: 1,
      });
      while (!done) {
        held.shift()?.();
        await new Promise((resolve) => setImmediate(resolve));
      }
      await sweep;
      // Five renewals a second apart: four waited a second each.
      expect(await scrape(daemon)).toMatchObject({
        'syncauth_token_requests_total{outcome="ok"}': 5,
        syncauth_token_requests_per_second_limit: 1,
        syncauth_token_requests_delayed_total: 4,
        syncauth_token_requests_delay_seconds_total: 4,
        syncauth_token_requests_waiting: 0,
      });
    } finally {
      await w.close();
    }
  }, 60_000);

  it('spreading: the renewals drawn over the window and the token life given up, after a start and after a failure; a 5xx counts as failed', async () => {
    const w = await world(1);
    try {
      const daemon = await w.start({ spreadRenewals: true });
      await daemon.sweep();
      // Every first token after a start is spread over its window, earlier than the usual jitter would put it.
      const started = await scrape(daemon);
      expect(started).toMatchObject({ 'syncauth_token_requests_total{outcome="ok"}': 1, syncauth_renewals_spread_total: 1 });
      expect(started.syncauth_renewals_spread_early_seconds_total).toBeGreaterThan(0);
      // Its next renewal meets a 503, and is retried: the token the retry brings is spread too.
      w.emu.setFaults([{ route: 'token', status: 503, times: 1 }]);
      const before = tokenRequests('token', w.emu);
      for (let minute = 0; minute < 5 * 60 && tokenRequests('token', w.emu) < before + 2; minute += 1) {
        w.clock.advance(MINUTE);
        await daemon.sweep();
      }
      const after = await scrape(daemon);
      expect(after).toMatchObject({
        'syncauth_token_requests_total{outcome="ok"}': 2,
        'syncauth_token_requests_total{outcome="failed"}': 1,
        'syncauth_token_requests_total{outcome="rate_limited"}': 0,
        syncauth_renewals_spread_total: 2,
      });
      expect(after.syncauth_renewals_spread_early_seconds_total).toBeGreaterThan(started.syncauth_renewals_spread_early_seconds_total as number);
    } finally {
      await w.close();
    }
  }, 60_000);

  it('a refused grant counts as reauthorization_needed', async () => {
    const w = await world(1);
    try {
      const daemon = await w.start();
      await daemon.sweep();
      w.emu.revokeGrant((w.grants.get('b0') as DaemonGrant).refreshToken);
      w.clock.advance(4 * HOUR - 10 * MINUTE);
      await daemon.sweep();
      expect(await scrape(daemon)).toMatchObject({
        'syncauth_token_requests_total{outcome="ok"}': 1,
        'syncauth_token_requests_total{outcome="reauthorization_needed"}': 1,
      });
    } finally {
      await w.close();
    }
  }, 60_000);
});
