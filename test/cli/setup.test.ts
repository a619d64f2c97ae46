// `syncauth setup` end to end against the emulator: loopback, paste and refresh-token modes, adoption of an
// existing connector, workflow wiring, and the failures that must leave nothing behind.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_APP } from '../../src/emulator/index.js';
import {
  clearRequestLog, denyLikeABrowser, filesUnder, grantRefreshToken, newestAccessToken, newestRefreshToken, newHome, onboardingEnv,
  readProfileState, runCli, runWithApproval, runWithPastedCode, sources, spawnCli, startOnboarding, storedSecrets, type Home, type Onboarding,
} from '../helpers/onboarding.js';

// A second app on the same emulator whose Permissions tab lacks files.content.read.
const NO_CONTENT_APP = {
  ...DEFAULT_APP,
  appKey: 'noread7appkey2x',
  appSecret: 'noread9secret4y',
  name: 'no content scope',
  scopes: ['account_info.read', 'files.metadata.read'],
};

let ob: Onboarding;

beforeAll(async () => {
  ob = await startOnboarding({ extraApps: [NO_CONTENT_APP] });
});
afterAll(async () => ob.emulator.close());

function setupEnv(home: Home, extra: Record<string, string | undefined> = {}) {
  return onboardingEnv(ob, home, { SYNCAUTH_PROFILE: 'docs', ...extra });
}

function connectorsNamed(name: string) {
  return sources(ob).filter((s) => s.name === name);
}

interface SetupJson {
  profile: string;
  store: string;
  connector: { id: string; name: string; action: string };
  workflow: { id: string; action: string; schedule: { crontab_entries: { cron_expression: string }[] } | null } | null;
  accessTokenExpiresAt: string;
  notes: string[];
}

