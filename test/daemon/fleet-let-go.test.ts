// A fleet replica holds the grants of its share, not of the fleet's: a stored profile another replica serves is
// kept as its name alone, its refresh token's redaction released with it, and loaded again when this replica
// takes it. Profiles made through the package's own stores (as setup makes them), a daemon that sees two other
// live members, then none.
import { describe, expect, it } from 'vitest';
import { startDaemon } from '../../src/index.js';
import { redact } from '../../src/redact.js';
import { captureLog } from './helpers.js';
import { storedFleet, storedRefreshToken } from './stored-fleet.js';

const MINUTE = 60_000;

describe('a fleet replica lets go of what it does not serve', () => {
  it("keeps neither the grant nor its redaction of another replica's profiles, and loads a profile again when it takes it", async () => {
    let t = Date.parse('2030-01-01T00:00:00Z');
    let mono = 0;
    const { names, redis, options } = await storedFleet('s', () => t);
    const refresh = storedRefreshToken;
    const log = captureLog('info');
    const daemon = await startDaemon({ ...options, logger: log.logger, monotonicNow: () => mono });
    try {
      const served = new Set(daemon.status().profiles.map((p) => p.name));
      expect(daemon.status().fleet).toMatchObject({ members: 3, shared: 24 });
      expect(served.size).toBeGreaterThan(2);
      expect(served.size).toBeLessThan(20);
      // The profiles served here are redacted; the others' refresh tokens are no longer held, nor registered.
      for (const name of names) expect(redact(`token ${refresh(name)}`) === `token ${refresh(name)}`).toBe(!served.has(name));
      // The two others stop: once their leases end this replica takes every profile, loading each again.
      redis.members?.clear();
      t += 4 * MINUTE;
      mono += 4 * MINUTE;
      await daemon.sweep();
      expect(daemon.status().fleet).toMatchObject({ members: 1, served: 24 });
      for (const name of names) expect(redact(`token ${refresh(name)}`)).not.toContain(refresh(name));
      for (const line of log.lines) for (const name of names) expect(line).not.toContain(refresh(name));
    } finally {
      await daemon.close();
    }
  }, 60_000);
});
