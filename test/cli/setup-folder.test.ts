// A folder that does not exist in the app folder, as a person types it (dropbox://reports where the app folder
// holds data/): found once the grant is in hand, setup says which folders it can see there and asks again, at a
// terminal, keeping the grant it holds; nothing of the first answer is left behind.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runInProcess, scriptedPrompter } from '../helpers/in-process.js';
import { grantRefreshToken, newHome, onboardingEnv, readProfileState, sources, startOnboarding, storedSecrets, type Onboarding } from '../helpers/onboarding.js';

let ob: Onboarding;
beforeAll(async () => {
  ob = await startOnboarding();
});
afterAll(async () => ob.emulator.close());

describe('a folder that does not exist', () => {
  it('at a terminal: the folders setup can see are listed, the folder is asked again, and the grant is kept', async () => {
    const home = newHome();
    const grant = await grantRefreshToken(ob);
    const env = onboardingEnv(ob, home, { SYNCAUTH_REFRESH_TOKEN: grant, SYNCAUTH_REMOTE_URL: 'dropbox://reports' });
    const prompter = scriptedPrompter(['dropbox://nothere', 'dropbox://data']);
    const result = await runInProcess(['setup', '--no-check', '--no-workflow'], { cwd: home.dir, env, prompter });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/the folder \/reports does not exist in the app folder; the folders setup can see there: data\b/);
    expect(prompter.asked).toEqual(['Subfolder to read, as dropbox://<subfolder>', 'Subfolder to read, as dropbox://<subfolder>']);
    expect(result.stderr).toMatch(/✓ dropbox:\/\/data is readable/);
    // The profile and the connector read the folder that exists, under the name that folder gives; the grant is the one it held.
    expect(readProfileState(home, 'default')).toMatchObject({ remoteUrl: 'dropbox://data', connectorName: 'dropbox-data' });
    expect((await storedSecrets(home, 'default')).refresh_token).toBe(grant);
    expect(sources(ob).filter((s) => s.name === 'dropbox-reports')).toEqual([]);
    expect(sources(ob).find((s) => s.name === 'dropbox-data')?.config.remote_url).toBe('dropbox://data');
  });

  it('without a terminal: exit 1 naming the folders setup can see, nothing written', async () => {
    const home = newHome();
    const env = onboardingEnv(ob, home, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob), SYNCAUTH_REMOTE_URL: 'dropbox://reports', SYNCAUTH_CONNECTOR_NAME: 'no-such-folder' });
    const result = await runInProcess(['setup', '--yes', '--no-check', '--no-workflow'], { cwd: home.dir, env });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/the folder \/reports does not exist in the app folder; the folders setup can see there: data\b/);
    expect(readProfileState(home, 'default')).toBeUndefined();
  });
});
