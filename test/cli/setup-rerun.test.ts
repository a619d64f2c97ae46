// Setup run again on an existing profile, and setup meeting a connector that already has its name: what changes
// is said before anything is written, and nothing changes that nobody confirmed (a question at a terminal, --yes
// for the profile, --adopt for someone else's connector). A plain re-authorization asks nothing.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/service/client.js';
import {
  grantRefreshToken, newHome, onboardingEnv, profileFile, readProfileState, runCli, sources, startOnboarding, storedSecrets,
  type Home, type Onboarding,
} from '../helpers/onboarding.js';

const OTHER_APP = { appKey: 'otherapp4key7zz', appSecret: 'otherapp9secret', name: 'another app' };

let ob: Onboarding;
let client: ServiceClient;

beforeAll(async () => {
  ob = await startOnboarding({ extraApps: [{ ...(await import('../../src/emulator/index.js')).DEFAULT_APP, ...OTHER_APP }] });
  client = new ServiceClient({ baseUrl: ob.emulator.url, apiKey: ob.apiKey });
});
afterAll(async () => {
  await client.close();
  await ob.emulator.close();
});

function tokenRequests(): number {
  return ob.emulator.state.requests.filter((r) => r.route === 'token').length;
}

/** A setup with a grant handed in (no browser), as a script runs it: no terminal. */
async function setup(home: Home, extra: Record<string, string | undefined> = {}, flags: string[] = []) {
  const refreshToken = await grantRefreshToken(ob);
  const before = tokenRequests();
  const result = await runCli(['setup', '--no-check', ...flags], { env: onboardingEnv(ob, home, { SYNCAUTH_REFRESH_TOKEN: refreshToken, ...extra }), cwd: home.dir });
  /** Requests setup itself sent to Dropbox's token endpoint. */
  return { ...result, tokenRequests: tokenRequests() - before };
}

async function onboarded(connectorName: string): Promise<Home> {
  const home = newHome();
  const first = await setup(home, { SYNCAUTH_CONNECTOR_NAME: connectorName }, ['--yes']);
  expect(first.code, first.stderr).toBe(0);
  return home;
}

