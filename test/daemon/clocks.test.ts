// Two clocks, and neither alone is the truth. The emulator keeps the provider's time; the daemon reads a wall
// clock that NTP may step back or a resume may throw forward, and a monotonic clock that stops while the host
// sleeps. Through both, the published token is never expired and renewals keep their pace.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { scheduleSweeps, type ClockJump } from '../../src/daemon/cron.js';
import type { World } from './helpers.js';
import { captureLog, drive, renewalsOf, startWorld, tempDir } from './helpers.js';

const LIFETIME_S = 20;
const MARGIN_MS = 5_000;

interface Skewed {
  world: World;
  tokenFile: string;
  /** Moves the daemon's wall clock away from the provider's time. */
  stepWall(ms: number): void;
  /** Time passes for the provider and the wall clock, but not for the monotonic clock (a suspended host). */
  suspend(ms: number): void;
}

async function skewedWorld(): Promise<Skewed> {
  const tokenFile = path.join(tempDir(), 'token');
  let wallOffset = 0;
  let monoLag = 0;
  // The world's clock is the provider's; the daemon gets its own readings of it.
  let truth: () => number = () => 0;
  const world = await startWorld({
    profiles: 1,
    lifetimeSeconds: LIFETIME_S,
    daemon: { tokenFile, renewMarginMs: MARGIN_MS, now: () => truth() + wallOffset, monotonicNow: () => truth() - monoLag },
  });
  truth = world.clock.now;
  return {
    world,
    tokenFile,
    stepWall: (ms) => {
      wallOffset += ms;
    },
    suspend: (ms) => {
      world.clock.advance(ms);
      monoLag += ms;
    },
  };
}

/** After each sweep: the file holds a token the provider says is live. */
function liveFileCheck(s: Skewed): { misses: () => number; check: () => void } {
  let misses = 0;
  return {
    misses: () => misses,
    check: () => {
      const token = existsSync(s.tokenFile) ? readFileSync(s.tokenFile, 'utf8') : undefined;
      const issued = token ? s.world.emu.state.accessTokens.get(token) : undefined;
      if (!issued || issued.expiresAt <= s.world.clock.now()) misses += 1;
    },
  };
}

describe('time', () => {
  it('keeps renewing on pace after the wall clock steps back an hour', async () => {
    const s = await skewedWorld();
    await s.world.daemon.sweep();
    s.stepWall(-3_600_000);
    const { misses, check } = liveFileCheck(s);
    await drive(s.world, 300, 1_000, check);
    expect(misses()).toBe(0);
    // One every lifetime less the margin (and some jitter): 300 s / 15 s = 20, plus the first.
    const renewals = renewalsOf(s.world.emu, s.world.grants.get('p1')!.refreshToken);
    expect(renewals).toBeGreaterThanOrEqual(20);
    expect(renewals).toBeLessThanOrEqual(26);
    expect(s.world.daemon.status().ready).toBe(true);
  });

  it('takes a forward jump of the wall clock as time that passed: the expired token leaves at once', async () => {
    const s = await skewedWorld();
    await s.world.daemon.sweep();
    expect(existsSync(s.tokenFile)).toBe(true);
    // The host slept through the token's life: the provider's time and the wall clock moved on, the timers did not.
    s.suspend(LIFETIME_S * 1000 * 3);
    expect(s.world.daemon.status()).toMatchObject({ ready: false });
    const report = await s.world.daemon.sweep();
    expect(report.profiles[0]).toMatchObject({ action: 'renewal', renewal: 'renewed' });
    const { misses, check } = liveFileCheck(s);
    check();
    expect(misses()).toBe(0);
    expect(s.world.daemon.status().ready).toBe(true);
  });

  it('judges a token by the monotonic clock when the wall clock says it has hours left', async () => {
    const s = await skewedWorld();
    await s.world.daemon.sweep();
    s.stepWall(-3_600_000);
    // Past the real expiry with no sweep: the status must not call a dead token ready.
    s.world.clock.advance(LIFETIME_S * 1000 + 1);
    const status = s.world.daemon.status();
    expect(status.ready).toBe(false);
    expect(status.profiles[0]?.holdsToken).toBe(false);
  });

  it('waits a long Retry-After only until shortly before the token expires, and says so', async () => {
    const s = await skewedWorld();
    await s.world.daemon.sweep();
    s.world.emu.setFaults([{ route: 'token', status: 429, retryAfterSeconds: 3_600 }]);
    // Into the margin: the renewal meets the 429.
    s.world.clock.advance((LIFETIME_S * 1000) - MARGIN_MS);
    await s.world.daemon.sweep();
    const status = s.world.daemon.status().profiles[0]!;
    const expiresAt = Date.parse(status.expiresAt!);
    const retryAt = Date.parse(status.backoffUntil!);
    expect(retryAt).toBeLessThan(expiresAt);
    expect(expiresAt - retryAt).toBeGreaterThanOrEqual(MARGIN_MS / 2 - 1);
    expect(s.world.log.records().some((r) => String(r.msg).includes('asked to wait 3600 s'))).toBe(true);
    s.world.emu.setFaults([]);
    const { misses, check } = liveFileCheck(s);
    await drive(s.world, 60, 500, check);
    expect(misses()).toBe(0);
  });
});

describe('the schedule across clock jumps', () => {
  it('re-arms and reports a jump once, whichever clock moved', async () => {
    let wall = Date.now();
    let mono = 0;
    const jumps: ClockJump[] = [];
    const log = captureLog('debug');
    const schedule = scheduleSweeps('0 0 1 1 *', () => Promise.resolve(), log.logger, {
      clock: { wall: () => wall, mono: () => mono },
      onJump: (jump) => jumps.push(jump),
      heartbeatMs: 20,
      toleranceMs: 1_000,
    });
    const tick = async (wallMs: number, monoMs: number): Promise<void> => {
      wall += wallMs;
      mono += monoMs;
      await new Promise((resolve) => setTimeout(resolve, 60));
    };
    try {
      await tick(20, 20);
      expect(jumps).toHaveLength(0);
      await tick(3_600_000, 20); // a resume: the wall clock ran on while the timers slept
      expect(jumps).toHaveLength(1);
      expect(jumps[0]!.wallStepMs).toBeGreaterThan(3_500_000);
      await tick(20, 20);
      await tick(-3_600_000, 20); // NTP steps the wall clock back
      expect(jumps).toHaveLength(2);
      expect(jumps[1]!.wallStepMs).toBeLessThan(-3_500_000);
      await tick(120_000, 120_000); // the process itself was stopped (SIGSTOP): both clocks moved
      expect(jumps).toHaveLength(3);
      expect(jumps[2]!.pausedMs).toBeGreaterThan(100_000);
      await tick(20, 20);
      expect(jumps).toHaveLength(3);
    } finally {
      await schedule.stop();
    }
    // node-cron says nothing per missed tick.
    expect(log.lines.filter((l) => l.includes('missed execution'))).toHaveLength(0);
  });
});
