// What setup shows of what the person typed hidden, in-process with the emulator: the app key's last four
// characters, so a typo can be compared with the App Console, and never more.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hiddenTail } from '../../src/cli/prompt.js';
import { runInProcess, scriptedPrompter } from '../helpers/in-process.js';
import { grantRefreshToken, newHome, onboardingEnv, startOnboarding, type Onboarding } from '../helpers/onboarding.js';

let ob: Onboarding;
beforeAll(async () => {
  ob = await startOnboarding();
});
afterAll(async () => {
  await ob.emulator.close();
});

describe('a key typed hidden', () => {
  it('shows its last four characters, never more, and none of a key shorter than eight', () => {
    expect(hiddenTail('abcdefgh1a2b')).toBe('••••1a2b');
    expect(hiddenTail('abcd1a2b')).toBe('••••1a2b');
    expect(hiddenTail('abc1a2b')).toBe('••••');
    expect(hiddenTail('')).toBe('••••');
  });

  it("setup echoes the typed app key's end after it is entered, and nothing of the other secrets", async () => {
    const home = newHome();
    const env = onboardingEnv(ob, home, { SYNCAUTH_APP_KEY: undefined, SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob), SYNCAUTH_CONNECTOR_NAME: 'typed-tail' });
    const prompter = scriptedPrompter([ob.app.appKey]);
    const result = await runInProcess(['setup', '--no-check', '--no-workflow'], { cwd: home.dir, env, prompter });
    expect(result.code, result.stderr).toBe(0);
    expect(prompter.asked).toEqual(['Dropbox app key (hidden)']);
    expect(result.stderr).toContain(`app key: ••••${ob.app.appKey.slice(-4)}\n`);
    expect(result.stderr + result.stdout).not.toContain(ob.app.appKey.slice(-5));
  });

  it('a key from the environment is not echoed: nothing was typed', async () => {
    const home = newHome();
    const env = onboardingEnv(ob, home, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob), SYNCAUTH_CONNECTOR_NAME: 'typed-none' });
    const result = await runInProcess(['setup', '--no-check', '--no-workflow'], { cwd: home.dir, env, prompter: scriptedPrompter([]) });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).not.toContain('app key: ');
  });
});
