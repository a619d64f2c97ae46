// A fleet replica holds the grants of its share, not of the fleet's: a stored profile another replica serves is
// kept as its name alone, its refresh token's redaction released with it, and loaded again when this replica
// takes it. Profiles made through the package's own stores (as setup makes them), a daemon that sees two other
// live members, then none.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { openSecretStore } from '../../src/credentials/index.js';
import { CoordinatorUnavailableError } from '../../src/daemon/coordinator.js';
import { startDaemon, storedProfiles } from '../../src/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { redact } from '../../src/redact.js';
import { memoryCoordinator, type MemoryRedis } from '../helpers/replicas.mjs';
import { newHome } from '../helpers/onboarding.js';
import { captureLog } from './helpers.js';

const MINUTE = 60_000;

describe('a fleet replica lets go of what it does not serve', () => {
  it("keeps neither the grant nor its redaction of another replica's profiles, and loads a profile again when it takes it", async () => {
    const home = newHome();
    const names = Array.from({ length: 24 }, (_, i) => `s${String(i).padStart(2, '0')}`);
    const refresh = (name: string) => `refresh-token-of-${name}-${'x'.repeat(40)}`;
    const secrets = openSecretStore({ kind: 'file', configDir: home.configDir, storeKey: home.storeKey, env: {} });
    const state = openProfileStore(home.configDir);
    for (const name of names) {
      await secrets.set(name, { app_key: 'app-key-shared', app_secret: 'app-secret-shared-0123456789', refresh_token: refresh(name) });
      await state.update(name, () => ({ tokenUrl: 'http://127.0.0.1:9/oauth2/token' }));
    }
    let t = Date.parse('2030-01-01T00:00:00Z');
    let mono = 0;
    const redis: MemoryRedis = { now: () => t, leases: new Map(), records: new Map(), members: new Map([['other-1', t + 3_600_000], ['other-2', t + 3_600_000]]) };
    const stored = await storedProfiles({ env: { SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey } });
    const log = captureLog('info');
    const daemon = await startDaemon({
      ...stored,
      renewMarginMs: 15 * MINUTE,
      schedule: false,
      sweepOnStart: false,
      checkIntervalMs: 0,
      logger: log.logger,
      now: () => t,
      monotonicNow: () => mono,
      coordinator: memoryCoordinator(redis, 'me', CoordinatorUnavailableError, () => t),
      grantKey: randomBytes(32),
      fleet: { timers: false, leaseMs: 3 * MINUTE },
    });
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
