// Counts printed with their noun read right in the singular too.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { counted } from '../../src/cli/output.js';
import { grantRefreshToken, newHome, onboardingEnv, runCli, startOnboarding, type Onboarding } from '../helpers/onboarding.js';

describe('counted', () => {
  it('says 1 entry, 2 entries, 0 entries and 100+ entries', () => {
    expect(counted(1, 'entry', 'entries')).toBe('1 entry');
    expect(counted(2, 'entry', 'entries')).toBe('2 entries');
    expect(counted(0, 'entry', 'entries')).toBe('0 entries');
    expect(counted(1, 'profile')).toBe('1 profile');
    expect(counted(3, 'profile')).toBe('3 profiles');
    expect(counted(100, 'entry', 'entries', true)).toBe('100+ entries');
  });
});

describe('setup', () => {
  let ob: Onboarding;
  beforeAll(async () => {
    ob = await startOnboarding({ app: { folders: { '/data': ['only.csv'] } } });
  });
  afterAll(async () => ob.emulator.close());

  it('says a folder holding one file has 1 entry', async () => {
    const home = newHome();
    const refreshToken = await grantRefreshToken(ob);
    const result = await runCli(['setup', '--yes', '--profile', 'single'], { env: onboardingEnv(ob, home, { SYNCAUTH_REFRESH_TOKEN: refreshToken }), cwd: home.dir });
    expect(result.stderr).not.toMatch(/^error/m);
    expect(result.stderr).toContain('✓ dropbox://data is readable (1 entry)\n');
  });
});
