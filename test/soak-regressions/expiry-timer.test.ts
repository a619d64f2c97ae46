// The token leaves its file when it expires, even when the timer set for that moment fires a little before the
// daemon's clocks say it has (timers round to the millisecond; the clocks drift). The timer used to give up
// then, and the expired token stayed in the file until the next sweep: the real-process soak (seed 1, 30
// minutes) saw all three profiles of a replica publish an expired token for half a second at once.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { startDaemon } from '../../src/daemon/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { captureLog, emulator, obtainGrant, profileOf, tempDir } from '../daemon/helpers.js';

describe('the expiry timer', () => {
  it('removes the token file at expiry on a clock slower than the timers', async () => {
    // The daemon's clock runs at 90 % of the timers' pace: every timer fires before its time by that clock.
    const origin = Date.now();
    const slow = (): number => origin + (Date.now() - origin) * 0.9;
    const emu = await emulator({ now: slow, tokenLifetimeSeconds: 0.6 });
    const grant = await obtainGrant(emu);
    const dir = tempDir();
    const file = path.join(dir, 'p1.token');
    const daemon = await startDaemon({
      profiles: [profileOf(emu, { name: 'p1', grant })],
      profileStore: openProfileStore(path.join(dir, 'config')),
      renewMarginMs: 100,
      schedule: false,
      tokenFile: path.join(dir, '{profile}.token'),
      logger: captureLog().logger,
      now: slow,
    });
    try {
      await daemon.sweep();
      expect(existsSync(file)).toBe(true);
      // No sweep runs: only the timer can take the token away. By the slow clock it expires 0.6 s after it was
      // issued, which the timers reach after about 0.67 s; give them twice that.
      await new Promise((resolve) => setTimeout(resolve, 1_400));
      expect(slow()).toBeGreaterThan(Date.parse(daemon.status().profiles[0]?.expiresAt ?? '0'));
      expect(existsSync(file)).toBe(false);
    } finally {
      await daemon.close();
    }
  });
});