describe('setup run again on an existing profile', () => {
  it('a changed setting without a terminal or --yes: exit 2 naming the change, nothing written, nothing sent to Dropbox', async () => {
    const home = await onboarded('rerun-refused');
    const stateBefore = readFileSync(profileFile(home, 'default'), 'utf8');
    const secretsBefore = await storedSecrets(home, 'default');
    const result = await setup(home, { SYNCAUTH_CONNECTOR_NAME: 'rerun-refused', SYNCAUTH_REMOTE_URL: 'dropbox://data/archive' });
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toContain('Profile "default" exists; this setup changes:');
    expect(result.stderr).toMatch(/Dropbox folder\s+dropbox:\/\/data → dropbox:\/\/data\/archive/);
    expect(result.stderr).toMatch(/--yes/);
    expect(readFileSync(profileFile(home, 'default'), 'utf8')).toBe(stateBefore);
    expect(await storedSecrets(home, 'default')).toEqual(secretsBefore);
    expect(result.tokenRequests).toBe(0);
  });

  it('the same with --yes: the change is shown, then applied', async () => {
    const home = await onboarded('rerun-yes');
    const result = await setup(home, { SYNCAUTH_CONNECTOR_NAME: 'rerun-yes', SYNCAUTH_REMOTE_URL: 'dropbox://data/archive' }, ['--yes']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/Dropbox folder\s+dropbox:\/\/data → dropbox:\/\/data\/archive/);
    expect(readProfileState(home, 'default')?.remoteUrl).toBe('dropbox://data/archive');
  });

  it('only a new grant (a re-authorization): no question, no --yes needed, and it says the settings stay', async () => {
    const home = await onboarded('rerun-same');
    const secretsBefore = await storedSecrets(home, 'default');
    const result = await setup(home, { SYNCAUTH_CONNECTOR_NAME: 'rerun-same' });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain('its settings stay as they are and the new authorization replaces its grant');
    expect((await storedSecrets(home, 'default')).refresh_token).not.toBe(secretsBefore.refresh_token);
  });

  it('a different app key is named as a change without showing either value', async () => {
    const home = await onboarded('rerun-app');
    const refreshToken = await grantRefreshToken(ob, { ...ob.app, ...OTHER_APP });
    const result = await runCli(['setup', '--no-check'], {
      env: onboardingEnv(ob, home, {
        SYNCAUTH_CONNECTOR_NAME: 'rerun-app', SYNCAUTH_REFRESH_TOKEN: refreshToken, SYNCAUTH_APP_KEY: OTHER_APP.appKey, SYNCAUTH_APP_SECRET: OTHER_APP.appSecret,
      }),
      cwd: home.dir,
    });
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toMatch(/Dropbox app key\s+stored value → a different value/);
    expect(result.stderr).toMatch(/Dropbox app secret\s+stored value → a different value/);
    for (const secret of [OTHER_APP.appKey, OTHER_APP.appSecret, ob.app.appKey, ob.app.appSecret, refreshToken]) {
      expect(result.stderr).not.toContain(secret);
      expect(result.stdout).not.toContain(secret);
    }
  });

  it('--no-workflow drops the workflow the profile had (the workflow itself is left as it is)', async () => {
    const workflow = await client.createWorkflow({ name: 'rerun-no-workflow', workflow_type: 'basic' });
    const home = newHome();
    const first = await setup(home, { SYNCAUTH_CONNECTOR_NAME: 'rerun-nowf', SYNCAUTH_WORKFLOW_ID: workflow.id }, ['--yes']);
    expect(first.code, first.stderr).toBe(0);
    expect(readProfileState(home, 'default')?.workflowId).toBe(workflow.id);
    const again = await setup(home, { SYNCAUTH_CONNECTOR_NAME: 'rerun-nowf' }, ['--yes', '--no-workflow']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toMatch(new RegExp(`workflow\\s+${workflow.id} → none`));
    expect(readProfileState(home, 'default')?.workflowId).toBeUndefined();
    expect((await client.getWorkflow(workflow.id)).sources).toHaveLength(1);
  });

  it('--no-workflow beside a workflow named now is a contradiction: exit 2, nothing stored', async () => {
    const home = newHome();
    const result = await setup(home, { SYNCAUTH_WORKFLOW_ID: '6f1c2d7e-2b1a-4c3d-9e8f-0a1b2c3d4e5f' }, ['--yes', '--no-workflow']);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toMatch(/--no-workflow: contradicts --workflow-id or SYNCAUTH_WORKFLOW_ID/);
    expect(readProfileState(home, 'default')).toBeUndefined();
    expect(result.tokenRequests).toBe(0);
  });
});

describe('a connector of the same name already on the service', () => {
  async function foreignConnector(name: string, type: 'dropbox' | 's3' = 'dropbox') {
    const config = type === 'dropbox'
      ? { remote_url: 'dropbox://data', token: 'sl.other', app_key: OTHER_APP.appKey, app_secret: OTHER_APP.appSecret, refresh_token: 'other-refresh' }
      : { remote_url: 's3://bucket/path', anonymous: true };
    return client.createSource({ name, type, config });
  }

  it("another app's, without a terminal: exit 2 before the browser, naming --adopt; nothing stored and the connector untouched", async () => {
    const foreign = await foreignConnector('taken-foreign');
    const home = newHome();
    const result = await setup(home, { SYNCAUTH_CONNECTOR_NAME: 'taken-foreign' }, ['--yes']);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toContain(`a source connector named "taken-foreign" (${foreign.id}) already exists`);
    expect(result.stderr).toContain('another Dropbox app');
    expect(result.stderr).toMatch(/--adopt/);
    expect(readProfileState(home, 'default')).toBeUndefined();
    expect(result.tokenRequests).toBe(0);
    expect((await client.getSource(foreign.id)).config.app_key).toBe(OTHER_APP.appKey);
  });

  it('with --adopt: taken over, now carrying this profile\'s app and grant, and no second connector', async () => {
    const foreign = await foreignConnector('taken-adopt');
    const home = newHome();
    const result = await setup(home, { SYNCAUTH_CONNECTOR_NAME: 'taken-adopt' }, ['--yes', '--adopt']);
    expect(result.code, result.stderr).toBe(0);
    expect(readProfileState(home, 'default')?.connectorId).toBe(foreign.id);
    expect((await client.getSource(foreign.id)).config.app_key).toBe(ob.app.appKey);
    expect(sources(ob).filter((s) => s.name.startsWith('taken-adopt'))).toHaveLength(1);
  });

  it("this profile's own (same app, same folder), with state lost: adopted without a question", async () => {
    const first = await onboarded('taken-ours');
    const id = readProfileState(first, 'default')?.connectorId;
    const home = newHome();
    const result = await setup(home, { SYNCAUTH_CONNECTOR_NAME: 'taken-ours' }, ['--yes']);
    expect(result.code, result.stderr).toBe(0);
    expect(readProfileState(home, 'default')?.connectorId).toBe(id);
  });

  it('a connector of another type can never be taken over, even with --adopt', async () => {
    await foreignConnector('taken-s3', 's3');
    const home = newHome();
    const result = await setup(home, { SYNCAUTH_CONNECTOR_NAME: 'taken-s3' }, ['--yes', '--adopt']);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toMatch(/a source connector named "taken-s3" \(.*\) already exists on the service and is of type s3/);
    expect(result.stderr).toMatch(/--connector-name/);
    expect(readProfileState(home, 'default')).toBeUndefined();
  });
});
