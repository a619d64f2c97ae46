// `syncauth doctor` beside a running daemon whose Dropbox app lacks account_info.read: the daemon's token check
// meets missing_scope, says so once and stops checking; doctor names the profile whose checks are off, so the
// operator knows a revoked grant would be noticed only at the next renewal.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_APP } from '../../src/emulator/index.js';
import { containerEnv, spawnDaemon } from '../daemon/process.js';
import { tempDir } from '../helpers/cli.js';
import { grantRefreshToken, runCli, startOnboarding, type Onboarding } from '../helpers/onboarding.js';

let ob: Onboarding;
beforeAll(async () => {
  ob = await startOnboarding({ app: { scopes: DEFAULT_APP.scopes.filter((scope) => scope !== 'account_info.read') } });
});
afterAll(async () => ob.emulator.close());

describe('doctor and a daemon whose token checks are off', () => {
  it('missing_scope: one warning in the log, no more checks, and a doctor line naming the profile', async () => {
    const grant = { appKey: ob.app.appKey, appSecret: ob.app.appSecret, refreshToken: await grantRefreshToken(ob) };
    const home = tempDir();
    const env = containerEnv(ob.emulator, grant, home);
    const daemon = spawnDaemon(env, home, ['--check-interval', '1s', '--log-level', 'info']);
    try {
      const { listen } = await daemon.started();
      await daemon.ready(listen);
      const checksOff = async (): Promise<unknown> =>
        ((await (await fetch(`${listen}/readyz`)).json()) as { profiles: Record<string, { checksOff?: string }> }).profiles.container?.checksOff;
      await expect.poll(checksOff, { timeout: 30_000, interval: 200 }).toMatch(/account_info\.read/);
      const asked = (): number => ob.emulator.state.requests.filter((r) => r.path === '/2/users/get_current_account').length;
      const once = asked();
      // Several intervals later: no more checks, and the warning said once.
      await new Promise((resolve) => setTimeout(resolve, 3_500));
      expect(asked()).toBe(once);
      expect(daemon.out.stdout.split('\n').filter((line) => line.includes('"event":"check.off"'))).toHaveLength(1);
      const address = new URL(listen).host;
      const result = await runCli(['doctor', '--listen', address], { env, cwd: home });
      expect(result.stdout).toMatch(/^warn +daemon +\S+ +profile container: token checks are off: the Dropbox app lacks the account_info\.read permission/m);
    } finally {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
    }
  }, 90_000);
});
