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

  it('each answer is checked once typed: a refused API key and an unknown app key are asked again, nothing else is', async () => {
    const home = newHome();
    const env = onboardingEnv(ob, home, {
      SYNCAUTH_BASE_URL: undefined, SYNCAUTH_API_KEY: undefined, SYNCAUTH_APP_KEY: undefined, SYNCAUTH_APP_SECRET: undefined, SYNCAUTH_REMOTE_URL: undefined,
      SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob), SYNCAUTH_CONNECTOR_NAME: 'typed-checked',
    });
    const prompter = scriptedPrompter([
      ob.emulator.url, 'a-wrong-api-key-0000', ob.apiKey, 'wrongappkey9z8y', ob.app.appKey, ob.app.appSecret, 'dropbox://data',
    ]);
    const result = await runInProcess(['setup', '--no-check', '--no-workflow'], { cwd: home.dir, env, prompter });
    expect(result.code, result.stderr).toBe(0);
    expect(prompter.asked).toEqual([
      "The ingestion service's base URL", 'Service API key (hidden)', 'Service API key (hidden)',
      'Dropbox app key (hidden)', 'Dropbox app key (hidden)', 'Dropbox app secret (hidden)', 'Subfolder to read, as dropbox://<subfolder>',
    ]);
    expect(result.stderr).toMatch(/! the service at .* refused the API key \(401\)/);
    expect(result.stderr).toContain('the service at');
    expect(result.stderr).toContain('accepts the API key');
    expect(result.stderr).toContain('app key: ••••9z8y\n');
    expect(result.stderr).toContain('! Dropbox does not know this app key');
    expect(result.stderr + result.stdout).not.toContain('a-wrong-api-key-0000');
  });

  it('a wrong base URL is asked again, keeping the API key typed', async () => {
    const home = newHome();
    const env = onboardingEnv(ob, home, {
      SYNCAUTH_BASE_URL: undefined, SYNCAUTH_API_KEY: undefined,
      SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob), SYNCAUTH_CONNECTOR_NAME: 'typed-url',
    });
    // A port nobody listens on: closed at once.
    const prompter = scriptedPrompter(['http://127.0.0.1:9', ob.apiKey, ob.emulator.url]);
    const result = await runInProcess(['setup', '--no-check', '--no-workflow'], { cwd: home.dir, env, prompter });
    expect(result.code, result.stderr).toBe(0);
    expect(prompter.asked).toEqual(["The ingestion service's base URL", 'Service API key (hidden)', "The ingestion service's base URL"]);
    expect(result.stderr).toContain('! cannot reach the service at 127.0.0.1:9');
  });
});
