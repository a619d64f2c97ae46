// The world of the tests of what a fleet replica lets go of: 24 profiles stored as setup stores them (the file
// store), each with its own refresh token, and a replica, `me`, that sees two other live members in Redis.
import { randomBytes } from 'node:crypto';
import { openSecretStore } from '../../src/credentials/index.js';
import { CoordinatorUnavailableError } from '../../src/daemon/coordinator.js';
import { storedProfiles } from '../../src/index.js';
import type { DaemonOptions } from '../../src/daemon/types.js';
import { openProfileStore } from '../../src/profile/index.js';
import { memoryCoordinator, type MemoryRedis } from '../helpers/replicas.mjs';
import { newHome } from '../helpers/onboarding.js';

const MINUTE = 60_000;

/** The refresh token stored for profile `name`. */
export const storedRefreshToken = (name: string): string => `refresh-token-of-${name}-${'x'.repeat(40)}`;

/**
 * The 24 profiles, named `prefix` and two digits, stored; and the options of the replica `me` over them, on the
 * wall clock `now`, its sweeps driven by the test, its token checks off. `redis.members` holds the two others.
 */
export async function storedFleet(prefix: string, now: () => number) {
  const home = newHome();
  const names = Array.from({ length: 24 }, (_, i) => `${prefix}${String(i).padStart(2, '0')}`);
  const secrets = openSecretStore({ kind: 'file', configDir: home.configDir, storeKey: home.storeKey, env: {} });
  const state = openProfileStore(home.configDir);
  for (const name of names) {
    await secrets.set(name, { app_key: 'app-key-shared', app_secret: 'app-secret-shared-0123456789', refresh_token: storedRefreshToken(name) });
    await state.update(name, () => ({ tokenUrl: 'http://127.0.0.1:9/oauth2/token' }));
  }
  const at = now();
  const redis: MemoryRedis = { now, leases: new Map(), records: new Map(), members: new Map([['other-1', at + 3_600_000], ['other-2', at + 3_600_000]]) };
  const stored = await storedProfiles({ env: { SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey } });
  const options = {
    ...stored,
    renewMarginMs: 15 * MINUTE,
    schedule: false,
    sweepOnStart: false,
    checkIntervalMs: 0,
    now,
    coordinator: memoryCoordinator(redis, 'me', CoordinatorUnavailableError, now),
    grantKey: randomBytes(32),
    fleet: { timers: false, leaseMs: 3 * MINUTE },
  } satisfies Partial<DaemonOptions>;
  return { names, redis, stored, options };
}
