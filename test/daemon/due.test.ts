// When a sweep's visit of a profile next has work to do (src/daemon/due.ts), and the daemon's nextDueAt() and
// heartbeat() for a caller that drives the sweeps itself: a sweep before the time given finds nothing to do, and
// one at it renews, as the soak relies on when it skips sweeps.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Backoff } from '../../src/backoff.js';
import { startDaemon, type DaemonOptions } from '../../src/daemon/index.js';
import { visitDueAt, type VisitDueRule } from '../../src/daemon/due.js';
import { ProfileRuntime, type ServedProfile } from '../../src/daemon/runtime.js';
import { openProfileStore } from '../../src/profile/index.js';
import { captureLog, emulator, fakeClock, obtainGrant, profileOf, seededRandom, tempDir, tokenRequests } from './helpers.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const MARGIN = 15 * MINUTE;

function runtime(options: { reconcile?: boolean } = {}) {
  let wall = Date.parse('2030-01-01T00:00:00Z');
  let mono = 1_000;
  const rt = new ProfileRuntime('p1', { wall: () => wall, mono: () => mono });
  rt.config = (options.reconcile ? { reconcile: {} } : {}) as unknown as ServedProfile;
  const hold = (lifeMs: number, jitterMs: number): void => {
    rt.token = { value: 'token', expiresAt: wall + lifeMs, monoExpiresAt: mono + lifeMs };
    rt.learnExpiry(wall + lifeMs, jitterMs, mono + lifeMs);
  };
  const advance = (ms: number): void => {
    wall += ms;
    mono += ms;
  };
  return { rt, hold, advance, wall: () => wall, mono: () => mono };
}

const RULE: VisitDueRule = { marginMs: MARGIN, needsOwnToken: false, publishes: false, busy: false };

describe('visitDueAt', () => {
  it('a held token: due at its expiry less the margin and this cycle\'s jitter, and at once from then on', () => {
    const { rt, hold, advance, wall } = runtime();
    hold(4 * HOUR, 2 * MINUTE);
    const renewAt = wall() + 4 * HOUR - MARGIN - 2 * MINUTE;
    expect(visitDueAt(rt, RULE, wall())).toBe(renewAt);
    expect(rt.renewalDue(renewAt - 1, MARGIN, false)).toBe(false);
    expect(rt.renewalDue(renewAt, MARGIN, false)).toBe(true);
    advance(renewAt - wall() + 30_000);
    expect(visitDueAt(rt, RULE, wall())).toBe(wall());
  });

  it('a backoff or Retry-After holds the renewal until it ends', () => {
    const { rt, hold, wall, mono } = runtime();
    hold(20 * MINUTE, 0);
    rt.backoff = Backoff.none.waitUntil(mono() + 10 * MINUTE);
    expect(visitDueAt(rt, RULE, wall())).toBe(wall() + 10 * MINUTE);
    // A backoff that outlasts the token: the token's expiry (the sweep drops it) comes first.
    rt.backoff = Backoff.none.waitUntil(mono() + 30 * MINUTE);
    expect(visitDueAt(rt, RULE, wall())).toBe(wall() + 20 * MINUTE);
  });

  it('a reconcile owed is due after its retry wait; a shared record is looked at when its time comes', () => {
    const { rt, hold, wall, mono } = runtime({ reconcile: true });
    hold(4 * HOUR, 0);
    rt.oweReconcile();
    expect(visitDueAt(rt, RULE, wall())).toBe(wall());
    rt.reconcile = { ...rt.reconcile, backoff: Backoff.none.waitUntil(mono() + 5_000) };
    expect(visitDueAt(rt, RULE, wall())).toBe(wall() + 5_000);
    rt.reconcile = { ...rt.reconcile, pending: false };
    rt.watchSharedAt = mono() + HOUR;
    expect(visitDueAt(rt, RULE, wall())).toBe(wall() + HOUR);
  });

  it('what it cannot place in time is due at once', () => {
    const { rt, hold, wall } = runtime();
    hold(4 * HOUR, 0);
    const later = visitDueAt(rt, RULE, wall());
    expect(later).toBeGreaterThan(wall());
    expect(visitDueAt(rt, { ...RULE, publishes: true }, wall())).toBe(wall());
    expect(visitDueAt(rt, { ...RULE, busy: true }, wall())).toBe(wall());
    rt.renewSoon = 'a new grant';
    expect(visitDueAt(rt, RULE, wall())).toBe(wall());
    rt.renewSoon = undefined;
    rt.parked = { reason: 'reauthorization_needed', code: 'OAUTH_INVALID_GRANT', message: 'revoked', until: 'secrets', secretsVersion: undefined };
    expect(visitDueAt(rt, RULE, wall())).toBe(wall());
    rt.parked = undefined;
    rt.token = undefined;
    rt.knownExpiresAt = undefined;
    expect(visitDueAt(rt, RULE, wall())).toBe(wall());
  });
});

