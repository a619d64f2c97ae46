// A renewal that failed waits its backoff on the monotonic clock. With the wall clock, a failure just before
// NTP (or libfaketime, or a person) set the clock back an hour made a one-second wait last an hour, and the
// token died meanwhile: the real-process soak saw a replica ask nothing for the rest of its run after its clock
// was set back (soak/real.mjs, seed 2).
import { describe, expect, it } from 'vitest';
import { startWorld } from '../daemon/helpers.js';

describe('backoff after a wall-clock step back', () => {
  it('retries a failed renewal after its delay, not after the hour the clock went back', async () => {
    let offset = 0;
    let mono = 0;
    const world = await startWorld({
      profiles: 1,
      lifetimeSeconds: 60,
      daemon: { now: () => world.clock.now() + offset, monotonicNow: () => mono, backoff: { baseMs: 1_000, maxMs: 1_000 } },
    });
    const step = async (ms: number): Promise<void> => {
      world.clock.advance(ms);
      mono += ms;
      await world.daemon.sweep();
    };
    await world.daemon.sweep();
    expect(world.daemon.status().profiles[0]?.holdsToken).toBe(true);
    // Inside the margin, the token endpoint fails once: the next try is due a second later.
    world.emu.setFaults([{ route: 'token', status: 503, times: 1 }]);
    await step(56_000);
    expect(world.daemon.status().profiles[0]?.lastRenewal?.outcome).toBe('failed');
    // The wall clock is set back an hour; two seconds later the renewal must have been tried again.
    offset = -3_600_000;
    await step(2_000);
    const profile = world.daemon.status().profiles[0];
    expect(profile?.lastRenewal?.outcome).toBe('renewed');
    expect(profile?.holdsToken).toBe(true);
    expect(profile?.backoffUntil).toBeUndefined();
  });
});