describe('setup succeeds', () => {
  it('loopback mode: the browser comes back to the registered port, secrets are stored, the connector is created', async () => {
    const home = newHome();
    const result = await runWithApproval(['setup', '--yes', '--no-open', '--connector-name', 'loopback-docs'], { env: setupEnv(home), cwd: home.dir });
    expect(result.stderr).not.toMatch(/^error/m);
    expect(result.code).toBe(0);
    const url = new URL(result.authorizeUrl);
    expect(url.searchParams.get('redirect_uri')).toBe(ob.redirectUri);
    expect(url.searchParams.get('token_access_type')).toBe('offline');
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    expect(result.stdout).toMatch(/✓ secrets stored in the file store for profile "docs"/);
    expect(result.stdout).toMatch(/✓ source connector loopback-docs created \([0-9a-f-]{36}\)/);
    expect(result.stderr).toMatch(/dropbox:\/\/data is readable \(4 entries\)/);

    const refreshToken = newestRefreshToken(ob);
    const [connector, ...others] = connectorsNamed('loopback-docs');
    expect(others).toEqual([]);
    expect(connector?.type).toBe('dropbox');
    expect(connector?.config).toEqual({
      remote_url: 'dropbox://data',
      recursive: false,
      refresh_token: refreshToken,
      app_key: ob.app.appKey,
      app_secret: ob.app.appSecret,
      token: newestAccessToken(ob),
    });
    expect(await storedSecrets(home, 'docs')).toEqual({
      app_key: ob.app.appKey, app_secret: ob.app.appSecret, refresh_token: refreshToken, api_key: ob.apiKey,
    });
    expect(readProfileState(home, 'docs')).toMatchObject({
      profile: 'docs', connectorId: connector?.id, connectorName: 'loopback-docs', remoteUrl: 'dropbox://data', needsReauthorization: false,
    });
  });

  it('paste mode (--no-browser): no redirect URI, the code is read from stdin', async () => {
    const home = newHome();
    const result = await runWithPastedCode(['setup', '--yes', '--no-browser', '--json', '--connector-name', 'pasted-docs'], { env: setupEnv(home), cwd: home.dir });
    expect(result.stderr).not.toMatch(/^error/m);
    expect(result.code).toBe(0);
    expect(new URL(result.authorizeUrl).searchParams.has('redirect_uri')).toBe(false);
    expect(result.stderr).toMatch(/Paste it here/);
    expect(result.stderr).toMatch(/No redirect URI is needed/);
    expect(ob.emulator.state.codes.get(result.pastedCode)).toMatchObject({ used: true, redirectUri: null });
    const out = JSON.parse(result.stdout) as SetupJson;
    expect(out.connector).toMatchObject({ name: 'pasted-docs', action: 'created' });
    expect(connectorsNamed('pasted-docs')).toHaveLength(1);
    expect((await storedSecrets(home, 'docs')).refresh_token).toBe(newestRefreshToken(ob));
  });

  it('SYNCAUTH_REFRESH_TOKEN: no browser, no authorize request, the given grant is used and stored', async () => {
    const home = newHome();
    const refreshToken = await grantRefreshToken(ob);
    clearRequestLog(ob);
    const result = await runCli(['setup', '--yes', '--json', '--connector-name', 'headless-docs'], {
      env: setupEnv(home, { SYNCAUTH_REFRESH_TOKEN: refreshToken }), cwd: home.dir,
    });
    expect(result.stderr).not.toMatch(/^error/m);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/no browser needed/);
    expect(result.stderr).not.toMatch(/oauth2\/authorize/);
    expect(ob.emulator.state.requests.filter((r) => r.route === 'authorize')).toEqual([]);
    expect(ob.emulator.state.requests.filter((r) => r.route === 'token')).toHaveLength(1);
    const out = JSON.parse(result.stdout) as SetupJson;
    expect(out).toMatchObject({ profile: 'docs', store: 'file', connector: { name: 'headless-docs', action: 'created' }, workflow: null });
    expect(connectorsNamed('headless-docs')[0]?.config.refresh_token).toBe(refreshToken);
    expect((await storedSecrets(home, 'docs')).refresh_token).toBe(refreshToken);
  });

  it('running setup twice keeps one connector (updated), and a fresh host adopts it by name', async () => {
    const home = newHome();
    const args = ['setup', '--yes', '--no-open', '--json', '--connector-name', 'twice-docs'];
    const first = await runWithApproval(args, { env: setupEnv(home), cwd: home.dir });
    expect(first.code).toBe(0);
    const created = (JSON.parse(first.stdout) as SetupJson).connector;
    expect(created.action).toBe('created');

    const second = await runWithApproval(args, { env: setupEnv(home), cwd: home.dir });
    expect(second.code).toBe(0);
    expect((JSON.parse(second.stdout) as SetupJson).connector).toEqual({ ...created, action: 'updated' });
    expect(connectorsNamed('twice-docs')).toHaveLength(1);
    // The second run is a new grant: the connector now carries it.
    expect(connectorsNamed('twice-docs')[0]?.config.refresh_token).toBe(newestRefreshToken(ob));

    // Another machine (no profile state) onboarding the same folder under the same name.
    const other = newHome();
    const third = await runCli(['setup', '--yes', '--json', '--connector-name', 'twice-docs'], {
      env: setupEnv(other, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob) }), cwd: other.dir,
    });
    expect(third.stderr).not.toMatch(/^error/m);
    expect(third.code).toBe(0);
    expect((JSON.parse(third.stdout) as SetupJson).connector).toEqual({ ...created, action: 'adopted' });
    expect(connectorsNamed('twice-docs')).toHaveLength(1);
    expect(readProfileState(other, 'docs')?.connectorId).toBe(created.id);
  });

  it.each([
    ['every 4 hours', '0 */4 * * *'],
    ['daily', '0 0 * * *'],
    ['every 15 minutes', '*/15 * * * *'],
  ])('wires the workflow with schedule "%s" → cron %s', async (schedule, cron) => {
    const home = newHome();
    const workflowId = ob.emulator.seeded?.workflowId as string;
    const result = await runCli(['setup', '--yes', '--json', '--connector-name', 'wired-docs', '--workflow-id', workflowId, '--schedule', schedule], {
      env: setupEnv(home, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob) }), cwd: home.dir,
    });
    expect(result.stderr).not.toMatch(/^error/m);
    expect(result.code).toBe(0);
    const out = JSON.parse(result.stdout) as SetupJson;
    expect(out.workflow).toMatchObject({ id: workflowId, action: 'updated', schedule: { crontab_entries: [{ cron_expression: cron }] } });
    const workflow = ob.emulator.state.workspaces.get('default')?.workflows.get(workflowId);
    expect(workflow?.sources).toEqual([out.connector.id]);
    expect(workflow?.schedule).toEqual({ crontab_entries: [{ cron_expression: cron }] });
    expect(readProfileState(home, 'docs')).toMatchObject({ workflowId, schedule });
  });

  it('prints the workflow and its cron in the text summary', async () => {
    const home = newHome();
    const workflowId = ob.emulator.seeded?.workflowId as string;
    const result = await runCli(['setup', '--yes', '--connector-name', 'wired-text', '--workflow-id', workflowId, '--schedule', 'weekly'], {
      env: setupEnv(home, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob) }), cwd: home.dir,
    });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`(${workflowId}) reads from it, schedule weekly (0 0 * * 0)`);
  });
});

describe('setup fails at the service', () => {
  it('keeps the grant with state naming the failure, and `refresh` finishes the job', async () => {
    const home = newHome();
    const refreshToken = await grantRefreshToken(ob);
    // Setup's checks before the grant is used would catch a refusal from the start; the service refuses only
    // once the grant is being renewed (held back a second, so the refusal is in place before setup goes on).
    ob.emulator.setFaults([{ route: 'token', latencyMs: 1_000, times: 1 }]);
    const proc = spawnCli(['setup', '--yes', '--connector-name', 'refused-docs'], {
      env: setupEnv(home, { SYNCAUTH_REFRESH_TOKEN: refreshToken }), cwd: home.dir, stdin: '',
    });
    const result = await proc.waitForStderr(/no browser needed/)
      .then(() => ob.emulator.setFaults([{ route: 'sources', status: 403 }]))
      .then(() => proc.result)
      .finally(() => ob.emulator.setFaults([]));
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^error: /m);
    expect((await storedSecrets(home, 'docs')).api_key).toBe(ob.apiKey);
    const state = readProfileState(home, 'docs');
    expect(state).toMatchObject({ connectorName: 'refused-docs', lastError: { terminal: false } });
    expect((state?.lastError as { code: string }).code).not.toBe('SYNCAUTH_SETUP_UNFINISHED');
    expect(state?.connectorId).toBeUndefined();

    const refreshed = await runCli(['refresh'], { env: { SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey, SYNCAUTH_PROFILE: 'docs' }, cwd: home.dir });
    expect(refreshed.stderr).not.toMatch(/^error/m);
    expect(refreshed.code).toBe(0);
    expect(connectorsNamed('refused-docs')).toHaveLength(1);
    expect(readProfileState(home, 'docs')).toMatchObject({ connectorId: connectorsNamed('refused-docs')[0]?.id });
    expect(readProfileState(home, 'docs')?.lastError).toBeUndefined();
  });
});

