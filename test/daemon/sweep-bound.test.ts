// A sweep visits a few profiles at a time, as many as renew at once (--concurrency), in order: ten thousand
// visits started together held ten thousand waits on the heap of a 10,000-profile daemon. Each profile is still
// visited once per sweep, and the report keeps the profiles' order.
import { describe, expect, it } from 'vitest';
import { startDaemon, type ProfileEntry } from '../../src/daemon/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { captureLog, tempDir } from './helpers.js';

const PROFILES = 60;
const CONCURRENCY = 4;

describe('a sweep over many profiles', () => {
  it(`has at most --concurrency profiles in flight, visits every one once, and reports them in order`, async () => {
    const names = Array.from({ length: PROFILES }, (_, i) => `p${String(i).padStart(2, '0')}`);
    // Profiles that could not be loaded: each visit loads its profile again, before anything else waits, and the
    // load is held at a gate, so every visit the sweep has started is seen under way together.
    const unavailable = (name: string): ProfileEntry => ({ name, error: new Error('the keychain did not answer') });
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let inFlight = 0;
    let most = 0;
    const loaded: string[] = [];
    const daemon = await startDaemon({
      profiles: names.map(unavailable),
      loadProfile: async (name) => {
        inFlight += 1;
        most = Math.max(most, inFlight);
        loaded.push(name);
        try {
          await gate;
          return unavailable(name);
        } finally {
          inFlight -= 1;
        }
      },
      profileStore: openProfileStore(tempDir()),
      renewMarginMs: 60_000,
      schedule: false,
      concurrency: CONCURRENCY,
      logger: captureLog().logger,
    });
    try {
      const sweep = daemon.sweep();
      await new Promise((resolve) => setTimeout(resolve, 300));
      const heldAtOnce = inFlight;
      open();
      const report = await sweep;
      expect(heldAtOnce).toBe(CONCURRENCY);
      expect(most).toBe(CONCURRENCY);
      expect(loaded).toEqual(names);
      expect(report.profiles).toEqual(names.map((profile) => ({ profile, action: 'parked' })));
    } finally {
      await daemon.close();
    }
  });
});
