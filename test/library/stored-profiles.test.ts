// `storedProfiles` from the package root: a program running `startDaemon` itself serves the profiles `syncauth
// setup` stored, with the same persistence as `syncauth daemon`: the token the daemon renews is kept in the
// profile's secret store, so `syncauth token` in another process takes it without a renewal of its own. A config
// dir another user may write is refused before anything in it is read.
import { chownSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, storedProfiles, SyncauthError } from '../../src/index.js';
import { onboardWithGrant, runCli, startOnboarding, type Onboarded, type Onboarding } from '../helpers/onboarding.js';

describe('storedProfiles', () => {
  let ob: Onboarding;
  let profile: Onboarded;
  const tokenRequests = (): number => ob.emulator.state.requests.filter((r) => r.route === 'token').length;

  beforeAll(async () => {
    ob = await startOnboarding();
    profile = await onboardWithGrant(ob, 'lib');
  });
  afterAll(async () => {
    await ob.emulator.close();
  });

  it('serves the stored profile through its GrantStore: the renewed token is kept for `syncauth token` in another process', async () => {
    const stored = await storedProfiles({ env: profile.env });
    // A margin longer than any token's life: the first sweep renews.
    const running = await startDaemon({ ...stored, renewMarginMs: 14_399_000, schedule: false, sweepOnStart: false });
    try {
      const before = tokenRequests();
      const report = await running.sweep();
      expect(report.profiles.map((entry) => [entry.profile, entry.renewal])).toEqual([['lib', 'renewed']]);
      expect(tokenRequests()).toBe(before + 1);
      const held = running.status().profiles.find((p) => p.name === 'lib');
      expect(held?.ready).toBe(true);
      // `syncauth token` with the default margin finds the daemon's token kept in the store and asks for none.
      const cli = await runCli(['token', '--profile', 'lib'], { env: profile.env, cwd: profile.home.dir });
      expect(cli.code).toBe(0);
      expect(ob.emulator.state.accessTokens.get(cli.stdout.trim())?.expiresAt).toBeGreaterThan(Date.now());
      expect(tokenRequests()).toBe(before + 1);
    } finally {
      await running.close();
    }
  }, 60_000);

  it('refuses a config dir another user owns, naming it, before reading it', async () => {
    // Another local user's directory, holding a planted profile: nothing of it is loaded.
    const planted = path.join(profile.home.dir, 'planted');
    mkdirSync(path.join(planted, 'profiles'), { recursive: true, mode: 0o700 });
    writeFileSync(path.join(planted, 'profiles', 'lib.json'), '{}');
    chownSync(planted, 65534, 65534);
    const error: unknown = await storedProfiles({ env: { ...profile.env, SYNCAUTH_CONFIG_DIR: planted } }).then(() => undefined, (caught: unknown) => caught);
    expect(error).toBeInstanceOf(SyncauthError);
    expect((error as SyncauthError).message).toContain(planted);
  });

  it('refuses an option it does not know, naming it', async () => {
    await expect(storedProfiles({ env: profile.env, profile: 'lib' } as never)).rejects.toThrow(/profile/);
  });
});
