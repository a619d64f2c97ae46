// A re-run of setup whose only changes are settings (a schedule, a folder) applies them with the grant the
// profile has: no browser round. A change the grant depends on (the app key) still needs the browser, and so
// does a stored grant revoked since.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/service/client.js';
import {
  grantRefreshToken, newHome, onboardingEnv, readProfileState, runCli, startOnboarding, storedSecrets, type Home, type Onboarding,
} from '../helpers/onboarding.js';

let ob: Onboarding;
let client: ServiceClient;
beforeAll(async () => {
  ob = await startOnboarding();
  client = new ServiceClient({ baseUrl: ob.emulator.url, apiKey: ob.apiKey });
});
afterAll(async () => {
  await client.close();
  await ob.emulator.close();
});

const authorizePages = () => ob.emulator.state.requests.filter((r) => r.path.startsWith('/oauth2/authorize')).length;

async function onboarded(connectorName: string, flags: string[] = []): Promise<Home> {
  const home = newHome();
  const env = onboardingEnv(ob, home, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob), SYNCAUTH_CONNECTOR_NAME: connectorName });
  const result = await runCli(['setup', '--yes', '--no-check', ...flags], { env, cwd: home.dir });
  expect(result.code, result.stderr).toBe(0);
  return home;
}

describe('a re-run that changes settings only', () => {
  it('--schedule daily on a profile with a workflow: applied with the stored grant, no browser', async () => {
    const workflowId = ob.emulator.seeded?.workflowId as string;
    const home = await onboarded('settings-schedule', ['--workflow-id', workflowId]);
    const grant = (await storedSecrets(home, 'default')).refresh_token;
    const pages = authorizePages();
    // --timeout 3: were the browser round started, nobody would come and the run would fail.
    const result = await runCli(['setup', '--yes', '--no-check', '--no-open', '--timeout', '3', '--schedule', 'daily'], {
      env: onboardingEnv(ob, home, { SYNCAUTH_CONNECTOR_NAME: 'settings-schedule' }), cwd: home.dir,
    });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/schedule\s+none → daily/);
    expect(result.stderr).toContain("applying them with the profile's grant; no browser needed");
    expect(result.stderr).not.toContain('/oauth2/authorize');
    expect(authorizePages()).toBe(pages);
    expect(readProfileState(home, 'default')?.schedule).toBe('daily');
    expect((await storedSecrets(home, 'default')).refresh_token).toBe(grant);
    expect((await client.getWorkflow(workflowId)).schedule?.crontab_entries.length).toBe(1);
  });

  it('a new folder: the connector is updated with the stored grant, no browser', async () => {
    const home = await onboarded('settings-folder', ['--no-workflow']);
    const result = await runCli(['setup', '--yes', '--no-check', '--no-open', '--timeout', '3', '--no-workflow'], {
      env: onboardingEnv(ob, home, { SYNCAUTH_CONNECTOR_NAME: 'settings-folder', SYNCAUTH_REMOTE_URL: 'dropbox://data/archive' }), cwd: home.dir,
    });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).not.toContain('/oauth2/authorize');
    const state = readProfileState(home, 'default');
    expect(state?.remoteUrl).toBe('dropbox://data/archive');
    expect((await client.getSource(state?.connectorId as string)).config.remote_url).toBe('dropbox://data/archive');
  });

  it('nothing changed is a re-authorization: the browser round as before', async () => {
    const home = await onboarded('settings-none', ['--no-workflow']);
    const result = await runCli(['setup', '--yes', '--no-check', '--no-open', '--timeout', '2', '--no-workflow'], {
      env: onboardingEnv(ob, home, { SYNCAUTH_CONNECTOR_NAME: 'settings-none' }), cwd: home.dir,
    });
    expect(result.stderr).toContain('the new authorization replaces its grant');
    expect(result.stderr).toContain('/oauth2/authorize');
    expect(result.code).not.toBe(0);
  });

  it('a stored grant revoked since: said, then the browser round', async () => {
    const home = await onboarded('settings-revoked', ['--no-workflow']);
    ob.emulator.revokeGrant((await storedSecrets(home, 'default')).refresh_token as string);
    const result = await runCli(['setup', '--yes', '--no-check', '--no-open', '--timeout', '2', '--no-workflow'], {
      env: onboardingEnv(ob, home, { SYNCAUTH_CONNECTOR_NAME: 'settings-revoked', SYNCAUTH_REMOTE_URL: 'dropbox://data/archive' }), cwd: home.dir,
    });
    expect(result.stderr).toContain("the profile's grant no longer works");
    expect(result.stderr).toContain('/oauth2/authorize');
    expect(readProfileState(home, 'default')?.remoteUrl).toBe('dropbox://data');
  });
});
