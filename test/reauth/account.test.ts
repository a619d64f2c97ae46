// The Dropbox account that granted access is recorded, so that re-authorization can insist on the same one:
// setup records the account_id the code exchange names (and a settings-only re-run, whose renewal names none,
// keeps it); the daemon learns it from users/get_current_account while the grant works, for a profile made
// otherwise (the env store), and writes it into the state.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon } from '../../src/daemon/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import {
  grantRefreshToken, newHome, onboardingEnv, readProfileState, runCli, runWithApproval, startOnboarding, type Onboarding,
} from '../helpers/onboarding.js';
import { captureLog, tempDir } from '../daemon/helpers.js';

let ob: Onboarding;

beforeAll(async () => {
  ob = await startOnboarding();
});
afterAll(async () => {
  await ob.emulator.close();
});

describe('the Dropbox account of a profile', () => {
  it('setup records the account that approved, as a version 2 state; a settings-only re-run keeps it', async () => {
    const home = newHome();
    const env = onboardingEnv(ob, home, { SYNCAUTH_PROFILE: 'acct' });
    const setup = await runWithApproval(['setup', '--yes', '--no-open', '--no-check'], { env, cwd: home.dir });
    expect(setup.code, setup.stderr).toBe(0);
    const state = readProfileState(home, 'acct');
    expect(state).toMatchObject({ version: 2, accountId: ob.emulator.state.account.accountId });

    // Only a setting changes: setup renews with the stored grant, and a renewal names no account.
    const again = await runCli(['setup', '--yes', '--no-check', '--recursive'], { env, cwd: home.dir });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain('no browser needed');
    expect(readProfileState(home, 'acct')).toMatchObject({ version: 2, recursive: true, accountId: ob.emulator.state.account.accountId });
  });

  it('the daemon learns it from users/get_current_account for a profile that has none (the env store)', async () => {
    const configDir = tempDir('syncauth-account-');
    const store = openProfileStore(configDir);
    const refreshToken = await grantRefreshToken(ob);
    const log = captureLog('info');
    const daemon = await startDaemon({
      profiles: [{
        name: 'envprof',
        tokenUrl: ob.emulator.tokenUrl,
        dropboxApiUrl: ob.emulator.apiUrl,
        grant: { appKey: ob.app.appKey, appSecret: ob.app.appSecret, refreshToken },
        recordAccount: async (accountId) => {
          await store.update('envprof', (current) => (current && !current.accountId ? { ...current, accountId } : current));
        },
      }],
      profileStore: store,
      renewMarginMs: 60_000,
      schedule: false,
      logger: log.logger,
    });
    try {
      const report = await daemon.sweep();
      expect(report.profiles[0]).toMatchObject({ renewal: 'renewed' });
      await expect.poll(async () => (await store.read('envprof'))?.accountId, { timeout: 5_000 }).toBe(ob.emulator.state.account.accountId);
      expect((await store.read('envprof'))?.version).toBe(2);
      expect(log.records().some((r) => r.event === 'account.recorded')).toBe(true);
    } finally {
      await daemon.close();
    }
  });
});
