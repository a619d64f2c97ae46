// `getAccessToken` from the package root, in this process, on a profile `syncauth setup` made: it reuses the
// token kept in the profile's secret store while it has more than the margin left, shares one flight among
// concurrent callers, renews when forced, and agrees with `syncauth token` in another process (one renewal
// between them).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getAccessToken, SyncauthError, type GetAccessTokenOptions } from '../../src/index.js';
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

  // The error carries its kind and the exit code: a library caller reads the same verdict the CLI exits with.
  async function refusal(options: GetAccessTokenOptions): Promise<SyncauthError> {
    const error: unknown = await getAccessToken(options).then(() => undefined, (caught: unknown) => caught);
    expect(error).toBeInstanceOf(SyncauthError);
    return error as SyncauthError;
  }

  it('names a profile that does not exist and those that do, as `configuration` (exit 2, as the CLI), and sends nothing', async () => {
    const before = ob.emulator.state.requests.length;
    const error = await refusal({ profile: 'nosuch', env: profile.env });
    expect(error.message).toMatch(/^no profile named "nosuch"/);
    expect(error.hint).toMatch(/the profiles there are: lib\b/);
    // Not retried (configuration), and exit 2: the name given is the input at fault.
    expect([error.code, error.kind, error.exitCode]).toStrictEqual(['SYNCAUTH_NO_PROFILE', 'configuration', 2]);
    const cli = await runCli(['token', '--profile', 'nosuch'], { env: profile.env, cwd: profile.home.dir });
    expect(cli.code).toBe(error.exitCode);
    expect(ob.emulator.state.requests.length).toBe(before);
  });

  it('refuses an endpoint other than the recorded one as `bad_input` (exit 2, as the CLI), and sends nothing', async () => {
    const before = ob.emulator.state.requests.length;
    const env = { ...profile.env, SYNCAUTH_TOKEN_URL: 'http://127.0.0.1:9/oauth2/token' };
    const error = await refusal({ profile: 'lib', env });
    expect([error.code, error.kind, error.exitCode]).toStrictEqual(['SYNCAUTH_ENDPOINT_MISMATCH', 'bad_input', 2]);
    const cli = await runCli(['token', '--profile', 'lib'], { env, cwd: profile.home.dir });
    expect(cli.code).toBe(error.exitCode);
    expect(ob.emulator.state.requests.length).toBe(before);
  });
});
