// `setup` proves the connector works: after creating it, the service's connection check runs and its result is
// shown. A failed check explains itself and exits 1, keeping the complete profile; `--no-check` skips it; setup
// ends with the next command to run.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_APP } from '../../src/emulator/index.js';
import { CLI } from '../helpers/cli.js';
import {
  grantRefreshToken, newHome, onboardingEnv, readProfileState, runCli, sources, startOnboarding, storedSecrets, type Home, type Onboarding,
} from '../helpers/onboarding.js';

// An app that may read file contents but not list folders: setup cannot check the folder itself, the service
// cannot list it, and only the connection check finds that out.
const NO_LIST_APP = {
  ...DEFAULT_APP,
  appKey: 'nolist3appkey8q',
  appSecret: 'nolist5secret1w',
  name: 'no metadata scope',
  scopes: ['account_info.read', 'files.content.read'],
};

let ob: Onboarding;

beforeAll(async () => {
  ob = await startOnboarding({ extraApps: [NO_LIST_APP], emulator: { checkDelayMs: 100 } });
});
afterAll(async () => ob.emulator.close());

function setupEnv(home: Home, extra: Record<string, string | undefined> = {}) {
  return onboardingEnv(ob, home, { SYNCAUTH_PROFILE: 'docs', ...extra });
}

const checksOf = (id: string) => ob.emulator.state.requests.filter((r) => r.path === `/api/v1/sources/${id}/connection-check`);

describe('setup runs the connection check', () => {
  it('passes, says so, and ends with the workflow run command', async () => {
    const home = newHome();
    const workflowId = ob.emulator.seeded?.workflowId as string;
    const result = await runCli(['setup', '--yes', '--connector-name', 'checked', '--workflow-id', workflowId], {
      env: setupEnv(home, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob) }), cwd: home.dir,
    });
    expect(result.code, result.stderr).toBe(0);
    const id = sources(ob).find((s) => s.name === 'checked')?.id as string;
    expect(checksOf(id).map((r) => r.method)).toContain('POST');
    expect(result.stdout).toContain("✓ the service's connection check of the connector passed");
    expect(result.stdout.trim().split('\n').at(-1)).toContain(`node ${CLI} workflow run ${workflowId}`);
  });

  it('with --json, reports the check and the next command', async () => {
    const home = newHome();
    const result = await runCli(['setup', '--yes', '--json', '--connector-name', 'checked-json'], {
      env: setupEnv(home, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob) }), cwd: home.dir,
    });
    expect(result.code, result.stderr).toBe(0);
    const out = JSON.parse(result.stdout) as { check: { status: string; reason: unknown }; next: string };
    expect(out.check).toMatchObject({ status: 'SUCCESS', reason: null });
    // The command as this run was started: node and the script (see setup-next-command.test.ts).
    expect(out.next).toBe(`node ${CLI} status --profile docs`);
  });

  it('a failed check explains itself, exits 1 and keeps the complete profile; `source check` says the same', async () => {
    const home = newHome();
    const refreshToken = await grantRefreshToken(ob, NO_LIST_APP);
    const result = await runCli(['setup', '--yes', '--connector-name', 'unlistable'], {
      env: setupEnv(home, { SYNCAUTH_APP_KEY: NO_LIST_APP.appKey, SYNCAUTH_APP_SECRET: NO_LIST_APP.appSecret, SYNCAUTH_REFRESH_TOKEN: refreshToken }),
      cwd: home.dir,
    });
    expect(result.code).toBe(1);
    const id = sources(ob).find((s) => s.name === 'unlistable')?.id as string;
    expect(id).toBeDefined();
    expect(result.stdout).toContain("✗ the service's connection check of the connector failed");
    expect(result.stderr).toContain('missing_scope');
    expect(result.stderr).toContain('files.metadata.read');
    expect(result.stderr).toContain(`setup kept the profile "docs"`);
    expect(result.stderr).toContain(`node ${CLI} source check ${id}`);
    // Kept and complete: the secrets, the connector id, no unfinished-setup error.
    expect((await storedSecrets(home, 'docs')).refresh_token).toBe(refreshToken);
    const state = await readProfileState(home, 'docs');
    expect(state).toMatchObject({ connectorId: id });
    expect(state?.lastError ?? null).toBeNull();

    const again = await runCli(['source', 'check', id], { env: setupEnv(home), cwd: home.dir });
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('missing_scope');
  });

  it('--no-check skips it', async () => {
    const home = newHome();
    const result = await runCli(['setup', '--yes', '--no-check', '--connector-name', 'unchecked'], {
      env: setupEnv(home, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob) }), cwd: home.dir,
    });
    expect(result.code, result.stderr).toBe(0);
    const id = sources(ob).find((s) => s.name === 'unchecked')?.id as string;
    expect(checksOf(id)).toEqual([]);
    expect(result.stdout).not.toContain('connection check');
    expect(result.stdout).toContain(`node ${CLI} status --profile docs`);
  });
});