describe('setup fails and stores nothing', () => {
  async function expectNothingStored(home: Home, connectorName: string) {
    expect(filesUnder(home.configDir)).toEqual([]);
    expect(connectorsNamed(connectorName)).toEqual([]);
  }

  it('a subfolder that does not exist: a clear error naming it', async () => {
    const home = newHome();
    const result = await runWithApproval(['setup', '--yes', '--no-open', '--connector-name', 'missing-folder'], {
      env: setupEnv(home, { SYNCAUTH_REMOTE_URL: 'dropbox://reports' }), cwd: home.dir,
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/error: the folder \/reports does not exist in the app folder/);
    expect(result.stderr).toMatch(/hint: create it inside Dropbox\/Apps\//);
    expect(result.stdout).toBe('');
    await expectNothingStored(home, 'missing-folder');
  });

  it('an app without files.content.read: a clear error naming the permission', async () => {
    const home = newHome();
    const result = await runWithApproval(['setup', '--yes', '--no-open', '--connector-name', 'no-scope'], {
      env: setupEnv(home, { SYNCAUTH_APP_KEY: NO_CONTENT_APP.appKey, SYNCAUTH_APP_SECRET: NO_CONTENT_APP.appSecret }), cwd: home.dir,
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/error: the grant lacks files\.content\.read/);
    expect(result.stderr).toMatch(/hint: .*Permissions tab, tick files\.content\.read/);
    expect(result.stdout).toBe('');
    await expectNothingStored(home, 'no-scope');
  });

  it('the same missing permission in write mode names files.content.write', async () => {
    const home = newHome();
    const result = await runWithApproval(['setup', '--yes', '--no-open', '--access', 'read-write', '--connector-name', 'no-write'], { env: setupEnv(home), cwd: home.dir });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/error: the grant lacks files\.content\.write/);
    await expectNothingStored(home, 'no-write');
  });

  it('Deny on the authorize page (access_denied): an error, and nothing written or sent to the service', async () => {
    const denying = await startOnboarding({ autoApprove: false });
    try {
      const home = newHome();
      const result = await runWithApproval(['setup', '--yes', '--no-open', '--connector-name', 'denied'], {
        env: onboardingEnv(denying, home), cwd: home.dir, browser: denyLikeABrowser,
      });
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/error: authorization was refused: you clicked Deny on the Dropbox page/);
      expect(result.stdout).toBe('');
      expect(filesUnder(home.configDir)).toEqual([]);
      // The checks before the browser read the service (a GET); nothing was sent to the token endpoint or written.
      expect(denying.emulator.state.requests.filter((r) => r.route === 'token' || (r.route === 'sources' && r.method !== 'GET'))).toEqual([]);
      expect(denying.emulator.state.grants.size).toBe(0);
    } finally {
      await denying.emulator.close();
    }
  });

  it('an access token pasted instead of the code is explained (exit 2), nothing sent or written', async () => {
    const home = newHome();
    clearRequestLog(ob);
    const result = await runCli(['setup', '--yes', '--no-browser'], { env: setupEnv(home), cwd: home.dir, stdin: `sl.u.AbCdEf${'x'.repeat(40)}\n` });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/error: that looks like an access token \(it starts with "sl\."\), not the access code/);
    expect(result.stderr).toMatch(/hint: paste the short code/);
    expect(result.stderr).not.toContain('AbCdEf');
    expect(filesUnder(home.configDir)).toEqual([]);
    // Only the checks before the URL is shown (reads): the token was sent nowhere.
    expect(ob.emulator.state.requests.filter((r) => r.method !== 'GET')).toEqual([]);
  });

  it('no code at all on stdin (paste mode) is exit 2 and nothing sent', async () => {
    const home = newHome();
    clearRequestLog(ob);
    const result = await runCli(['setup', '--yes', '--no-browser'], { env: setupEnv(home), cwd: home.dir, stdin: '' });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/error: no access code was given/);
    expect(filesUnder(home.configDir)).toEqual([]);
    // Only the checks before the URL is shown (reads).
    expect(ob.emulator.state.requests.filter((r) => r.method !== 'GET')).toEqual([]);
  });
});
