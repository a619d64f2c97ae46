// The real daemon over stored profiles (encrypted file store): one whose state file is broken when the daemon
// starts is served again as soon as the file is fixed, with no SIGHUP, while the other runs on; what writes
// killed mid-way left behind is cleared at start, and what a write in progress holds is not.
import { existsSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  grantRefreshToken, newHome, onboardingEnv, profileFile, runCli, startOnboarding, type Onboarding,
} from '../helpers/onboarding.js';
import { waitFor } from '../helpers/wait.js';
import { spawnDaemon } from './process.js';

let ob: Onboarding;

beforeAll(async () => {
  ob = await startOnboarding();
});
afterAll(async () => ob.emulator.close());

describe('a daemon over stored profiles', () => {
  it('serves a profile whose state file was broken at start once the file is fixed, without a reload; clears dead writes', async () => {
    const home = newHome();
    for (const profile of ['good', 'broken']) {
      const env = onboardingEnv(ob, home, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob), SYNCAUTH_PROFILE: profile });
      const setup = await runCli(['setup', '--yes', '--connector-name', `conn-${profile}`], { env, cwd: home.dir });
      expect(setup.code, setup.stderr).toBe(0);
    }
    const file = profileFile(home, 'broken');
    const good = readFileSync(file, 'utf8');
    writeFileSync(file, '{ "version": 1, "profile": "broken", ', { mode: 0o600 });
    // Temporary files of writes a kill -9 interrupted an hour ago, and one of a write in progress now.
    const stale = [
      `${profileFile(home, 'good')}.123456789`, path.join(home.configDir, 'secrets.enc.987654321'),
      path.join(home.configDir, 'secrets', 'good.enc.123'), path.join(home.configDir, 'secrets', 'broken.token.456'),
    ];
    const inProgress = `${profileFile(home, 'good')}.555`;
    const anHourAgo = new Date(Date.now() - 3_600_000);
    for (const file of stale) {
      writeFileSync(file, 'half a write', { mode: 0o600 });
      utimesSync(file, anHourAgo, anHourAgo);
    }
    writeFileSync(inProgress, 'a write in progress', { mode: 0o600 });
    const env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home.dir,
      SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey,
    };
    const daemon = spawnDaemon(env, home.dir, ['--listen', '127.0.0.1:0', '--sweep', '* * * * * *']);
    try {
      const { listen, profiles } = await daemon.started();
      expect(profiles.sort()).toEqual(['broken', 'good']);
      expect(stale.filter((file) => existsSync(file))).toEqual([]);
      expect(existsSync(inProgress)).toBe(true);
      const readyz = async (): Promise<{ status: number; body: { profiles: Record<string, { ready: boolean }> } }> => {
        const res = await fetch(`${listen}/readyz`);
        return { status: res.status, body: (await res.json()) as { profiles: Record<string, { ready: boolean }> } };
      };
      await waitFor('the good profile', async () => ((await readyz()).body.profiles.good?.ready ? true : undefined));
      expect((await readyz()).status).toBe(503);
      writeFileSync(file, good, { mode: 0o600 });
      const fixedAt = Date.now();
      await waitFor('every profile ready', async () => ((await readyz()).status === 200 ? true : undefined), 20_000);
      console.log(`a profile broken at start was served ${Date.now() - fixedAt} ms after its state file was fixed`);
    } finally {
      daemon.child.kill('SIGKILL');
    }
  }, 60_000);
});
