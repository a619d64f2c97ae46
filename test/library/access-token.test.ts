// `getAccessToken` from the package root, in this process, on a profile `syncauth setup` made: it reuses the
// token kept in the profile's secret store while it has more than the margin left, shares one flight among
// concurrent callers, renews when forced, and agrees with `syncauth token` in another process (one renewal
// between them).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getAccessToken } from '../../src/index.js';
import { onboardWithGrant, runCli, startOnboarding, type Onboarded, type Onboarding } from '../helpers/onboarding.js';

describe('getAccessToken', () => {
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

  it('reuses the kept token, shares one flight, renews when forced, and agrees with `syncauth token`', async () => {
    const options = { profile: 'lib', env: profile.env };
    const before = tokenRequests();
    // Concurrent callers share one flight: at most one renewal, one token for all.
    const [a, b, c] = await Promise.all([getAccessToken(options), getAccessToken(options), getAccessToken(options)]);
    expect(new Set([a.accessToken, b.accessToken, c.accessToken]).size).toBe(1);
    expect(tokenRequests() - before).toBeLessThanOrEqual(1);
    expect(ob.emulator.state.accessTokens.get(a.accessToken)?.expiresAt).toBeGreaterThan(Date.now());
    expect(a.expiresAt).toBeInstanceOf(Date);
    // Then the kept token is reused.
    const settled = tokenRequests();
    expect((await getAccessToken(options)).accessToken).toBe(a.accessToken);
    expect(tokenRequests()).toBe(settled);

    // Forced, concurrently: one renewal between them.
    const [f1, f2] = await Promise.all([getAccessToken({ ...options, force: true }), getAccessToken({ ...options, force: true })]);
    expect(f1.accessToken).toBe(f2.accessToken);
    expect(f1.accessToken).not.toBe(a.accessToken);
    expect(tokenRequests()).toBe(settled + 1);

    // Another process reuses what this one renewed, and this one what it finds kept.
    const cli = await runCli(['token', '--profile', 'lib'], { env: profile.env, cwd: profile.home.dir });
    expect(cli.code).toBe(0);
    expect(cli.stdout.trim()).toBe(f1.accessToken);
    expect((await getAccessToken(options)).accessToken).toBe(f1.accessToken);
    expect(tokenRequests()).toBe(settled + 1);
  }, 60_000);

  it('names what is missing for a profile that does not exist, and sends nothing', async () => {
    const before = ob.emulator.state.requests.length;
    await expect(getAccessToken({ profile: 'nosuch', env: profile.env })).rejects.toThrow(/nosuch/);
    expect(ob.emulator.state.requests.length).toBe(before);
  });
});
