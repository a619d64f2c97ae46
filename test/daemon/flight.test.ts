// One renewal per profile at a time (in the process, and across processes through the lock and a re-read of
// the state), bounded concurrency across profiles, the cap on renewals per second, and jitter.
import diagnostics from 'node:diagnostics_channel';
import { describe, expect, it } from 'vitest';
import { startDaemon } from '../../src/daemon/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { captureLog, drive, profileOf, renewalsOf, startWorld, tokenRequests, tokensOf } from './helpers.js';

function tokenArrivals(world: Awaited<ReturnType<typeof startWorld>>, since: number): number[] {
  return world.emu.state.requests.filter((r) => r.route === 'token' && r.at >= since).map((r) => r.at).sort((a, b) => a - b);
}

describe('single flight', () => {
  it('three concurrent sweeps renew each profile once', async () => {
    const world = await startWorld({ profiles: 2, reconcile: true });
    const before = tokenRequests(world.emu);
    const reports = await Promise.all([world.daemon.sweep(), world.daemon.sweep(), world.daemon.sweep()]);
    expect(tokenRequests(world.emu) - before).toBe(2);
    for (const name of ['p1', 'p2']) {
      const actions = reports.map((r) => r.profiles.find((p) => p.profile === name)?.action).sort();
      expect(actions).toEqual(['in_flight', 'in_flight', 'renewal']);
    }
  });

  it('a second process sharing the config dir re-reads the state under the lock and does not renew again', async () => {
    const world = await startWorld({ profiles: ['shared'] });
    const grant = world.grants.get('shared');
    if (!grant) throw new Error('grant missing');
    // Another process: its own store handle on the same directory, its own memory.
    const other = await startDaemon({
      profiles: [profileOf(world.emu, { name: 'shared', grant })],
      profileStore: openProfileStore(world.configDir),
      renewMarginMs: 5_000,
      schedule: false,
      logger: captureLog().logger,
      now: world.clock.now,
    });
    try {
      const before = tokenRequests(world.emu);
      const [a, b] = await Promise.all([world.daemon.sweep(), other.sweep()]);
      const outcomes = [a.profiles[0]?.renewal, b.profiles[0]?.renewal].sort();
      expect(outcomes).toEqual(['fresh', 'renewed']);
      expect(tokenRequests(world.emu) - before).toBe(1);
      // Both know the new expiry, so neither renews again until it is due.
      for (let i = 0; i < 10; i++) {
        world.clock.advance(1000);
        await Promise.all([world.daemon.sweep(), other.sweep()]);
      }
      expect(tokenRequests(world.emu) - before).toBe(1);
      world.clock.advance(5_000);
      await Promise.all([world.daemon.sweep(), other.sweep()]);
      expect(tokenRequests(world.emu) - before).toBe(2);
    } finally {
      await other.close();
    }
  });
});

describe('limits across profiles', () => {
  it('runs at most `concurrency` renewals at once', async () => {
    const world = await startWorld({ profiles: 6, realClock: true, daemon: { concurrency: 2 } });
    world.emu.setFaults([{ route: 'token', latencyMs: 150 }]);
    const start = Date.now();
    const report = await world.daemon.sweep();
    expect(report.profiles.every((p) => p.renewal === 'renewed')).toBe(true);
    const arrivals = tokenArrivals(world, start);
    expect(arrivals).toHaveLength(6);
    // A third request can only start once one of the two before it was answered (150 ms later).
    for (let i = 2; i < arrivals.length; i++) expect((arrivals[i] as number) - (arrivals[i - 2] as number)).toBeGreaterThanOrEqual(140);
    expect(Date.now() - start).toBeGreaterThanOrEqual(3 * 150);
  });

  it('spaces token requests by the cap on renewals per second', async () => {
    const world = await startWorld({ profiles: 6, realClock: true, daemon: { concurrency: 6, maxRenewalsPerSecond: 10 } });
    // Timed where the daemon sends them (Node's http announces each request it starts): the emulator shares this
    // process, and on a busy machine one request's arrival can be held back until the next is in, whatever the
    // gate did. A request starts at the earliest when the gate's timer fires, so its spacing is the gate's.
    const sent: number[] = [];
    const onStart = (message: unknown): void => {
      const { request } = message as { request: { path: string } };
      if (request.path.startsWith(new URL(world.emu.tokenUrl).pathname)) sent.push(performance.now());
    };
    diagnostics.subscribe('http.client.request.start', onStart);
    const start = performance.now();
    try {
      await world.daemon.sweep();
    } finally {
      diagnostics.unsubscribe('http.client.request.start', onStart);
    }
    expect(sent).toHaveLength(6);
    // The gate gives the k-th request the slot k × 100 ms after the first, never sooner: a late request does not
    // push the slots after it back, so what holds whatever the machine's load is that the k-th of them starts
    // no sooner than k × 100 ms after the sweep began (less the clock's whole millisecond and a timer that fires
    // a millisecond early). Without the gate all six start within a few milliseconds.
    sent.sort((a, b) => a - b);
    for (let k = 1; k < sent.length; k++) expect((sent[k] as number) - start).toBeGreaterThanOrEqual(k * 100 - 3);
  });

  it('jitter spreads profiles renewed together over different sweeps', async () => {
    const world = await startWorld({ profiles: 5, daemon: { jitterMs: 4_000 } });
    await drive(world, 40, 1000);
    const secondRenewal = [...world.grants.values()].map((g) => tokensOf(world.emu, g.refreshToken)[2]?.issuedAt);
    expect(secondRenewal.every((t) => t !== undefined)).toBe(true);
    expect(new Set(secondRenewal).size).toBeGreaterThan(1);
    for (const grant of world.grants.values()) expect(renewalsOf(world.emu, grant.refreshToken)).toBeGreaterThanOrEqual(3);
  });
});