/** `count` profiles (p1, p2, …) with four-hour tokens on the emulator, in a daemon whose sweeps the test drives on a hand-moved clock. */
async function drivenDaemon(extra: Partial<DaemonOptions> = {}, count = 1) {
  const clock = fakeClock();
  const emu = await emulator({ tokenLifetimeSeconds: 4 * 3600, now: clock.now });
  const names = Array.from({ length: count }, (_, i) => `p${i + 1}`);
  const grants = await Promise.all(names.map(() => obtainGrant(emu)));
  const exchanged = tokenRequests(emu);
  const daemon = await startDaemon({
    profiles: names.map((name, i) => profileOf(emu, { name, grant: grants[i]!, reconcile: true })),
    profileStore: openProfileStore(tempDir()),
    renewMarginMs: MARGIN,
    schedule: false,
    checkTickMs: false,
    logger: captureLog().logger,
    now: clock.now,
    random: seededRandom(),
    sleep: clock.sleep,
    ...extra,
  });
  return { clock, emu, exchanged, daemon, names };
}

describe('a daemon driven by its caller', () => {
  it('nextDueAt() is the renewal time: a sweep before it asks nothing, one at it renews', async () => {
    const { clock, emu, exchanged, daemon } = await drivenDaemon({ tokenFile: path.join(tempDir(), '{profile}.token') });
    try {
      // Nothing held yet: due now.
      expect(daemon.nextDueAt()).toBe(clock.now());
      await daemon.sweep();
      expect(tokenRequests(emu) - exchanged).toBe(1);
      // A daemon that publishes a token file looks at it at every sweep.
      expect(daemon.nextDueAt()).toBe(clock.now());
    } finally {
      await daemon.close();
    }
  });

  it('without a file to look at, the sweeps before the time given renew nothing, and the one at it renews', async () => {
    const { clock, emu, exchanged, daemon } = await drivenDaemon();
    try {
      await daemon.sweep();
      await daemon.sweep();
      expect(tokenRequests(emu) - exchanged).toBe(1);
      const due = daemon.nextDueAt();
      const expiry = Date.parse(daemon.status().profiles[0]?.expiresAt ?? '');
      expect(due).toBeGreaterThan(clock.now());
      expect(due).toBeLessThanOrEqual(expiry - MARGIN);
      // Every minute up to it: the sweep finds nothing due.
      while (clock.now() + MINUTE < due) {
        clock.advance(MINUTE);
        const report = await daemon.sweep();
        expect(report.profiles.map((p) => p.action)).toEqual(['idle']);
        expect(daemon.nextDueAt()).toBe(due);
      }
      expect(tokenRequests(emu) - exchanged).toBe(1);
      clock.advance(due - clock.now());
      expect(daemon.nextDueAt()).toBe(clock.now());
      const report = await daemon.sweep();
      expect(report.profiles[0]).toMatchObject({ action: 'renewal', renewal: 'renewed' });
      expect(tokenRequests(emu) - exchanged).toBe(2);
    } finally {
      await daemon.close();
    }
  }, 60_000);

  it('a sweep of the due alone visits only the profiles whose time has come, and reports the others idle', async () => {
    // Every visit reads the profile's state (to see what other processes wrote): the reads tell the visits.
    const store = openProfileStore(tempDir());
    const reads = new Map<string, number>();
    const counted = new Proxy(store, {
      get(target, prop) {
        if (prop === 'read') {
          return (name: string) => {
            reads.set(name, (reads.get(name) ?? 0) + 1);
            return target.read(name);
          };
        }
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    const { clock, emu, daemon, names } = await drivenDaemon({ profileStore: counted }, 3);
    try {
      await daemon.sweep();
      const exchanged = tokenRequests(emu);
      clock.advance(daemon.nextDueAt() - clock.now());
      reads.clear();
      const report = await daemon.sweep({ onlyDue: true });
      expect(report.profiles.map((p) => p.profile).sort()).toEqual(names);
      const renewed = report.profiles.filter((p) => p.action === 'renewal').map((p) => p.profile);
      expect(renewed.length).toBeGreaterThanOrEqual(1);
      expect(report.profiles.filter((p) => p.action !== 'renewal').every((p) => p.action === 'idle')).toBe(true);
      expect([...reads.keys()].sort()).toEqual([...renewed].sort());
      expect(tokenRequests(emu) - exchanged).toBe(renewed.length);
      // A sweep of every profile, at the same time: the others are visited, and find nothing to do.
      reads.clear();
      const whole = await daemon.sweep();
      expect([...reads.keys()].sort()).toEqual(names);
      expect(whole.profiles.map((p) => p.action)).toEqual(['idle', 'idle', 'idle']);
      expect(tokenRequests(emu) - exchanged).toBe(renewed.length);
    } finally {
      await daemon.close();
    }
  }, 60_000);
});
