// `syncauth token` keeps answering while the daemon beside it is stuck on the same profile: the daemon's
// reconcile runs outside the renewal lock, so a service that never answers holds neither the lock nor the
// commands that need it.
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  grantRefreshToken, newHome, onboardingEnv, profileFile, runCli, spawnCli, startOnboarding, type Onboarding,
} from '../helpers/onboarding.js';
import { hang, misbehavingServer } from '../helpers/servers.js';

let ob: Onboarding;

beforeAll(async () => {
  ob = await startOnboarding({ emulator: { tokenLifetimeSeconds: 30 } });
});
afterAll(async () => ob.emulator.close());

describe('beside a stuck daemon', () => {
  it('syncauth token answers at once, and --force renews, while the daemon waits on a hung service', async () => {
    const hung = await misbehavingServer(hang);
    const home = newHome();
    const env = onboardingEnv(ob, home, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob) });
    const setup = await runCli(['setup', '--yes'], { env, cwd: home.dir });
    expect(setup.code, setup.stderr).toBe(0);
    // The service moved to a host that accepts connections and never answers (recorded as setup would).
    const file = profileFile(home, 'default');
    const state = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    writeFileSync(file, JSON.stringify({ ...state, baseUrl: hung.url }), { mode: 0o600 });
    const storeEnv = { SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey };

    // A margin wider than the token's life: the daemon renews at every sweep and reconciles after each.
    const daemon = spawnCli(['daemon', '--sweep', '* * * * * *', '--renew-margin', '40'], { env: storeEnv, cwd: home.dir, timeoutMs: 60_000 });
    try {
      const deadline = Date.now() + 15_000;
      while (hung.requests() === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(hung.requests(), 'the daemon reached the hung service').toBeGreaterThan(0);

      for (const args of [['token'], ['token', '--force']]) {
        const started = Date.now();
        const result = await runCli(args, { env: storeEnv, cwd: home.dir, timeoutMs: 20_000 });
        const took = Date.now() - started;
        expect(result.code, result.stderr).toBe(0);
        const issued = ob.emulator.state.accessTokens.get(result.stdout.trim());
        expect(issued?.expiresAt).toBeGreaterThan(Date.now());
        // Generous: a process start and at most one renewal, not the daemon's 45 s reconcile deadline.
        expect(took, `${args.join(' ')} took ${took} ms`).toBeLessThan(8_000);
      }
    } finally {
      daemon.end();
      process.kill(daemon.pid, 'SIGKILL');
    }
  }, 60_000);
});
